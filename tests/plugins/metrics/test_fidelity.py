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
    assert result.values["tvd_2way"] == pytest.approx(0.0, abs=1e-12)
    assert result.values["tvd_3way"] == pytest.approx(0.0, abs=1e-12)


def test_independently_shuffled_columns_keep_marginals_but_lose_dependence():
    rows = correlated_rows(3000)
    rng = np.random.default_rng(1)
    shuffled = pd.DataFrame({name: rows[name].to_numpy()[rng.permutation(len(rows))] for name in SCHEMA.names})
    result = fidelity.evaluate(context(rows, shuffled))
    assert result.values["marginal_tvd"] == pytest.approx(0.0, abs=1e-12)
    assert result.values["kendall_rmse"] > 0.3
    assert 0 < result.values["kendall_mae"] <= result.values["kendall_rmse"]
    # the joint histograms move although every 1-way histogram is the same, more so over triples
    assert 0.1 < result.values["tvd_2way"] < result.values["tvd_3way"] < 1


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
        name: Direction.LOWER
        for name in ("marginal_tvd", "marginal_ks", "kendall_rmse", "kendall_mae", "tvd_2way", "tvd_3way")
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


def discrete_schema(*sizes: int, nullable: bool = False) -> Schema:
    return Schema("discrete", columns=tuple(
        Column(f"c{j}", ColumnKind.CATEGORICAL, categories=tuple(f"v{v}" for v in range(size)), nullable=nullable)
        for j, size in enumerate(sizes)))


def discrete_rows(schema: Schema, values: list[tuple]) -> pd.DataFrame:
    return schema.conform(pd.DataFrame(values, columns=list(schema.names)))


def test_disjoint_support_has_kway_total_variation_one():
    # Real rows only ever take v0, synthetic rows only v1: every joint histogram is disjoint.
    schema = discrete_schema(2, 2, 2)
    real = discrete_rows(schema, [("v0", "v0", "v0")] * 5)
    synthetic = discrete_rows(schema, [("v1", "v1", "v1")] * 7)
    result = fidelity.evaluate(context(real, synthetic, schema=schema))
    assert result.values["tvd_2way"] == pytest.approx(1.0)
    assert result.values["tvd_3way"] == pytest.approx(1.0)


def test_kway_total_variation_matches_a_hand_computed_example():
    # Real: (a,b) = (0,0),(0,1),(1,0),(1,1), c = a. Synthetic: four rows of (0,0,0), two of (1,1,1).
    schema = discrete_schema(2, 2, 2)
    real = discrete_rows(schema, [("v0", "v0", "v0"), ("v0", "v1", "v0"), ("v1", "v0", "v1"), ("v1", "v1", "v1")])
    synthetic = discrete_rows(schema, [("v0", "v0", "v0")] * 4 + [("v1", "v1", "v1")] * 2)
    result = fidelity.evaluate(context(real, synthetic, schema=schema))
    # (c0,c1): real 1/4 each; synthetic 2/3 at 00, 1/3 at 11 -> ½(5/12 + 1/4 + 1/4 + 1/12) = 1/2.
    # (c0,c2): real ½ at 00 and 11; synthetic 2/3, 1/3 -> ½(1/6 + 1/6) = 1/6.
    # (c1,c2): like (c0,c1) -> 1/2.
    pairs = result.detail["tvd_2way_per_pair"]
    assert pairs["c0|c1"] == pytest.approx(1 / 2)
    assert pairs["c0|c2"] == pytest.approx(1 / 6)
    assert pairs["c1|c2"] == pytest.approx(1 / 2)
    assert result.values["tvd_2way"] == pytest.approx((1 / 2 + 1 / 6 + 1 / 2) / 3)
    # the one triple: real ¼ on 000, 010, 101, 111; synthetic 2/3 on 000, 1/3 on 111 -> 1/2
    assert result.values["tvd_3way"] == pytest.approx(1 / 2)
    assert result.detail["tvd_3way_triples"] == {"scored": 1, "of": 1, "sampled": False, "seed": 0}


def test_kway_cells_of_numeric_columns_are_the_public_bins_of_marginal_tvd():
    # wide: 0..1000 in 20 bins of width 50, so 510 and 540 share a cell and 560 does not.
    schema = Schema("mixed", columns=(SCHEMA["wide"], SCHEMA["flag"]))
    real = schema.conform(pd.DataFrame({"wide": [510, 510], "flag": ["no", "yes"]}))
    same_bins = schema.conform(pd.DataFrame({"wide": [540, 540], "flag": ["no", "yes"]}))
    other_bin = schema.conform(pd.DataFrame({"wide": [560, 510], "flag": ["no", "yes"]}))
    assert fidelity.evaluate(context(real, same_bins, schema=schema)).values["tvd_2way"] == pytest.approx(0.0)
    assert fidelity.evaluate(context(real, other_bin, schema=schema)).values["tvd_2way"] == pytest.approx(0.5)


def test_missing_values_are_a_cell_of_the_joint_histograms():
    schema = discrete_schema(2, 2, nullable=True)
    real = discrete_rows(schema, [("v0", None), ("v0", "v1"), (None, "v1"), ("v1", "v0")])
    moved = discrete_rows(schema, [("v0", "v0"), ("v0", "v1"), (None, "v1"), ("v1", "v0")])
    assert real["c1"].isna().sum() == 1
    result = fidelity.evaluate(context(real, real.copy(), schema=schema))
    assert result.values["tvd_2way"] == pytest.approx(0.0)
    # one of four rows moves from (v0, missing) to (v0, v0)
    assert fidelity.evaluate(context(real, moved, schema=schema)).values["tvd_2way"] == pytest.approx(0.25)


def test_triples_are_a_seeded_sample_when_there_are_too_many(monkeypatch):
    monkeypatch.setattr(fidelity, "MAX_TRIPLES", 5)  # SCHEMA's 6 columns have 20 triples
    real, synthetic = correlated_rows(1000, seed=0), correlated_rows(1000, seed=1)
    first = fidelity.evaluate(context(real, synthetic, seed=3))
    again = fidelity.evaluate(context(real, synthetic, seed=3))
    other = fidelity.evaluate(context(real, synthetic, seed=4))
    assert first.detail["tvd_3way_triples"] == {"scored": 5, "of": 20, "sampled": True, "seed": 3}
    assert first.values["tvd_3way"] == again.values["tvd_3way"]
    assert first.values["tvd_3way"] != other.values["tvd_3way"]
    # the sample is of triples only: every pair still counts
    assert len(first.detail["tvd_2way_per_pair"]) == 15


def test_sampled_triples_average_the_same_distances_as_the_full_set():
    real, synthetic = correlated_rows(1000, seed=0), correlated_rows(1000, seed=1)
    subsets, _ = fidelity.column_subsets(len(SCHEMA.columns), 3)
    codes_real, sizes = fidelity.code_matrix(real, SCHEMA)
    codes = np.concatenate([codes_real, fidelity.code_matrix(synthetic, SCHEMA)[0]], axis=1)
    every = dict(zip(map(tuple, subsets), fidelity.marginal_tvds(codes, len(real), sizes, subsets)))
    sample, total = fidelity.column_subsets(len(SCHEMA.columns), 3, 5, np.random.default_rng(0))
    assert total == 20 and len({tuple(t) for t in sample}) == 5
    sampled = fidelity.marginal_tvds(codes, len(real), sizes, sample)
    assert sampled == pytest.approx([every[tuple(t)] for t in sample])


def test_joint_histograms_with_more_cells_than_rows_count_only_occurring_cells():
    # 3 columns of 200 categories: 8 million cells for 6 rows, counted without a dense array.
    schema = discrete_schema(200, 200, 200)
    real = discrete_rows(schema, [("v1", "v2", "v3"), ("v199", "v0", "v5"), ("v1", "v2", "v3")])
    synthetic = discrete_rows(schema, [("v1", "v2", "v3"), ("v7", "v7", "v7"), ("v7", "v7", "v7")])
    result = fidelity.evaluate(context(real, synthetic, schema=schema))
    # (v1, v2, v3) holds 2/3 of the real rows and 1/3 of the synthetic: ½(1/3 + 1/3 + 2/3) = 2/3
    assert result.values["tvd_3way"] == pytest.approx(2 / 3)


def test_fewer_than_three_columns_report_tvd_3way_as_nan():
    schema = Schema("two", columns=(SCHEMA["colour"], SCHEMA["flag"]))
    rows = correlated_rows(500)[["colour", "flag"]]
    result = fidelity.evaluate(context(rows, rows, schema=schema))
    assert result.values["tvd_2way"] == pytest.approx(0.0)
    assert np.isnan(result.values["tvd_3way"])
    assert result.detail["tvd_3way_triples"]["of"] == 0


def test_marginal_tvd_is_the_one_way_total_variation_of_each_column():
    real, synthetic = correlated_rows(800, seed=0), correlated_rows(800, seed=1)
    result = fidelity.evaluate(context(real, synthetic))
    for col in SCHEMA.columns:
        assert result.detail["tvd_per_column"][col.name] == pytest.approx(
            fidelity.total_variation(real[col.name], synthetic[col.name], col))


def test_kway_distances_of_an_empty_synthetic_table_are_nan():
    rows = correlated_rows(100)
    codes, sizes = fidelity.code_matrix(rows, SCHEMA)
    pairs, _ = fidelity.column_subsets(len(SCHEMA.columns), 2)
    assert np.isnan(fidelity.marginal_tvds(codes, len(rows), sizes, pairs)).all()
