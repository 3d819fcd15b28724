"""The marginal figure's bins resolve concentrated data and keep every row; the metric panels draw
whatever bounds a leaderboard holds."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpgym.report.figures import DISPLAY_BINS, generator_palette, marginal_shares, marginals, metric_curves
from dpgym.schema import Column, ColumnKind, Schema


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


def test_a_single_epsilon_panel_takes_bounds_that_round_past_the_mean():
    """Seeds that agree give a bootstrap interval equal to the mean up to rounding; a bound 1e-16 on
    the wrong side of it must still draw (measured: 0.35048677491766594 inside [0.350486774917666] * 2)."""
    mean, bound = 0.35048677491766594, 0.350486774917666
    board = pd.DataFrame({"generator": ["a", "b"], "epsilon": [1.0, 1.0], "apc_mean": [mean, 0.5],
                          "apc_ci_low": [bound, 0.4], "apc_ci_high": [bound, 0.6]})
    assert bound > mean
    figure = metric_curves(board, ["apc"], {"apc": "higher"}, generator_palette(["a", "b"]))
    assert figure.startswith("data:image/png;base64,")


def test_an_infinite_mean_is_named_in_its_panel_not_lost(monkeypatch):
    import dpgym.report.figures as figures

    monkeypatch.setattr(figures, "to_data_uri", lambda fig, tight=False: [t.get_text() for ax in fig.axes for t in ax.texts])
    board = pd.DataFrame({"generator": ["a", "a", "b", "b"], "epsilon": [1.0, 4.0, 1.0, 4.0],
                          "ll_mean": [-np.inf, -2.0, -3.0, -1.0], "ll_ci_low": [-np.inf, -2.5, -3.5, -1.5],
                          "ll_ci_high": [-1.0, -1.5, -2.5, -0.5]})
    texts = metric_curves(board, ["ll"], {"ll": "higher"}, generator_palette(["a", "b"]))
    assert texts == ["not drawn: a −∞ at ε=1"]
    single = board[board.epsilon == 1.0]  # one ε: a generator with only an infinite mean has no point at all
    assert metric_curves(single, ["ll"], {"ll": "higher"}, generator_palette(["a", "b"])) == ["not drawn: a −∞ at ε=1"]


def test_up_to_sixteen_generators_get_colours_apart_from_each_other_and_from_real_and_synthetic():
    """husl's hues, used beyond 8 before, came within 0.08-0.10 of each other (13-16 generators)."""
    from itertools import combinations

    import seaborn as sns

    reserved = sns.color_palette()[:2]  # blue and orange: real and synthetic in the marginal figures
    for count in range(2, 17):
        colours = list(generator_palette([f"g{i:02d}" for i in range(count)]).values())
        assert min(np.linalg.norm(np.subtract(a, b)) for a, b in combinations(colours + reserved, 2)) > 0.1, count
