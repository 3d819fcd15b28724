"""The fidelity metric: marginal TVD/KS on public bins and the Kendall-τ matrix distance."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pluggy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgym import hookspecs
from dpgym.schema import Column, ColumnKind, Schema
from dpgym.specs import Direction, MetricContext
from dpgym.plugins.metrics import fidelity as fidelity_plugin
from dpgym.plugins.metrics.fidelity import compute as fidelity

SCHEMA = Schema(
    "toy",
    columns=(
        Column("x", ColumnKind.CONTINUOUS, min=-5.0, max=5.0),
        Column("n", ColumnKind.INTEGER, min=0, max=10),
        Column("wide", ColumnKind.INTEGER, min=0, max=1000),
        Column("colour", ColumnKind.CATEGORICAL, categories=("red", "green", "blue")),
        Column("size", ColumnKind.ORDINAL, categories=("small", "medium", "large")),
        Column("flag", ColumnKind.BINARY, categories=("no", "yes")),
    ),
)


def correlated_rows(n: int, seed: int = 0) -> pd.DataFrame:
    """Every column is a noisy function of one latent variable, so all pairs are dependent."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    raw = pd.DataFrame(
        {
            "x": np.clip(z + 0.3 * rng.normal(size=n), -5, 5),
            "n": np.clip(np.round(5 + 2 * z + rng.normal(size=n)), 0, 10).astype(int),
            "wide": np.clip(np.round(500 + 150 * z + 50 * rng.normal(size=n)), 0, 1000).astype(int),
            "colour": np.array(["red", "green", "blue"])[np.digitize(z + 0.5 * rng.normal(size=n), [-0.5, 0.5])],
            "size": np.array(["small", "medium", "large"])[np.digitize(z + 0.5 * rng.normal(size=n), [-0.5, 0.5])],
            "flag": np.where(z + 0.5 * rng.normal(size=n) > 0, "yes", "no"),
        }
    )
    return SCHEMA.conform(raw)


def context(train: pd.DataFrame, synthetic: pd.DataFrame, seed: int = 0, schema: Schema = SCHEMA) -> MetricContext:
    return MetricContext(train=train, test=train, synthetic=synthetic, schema=schema, seed=seed)


def test_identical_tables_score_zero():
    rows = correlated_rows(3000)
    result = fidelity.evaluate(context(rows, rows.copy()))
    assert result.values["marginal_tvd"] == pytest.approx(0.0, abs=1e-12)
    assert result.values["marginal_ks"] == pytest.approx(0.0, abs=1e-12)
    assert result.values["kendall_rmse"] == pytest.approx(0.0, abs=1e-12)
    assert result.values["kendall_mae"] == pytest.approx(0.0, abs=1e-12)


def test_independently_shuffled_columns_keep_marginals_but_lose_dependence():
    rows = correlated_rows(3000)
    rng = np.random.default_rng(1)
    shuffled = pd.DataFrame({name: rows[name].to_numpy()[rng.permutation(len(rows))] for name in SCHEMA.names})
    result = fidelity.evaluate(context(rows, shuffled))
    assert result.values["marginal_tvd"] == pytest.approx(0.0, abs=1e-12)
    assert result.values["kendall_rmse"] > 0.3
    assert 0 < result.values["kendall_mae"] <= result.values["kendall_rmse"]


def test_fresh_draw_from_the_same_distribution_scores_near_zero():
    result = fidelity.evaluate(context(correlated_rows(5000, seed=0), correlated_rows(5000, seed=1)))
    assert result.values["marginal_tvd"] < 0.05
    assert result.values["marginal_ks"] < 0.05
    assert result.values["kendall_rmse"] < 0.05


def test_disjoint_categories_have_total_variation_one():
    col = SCHEMA["colour"]
    real = pd.Series(["red"] * 10, dtype=col.dtype)
    synthetic = pd.Series(["blue"] * 5 + ["green"] * 5, dtype=col.dtype)
    assert fidelity.total_variation(real, synthetic, col) == pytest.approx(1.0)


def test_small_range_integers_are_compared_value_by_value():
    # 20 equal bins over [0, 30] would put 3 and 4 in the same bin; one bin per value separates them.
    col = Column("count", ColumnKind.INTEGER, min=0, max=30)
    assert fidelity.total_variation(pd.Series([3] * 10), pd.Series([4] * 10), col) == pytest.approx(1.0)


def test_wide_numeric_columns_use_bins_over_the_public_bounds():
    col = SCHEMA["wide"]  # 0..1000 in 20 bins of width 50
    assert fidelity.total_variation(pd.Series([510] * 10), pd.Series([540] * 10), col) == pytest.approx(0.0)
    assert fidelity.total_variation(pd.Series([510] * 10), pd.Series([560] * 10), col) == pytest.approx(1.0)


def test_missing_values_count_as_their_own_bin():
    col = Column("maybe", ColumnKind.CONTINUOUS, min=0.0, max=1.0, nullable=True)
    real = pd.Series([0.5, 0.5, np.nan, np.nan])
    synthetic = pd.Series([0.5, 0.5, 0.5, 0.5])
    assert fidelity.total_variation(real, synthetic, col) == pytest.approx(0.5)


def test_constant_synthetic_column_scores_tau_zero_and_is_flagged():
    rows = correlated_rows(2000)
    synthetic = rows.copy()
    synthetic["flag"] = pd.Series(["yes"] * len(rows), dtype=SCHEMA["flag"].dtype)
    result = fidelity.evaluate(context(rows, synthetic))
    flagged = result.detail["kendall_undefined_synthetic"]
    assert sorted(flagged) == sorted(f"{a}|flag" for a in SCHEMA.names if a != "flag")
    assert all(result.detail["kendall_synthetic"][pair] == 0.0 for pair in flagged)
    assert result.detail["kendall_undefined_real"] == []
    assert np.isfinite(result.values["kendall_rmse"]) and result.values["kendall_rmse"] > 0


def test_kendall_uses_the_schema_category_order():
    # Codes follow the schema's list, not the alphabet: small < medium < large rises with n.
    rows = correlated_rows(2000)
    result = fidelity.evaluate(context(rows, rows))
    assert result.detail["kendall_real"]["n|size"] > 0.3


def test_large_tables_are_subsampled_deterministically_under_the_seed(monkeypatch):
    monkeypatch.setattr(fidelity, "KENDALL_MAX_ROWS", 500)
    real, synthetic = correlated_rows(3000, seed=0), correlated_rows(3000, seed=1)
    first = fidelity.evaluate(context(real, synthetic, seed=7))
    again = fidelity.evaluate(context(real, synthetic, seed=7))
    other = fidelity.evaluate(context(real, synthetic, seed=8))
    assert first.values == again.values
    assert first.values["kendall_rmse"] != other.values["kendall_rmse"]
    assert first.detail["kendall_rows"] == {"real": 500, "synthetic": 500}


def test_schema_without_numeric_columns_reports_ks_as_nan():
    schema = Schema("discrete", columns=(SCHEMA["colour"], SCHEMA["flag"]))
    rows = correlated_rows(500)[["colour", "flag"]]
    result = fidelity.evaluate(context(rows, rows, schema=schema))
    assert np.isnan(result.values["marginal_ks"])
    assert result.values["marginal_tvd"] == pytest.approx(0.0)


def test_plugin_hook_provides_the_fidelity_spec_with_lower_is_better():
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    manager.register(fidelity_plugin, name="fidelity")
    (specs,) = manager.hook.dpgym_metrics()
    (spec,) = specs
    assert spec.name == "fidelity" and not spec.requires_target
    assert dict(spec.directions) == {
        name: Direction.LOWER for name in ("marginal_tvd", "marginal_ks", "kendall_rmse", "kendall_mae")
    }
    values = spec.evaluate(context(correlated_rows(300), correlated_rows(300, seed=2))).values
    assert set(values) == set(spec.directions)


@settings(max_examples=50, deadline=None)
@given(
    real=st.lists(st.sampled_from(["red", "green", "blue"]), min_size=1, max_size=40),
    synthetic=st.lists(st.sampled_from(["red", "green", "blue"]), min_size=1, max_size=40),
)
def test_total_variation_is_a_symmetric_distance_in_unit_interval(real, synthetic):
    col = SCHEMA["colour"]
    a, b = pd.Series(real, dtype=col.dtype), pd.Series(synthetic, dtype=col.dtype)
    tvd = fidelity.total_variation(a, b, col)
    assert 0.0 <= tvd <= 1.0 + 1e-12
    assert tvd == pytest.approx(fidelity.total_variation(b, a, col))
    assert fidelity.total_variation(a, a, col) == 0.0


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_kendall_mae_never_exceeds_rmse(seed):
    result = fidelity.evaluate(context(correlated_rows(200, seed=seed), correlated_rows(200, seed=seed + 1)))
    assert 0.0 <= result.values["kendall_mae"] <= result.values["kendall_rmse"] + 1e-12
