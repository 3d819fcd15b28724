"""DP-MERF: the released statistic's sensitivity, the public bandwidth, the ledger, and the samples."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from dpgym import Budget, Column, ColumnKind, Guarantee, Schema
from dpgym.privacy.reaccount import reaccount
from dpgym.privacy import calibrate_gaussian
from dpgym.plugins.generators import dp_merf
from dpgym.plugins.generators.dp_merf.model import FeatureMap, embedding_release, l2_sensitivity
from dpgym.plugins.nn.tabular import LabelledLayout

SMALL = {"num_features": 64, "iterations": 5, "batch_size": 64}


def feature_map(schema, num_features=200, bandwidth=0.5, seed=0):
    layout = LabelledLayout.of(schema)
    return layout, FeatureMap(layout, num_features, bandwidth, torch.Generator().manual_seed(seed)).double()


def release(layout, fmap, frame):
    x = torch.as_tensor(layout.features.encode(frame), dtype=torch.float64)
    return embedding_release(fmap(x), torch.as_tensor(layout.labels(frame)), layout.n_classes)


def test_every_encoded_row_has_the_same_feature_norm(adult_schema):
    layout, fmap = feature_map(adult_schema)
    rng = np.random.default_rng(0)
    # arbitrary points of the encoded box, not only valid rows: the bound must not rely on the data
    x = torch.as_tensor(rng.random((200, layout.features.width)), dtype=torch.float64)
    onehot = layout.features.encode(pd.DataFrame({c.name: [c.categories[0]] * 200 if not c.is_numeric else [c.min] * 200
                                                   for c in adult_schema.columns}))
    x[:, [i for s, e in layout.categorical_blocks() for i in range(s, e)]] = torch.as_tensor(
        onehot[:, [i for s, e in layout.categorical_blocks() for i in range(s, e)]])
    norms = fmap(x).norm(dim=1) ** 2
    assert fmap.squared_norm == 2
    assert torch.allclose(norms, torch.full_like(norms, 2.0), atol=1e-12)


def test_rows_with_missing_values_keep_the_feature_norm_and_so_the_sensitivity():
    schema = Schema("gaps", (Column("h", ColumnKind.CONTINUOUS, min=0.0, max=2.0, nullable=True),
                             Column("c", ColumnKind.CATEGORICAL, categories=("r", "b"), nullable=True),
                             Column("y", ColumnKind.BINARY, categories=("no", "yes"))), target="y")
    frame = schema.conform(pd.DataFrame({"h": [0.5, None, 1.5, None], "c": ["r", None, None, "b"],
                                         "y": ["no", "yes", "no", "yes"]}))
    layout, fmap = feature_map(schema)
    norms = fmap(torch.as_tensor(layout.features.encode(frame), dtype=torch.float64)).norm(dim=1) ** 2
    assert fmap.squared_norm == 2 and fmap.n_categorical_columns == 2  # c's block and h's missing flag
    assert torch.allclose(norms, torch.full_like(norms, 2.0), atol=1e-12)


def test_removing_any_row_moves_the_release_by_the_stated_sensitivity(adult_rows, adult_schema):
    layout, fmap = feature_map(adult_schema)
    full = release(layout, fmap, adult_rows)
    bound = l2_sensitivity(fmap)
    assert bound == pytest.approx(math.sqrt(3))
    for i in range(0, len(adult_rows), 37):
        neighbour = release(layout, fmap, adult_rows.drop(index=i))
        assert (full - neighbour).norm().item() <= bound + 1e-9
    # the bound is tight: every row moves it by exactly Δ₂
    assert (full - release(layout, fmap, adult_rows.drop(index=0))).norm().item() == pytest.approx(bound)


def test_sensitivity_follows_the_kinds_of_feature_columns(small_schema, small_frame):
    from dpgym import Column, ColumnKind, Schema

    numeric_only = Schema("n", (Column("a", ColumnKind.CONTINUOUS, min=0, max=1),
                                Column("y", ColumnKind.BINARY, categories=("0", "1"))), target="y")
    layout, fmap = feature_map(numeric_only)
    assert l2_sensitivity(fmap) == pytest.approx(math.sqrt(2))
    frame = pd.DataFrame({"a": [0.1, 0.9, 0.4], "y": pd.Categorical(["0", "1", "1"], categories=["0", "1"])})
    change = (release(layout, fmap, frame) - release(layout, fmap, frame.iloc[:2])).norm().item()
    assert change == pytest.approx(math.sqrt(2))
    layout, fmap = feature_map(small_schema)
    frame = small_schema.conform(small_frame, "small")
    change = (release(layout, fmap, frame) - release(layout, fmap, frame.iloc[1:])).norm().item()
    assert change == pytest.approx(l2_sensitivity(fmap)) == pytest.approx(math.sqrt(3))


def test_bandwidth_and_frequencies_do_not_depend_on_the_rows(adult_split, adult_schema):
    fits = []
    for rows in (adult_split.train.iloc[:300], adult_split.train.iloc[-300:]):
        gen = dp_merf.SPEC.build(SMALL)
        gen.fit(rows, adult_schema, Budget(1.0, 1e-5), seed=3)
        fits.append(gen)
    assert fits[0].bandwidth_ == fits[1].bandwidth_ == pytest.approx(1.0)  # √(6/6): Adult has 6 numbers
    assert torch.equal(fits[0].feature_map_.frequencies, fits[1].feature_map_.frequencies)


def test_ledger_is_one_gaussian_release_that_reaccounts(adult_rows, adult_schema):
    budget = Budget(1.0, 1e-5)
    gen = dp_merf.SPEC.build(SMALL)
    ledger = gen.fit(adult_rows, adult_schema, budget, seed=0)
    (entry,) = ledger.entries
    assert entry.type == "gaussian" and ledger.guarantee is Guarantee.FORMAL
    assert entry.event.l2_sensitivity == pytest.approx(math.sqrt(3))
    assert entry.event.sigma == pytest.approx(math.sqrt(3) * calibrate_gaussian(1.0, 1e-5))
    check = reaccount(ledger, budget)
    assert check.verdict == "ok" and check.epsilon <= 1.0 + 0.02


def test_noise_reaches_the_released_class_proportions(adult_rows, adult_schema):
    exact = adult_rows["income"].value_counts(normalize=True).sort_index().to_numpy()
    private = dp_merf.SPEC.build(SMALL)
    private.fit(adult_rows, adult_schema, Budget(0.05, 1e-5), seed=0)
    public = dp_merf.SPEC.build(SMALL)
    public.fit(adult_rows, adult_schema, Budget(math.inf), seed=0)
    assert np.allclose(public.proportions_, exact)
    assert not np.allclose(private.proportions_, exact, atol=1e-3)


def test_non_private_mode_has_a_non_private_ledger(adult_rows, adult_schema):
    ledger = dp_merf.SPEC.build(SMALL).fit(adult_rows, adult_schema, Budget(math.inf), seed=0)
    assert ledger.is_non_private and ledger.guarantee is Guarantee.FORMAL
    assert reaccount(ledger, Budget(math.inf)).verdict == "ok"


def test_samples_are_valid_rows_of_the_schema(adult_rows, adult_schema):
    gen = dp_merf.SPEC.build(SMALL)
    gen.fit(adult_rows, adult_schema, Budget(1.0, 1e-5), seed=0)
    synthetic = adult_schema.conform(gen.sample(500, seed=1), "dp_merf sample")
    assert list(synthetic.columns) == adult_schema.names and len(synthetic) == 500
    assert synthetic["income"].nunique() == 2


def test_same_seed_same_samples_and_another_seed_differs(adult_rows, adult_schema):
    def run(fit_seed):
        gen = dp_merf.SPEC.build(SMALL)
        gen.fit(adult_rows, adult_schema, Budget(1.0, 1e-5), seed=fit_seed)
        return gen.sample(200, seed=7)

    pd.testing.assert_frame_equal(run(0), run(0))
    assert not run(0).equals(run(1))


def test_invalid_hyper_parameters_are_refused():
    with pytest.raises(ValueError, match="even"):
        dp_merf.SPEC.build({"num_features": 101})
    with pytest.raises(ValueError, match="bandwidth"):
        dp_merf.SPEC.build({"bandwidth": 0.0})
