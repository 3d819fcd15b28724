"""The marginal figure's bins: they resolve concentrated data and keep every row."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.report.figures import DISPLAY_BINS, marginal_shares, marginals
from harness.schema import Column, ColumnKind, Schema


def test_numeric_bins_span_the_samples_not_the_public_range_or_their_outliers():
    """Life Science lies in about a tenth of its public [-1, 1]: bins over [-1, 1], or over a range
    one stray synthetic value stretches, would leave it in a few bars."""
    rng = np.random.default_rng(0)
    schema = Schema("s", (Column("x", ColumnKind.CONTINUOUS, min=-1.0, max=1.0),))
    real = pd.DataFrame({"x": rng.normal(-0.05, 0.02, 5_000)})
    synthetic = pd.DataFrame({"x": np.append(rng.normal(0.0, 0.05, 4_999), 7.0)})  # one value beyond the bound
    shares = marginal_shares(real, synthetic, schema)
    binned = shares[shares.bin != "missing"]
    assert len(binned) == DISPLAY_BINS
    quantiles = [np.quantile(frame.x.clip(-1, 1), [0.005, 0.995]) for frame in (real, synthetic)]
    span = [min(q[0] for q in quantiles), max(q[1] for q in quantiles)]
    assert np.allclose([binned.low.min(), binned.high.max()], span, rtol=0, atol=1e-12)
    assert binned.high.max() < 0.2 and (binned.real > 0).sum() > 30
    assert abs(binned.synthetic.sum() - 1.0) < 1e-12  # the tails, and the stray value, fill the edge bins
    assert binned.synthetic.iloc[0] >= 0.005 and binned.synthetic.iloc[-1] >= 0.005


def test_narrow_integers_get_one_bin_per_value_and_missing_and_categories_are_kept():
    schema = Schema("s", (Column("age", ColumnKind.INTEGER, min=0, max=9),
                          Column("colour", ColumnKind.CATEGORICAL, categories=("red", "green"))))
    real = pd.DataFrame({"age": [0, 1, 1, 9], "colour": ["red", "red", "green", None]})
    synthetic = pd.DataFrame({"age": [2, 2, None, 9], "colour": ["green"] * 4})
    shares = marginal_shares(real, synthetic, schema).set_index(["column", "bin"])
    assert list(shares.loc["age"].index) == [f"{v - 0.5:g}" for v in range(10)] + ["missing"]
    assert shares.loc[("age", "0.5"), "real"] == 0.5 and shares.loc[("age", "missing"), "synthetic"] == 0.25
    assert shares.loc[("colour", "red"), "real"] == 0.5 and shares.loc[("colour", "missing"), "real"] == 0.25
    assert shares.loc[("colour", "green"), "synthetic"] == 1.0
    assert marginals(shares.reset_index(), schema).startswith("data:image/png;base64,")
