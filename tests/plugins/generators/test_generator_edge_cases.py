"""Edge cases shared by the generators: tables their models cannot hold, far-from-zero bounds,
one-column tables, and hyper-parameters a suite file must be able to write."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpgym import Budget, Column, ColumnKind, Schema
from dpgym.registry import Registry
from dpgym.plugins.generators.dp_autogan.model import PRESETS, build_discriminator
from dpgym.plugins.generators.dp_hflow import DEFAULTS as HFLOW_DEFAULTS
from dpgym.plugins.generators.dp_hflow.model import DPHFlow

INF = Budget(float("inf"), 0.0)


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.discover()


NUMERIC_DENSITIES = ["dp_nf", "dp_mog"]  # the categorical columns are drawn uniformly, not modelled
# Models where a missing value has a place: the one-hot encodings (`TableEncoder`, `MixedEncoding`),
# decoding by draws, so that a 30 % missing share is not rounded away as an argmax would; and
# DP-HFlow's missing flags and codes.
MISSING_AWARE_MODELS = {"dp_merf": {}, "dp_cgan": {}, "dp_autogan": {"decoding": "sample"}, "dp_vae": {"decoding": "sample"},
                        "dp_hflow": {}}


@pytest.mark.parametrize("name", NUMERIC_DENSITIES)
def test_a_model_without_missing_values_refuses_nullable_columns_by_name(registry, name):
    """Before: a NaN reached the arithmetic, and dp_mog released an all-NaN model, dp_nf silently
    dropped the rows."""
    schema, frame = _table_with_gaps("height")
    spec = registry.generator(name)
    with pytest.raises(ValueError, match=r"cannot model missing values, and schema 'gaps' declares nullable columns \['height'\]"):
        spec.build(dict(spec.quick_params)).fit(frame, schema, Budget(1.0, 1e-5), 0)


@pytest.mark.parametrize("name", NUMERIC_DENSITIES)
def test_a_numeric_density_still_fits_beside_a_nullable_column_it_does_not_model(registry, name):
    schema, frame = _table_with_gaps("colour")
    spec = registry.generator(name)
    model = spec.build(dict(spec.quick_params))
    model.fit(frame, schema, Budget(1.0, 1e-5), 0)
    assert len(schema.conform(model.sample(30, 1))) == 30


@pytest.mark.slow
@pytest.mark.parametrize("name", MISSING_AWARE_MODELS)
def test_a_model_with_a_place_for_missing_values_draws_them_where_the_schema_allows(registry, name):
    """Before, these refused any nullable column, so a user's table with gaps ran only the references."""
    schema, frame = _table_with_gaps("height", "colour", rows=400)
    spec = registry.generator(name)
    model = spec.build({**spec.quick_params, **MISSING_AWARE_MODELS[name]})
    model.fit(frame, schema, Budget(1.0, 1e-5), 0)
    drawn = schema.conform(model.sample(2000, 1))
    for column in ("height", "colour"):  # 20 % missing in the training rows
        assert 0.0 < drawn[column].isna().mean() < 1.0, column
    assert drawn["label"].notna().all()


def test_a_labelled_model_refuses_a_nullable_class_label_by_name(registry):
    schema, frame = _table_with_gaps("label")
    spec = registry.generator("dp_merf")
    with pytest.raises(ValueError, match=r"class label cannot model missing values, and schema 'gaps' declares nullable columns \['label'\]"):
        spec.build(dict(spec.quick_params)).fit(frame, schema, Budget(1.0, 1e-5), 0)


def _table_with_gaps(*nullable: str, rows: int = 50) -> tuple[Schema, pd.DataFrame]:
    columns = (Column("height", ColumnKind.CONTINUOUS, min=0.0, max=2.0, nullable="height" in nullable),
               Column("colour", ColumnKind.CATEGORICAL, categories=("red", "blue"), nullable="colour" in nullable),
               Column("label", ColumnKind.BINARY, categories=("no", "yes"), nullable="label" in nullable))
    schema = Schema("gaps", columns, target="label")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"height": rng.uniform(0, 2, rows), "colour": rng.choice(["red", "blue"], rows),
                          "label": rng.choice(["no", "yes"], rows)})
    frame.loc[::5, list(nullable)] = None
    return schema, schema.conform(frame)


def test_dp_hflow_is_unchanged_by_translating_a_column_far_from_zero():
    """Before, raw values were cast to float32 before the lower bound came off: at 1.7e9 (a timestamp)
    float32's spacing is 128, so 329 distinct values trained as 9 and log_prob could not tell 1 from 63."""
    offset = 1_700_000_000
    rng = np.random.default_rng(0)
    base = pd.DataFrame({"ts": rng.integers(0, 1001, 300), "x": rng.uniform(0, 1, 300)})
    held = pd.DataFrame({"ts": [1, 40, 63, 500, 999], "x": [0.5] * 5})
    results = []
    for shift in (0, offset):
        schema = Schema("s", (Column("ts", ColumnKind.INTEGER, min=shift, max=shift + 1000),
                              Column("x", ColumnKind.CONTINUOUS, min=0.0, max=1.0)))
        model = DPHFlow(**{**HFLOW_DEFAULTS, "blocks": 1, "hidden": [16], "epochs": 2.0, "batch_size": 64, "device": "cpu"})
        model.fit(schema.conform(base.assign(ts=base.ts + shift)), schema, INF, seed=0)
        results.append((model.log_prob(schema.conform(held.assign(ts=held.ts + shift))),
                        model.sample(500, 1).ts.to_numpy() - shift))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert len(np.unique(results[0][0])) == 5


@pytest.mark.parametrize("budget", [Budget(1.0, 1e-5), INF], ids=["private", "non-private"])
def test_dp_autogan_fits_a_table_that_encodes_to_one_coordinate(registry, budget):
    """The ADULT critic's widths are 2/3 and 1/3 of the encoding's; on one coordinate the second
    rounded to 0, a critic that ignores its input (ε = ∞) or a crash (finite ε)."""
    assert all(layer.out_features >= 1 for layer in build_discriminator(PRESETS["adult"], 1)
               if hasattr(layer, "out_features"))
    schema = Schema("one", (Column("x", ColumnKind.CONTINUOUS, min=0.0, max=1.0),))
    frame = schema.conform(pd.DataFrame({"x": np.random.default_rng(0).uniform(0, 1, 100)}))
    spec = registry.generator("dp_autogan")
    model = spec.build(dict(spec.quick_params))
    model.fit(frame, schema, budget, 0)
    assert len(schema.conform(model.sample(20, 1))) == 20


def test_dp_nf_alpha_bound_zero_is_the_papers_unbounded_alpha(registry):
    """TOML has no None: 0 is the suite-file spelling of the unclamped α the docstring promises."""
    spec = registry.generator("dp_nf")
    assert spec.build({"alpha_bound": 0.0}).alpha_bound is None
    assert spec.build({}).alpha_bound is None  # the default is the paper's
    assert spec.build({"alpha_bound": 7.0}).alpha_bound == 7.0
    with pytest.raises(ValueError, match="alpha_bound must be ≥ 0"):
        spec.build({"alpha_bound": -1.0})
