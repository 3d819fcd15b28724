"""The code of `dpgym.plugins.metrics.fidelity`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.metrics.fidelity`, which holds the spec."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import kendalltau, ks_2samp

from dpgym import Column, ColumnKind, MetricContext, MetricResult, Schema, computed_once
from dpgym.plugins.metrics.fidelity import SPEC_VERSION

TVD_BINS = 20
EXACT_INTEGER_VALUES = 50
# Kendall τ costs O(n log n) per pair and there are d(d-1)/2 pairs for each of the two tables; above
# this many rows each table is subsampled (without replacement, seeded by the context seed). The
# two subsamples are drawn independently, which puts a floor of about 0.005 under kendall_rmse
# (measured: a 400k-row table against itself).
KENDALL_MAX_ROWS = 50_000


def _numeric_values(series: pd.Series) -> np.ndarray:
    return pd.to_numeric(series).to_numpy(dtype=float, na_value=np.nan)


def _category_codes(series: pd.Series, col: Column) -> np.ndarray:
    """Codes in the schema's category order; -1 marks a missing value."""
    return series.astype(col.dtype).cat.codes.to_numpy()


def _bin_counts(series: pd.Series, col: Column) -> np.ndarray:
    """Counts per public bin, the last entry counting missing values."""
    if not col.is_numeric:
        codes = _category_codes(series, col)
        return np.bincount(np.where(codes < 0, len(col.categories), codes), minlength=len(col.categories) + 1)
    values = _numeric_values(series)
    missing = np.isnan(values)
    # Clipping counts any out-of-bounds value in an edge bin instead of silently dropping it.
    present = np.clip(values[~missing], col.min, col.max)
    span = col.max - col.min + 1
    if col.kind is ColumnKind.INTEGER and span <= EXACT_INTEGER_VALUES:
        edges = np.arange(col.min - 0.5, col.max + 1.0, 1.0)
    else:
        edges = np.linspace(col.min, col.max, TVD_BINS + 1)
    counts, _ = np.histogram(present, bins=edges)
    return np.append(counts, missing.sum())


def total_variation(real: pd.Series, synthetic: pd.Series, col: Column) -> float:
    p = _bin_counts(real, col).astype(float)
    q = _bin_counts(synthetic, col).astype(float)
    return 0.5 * float(np.abs(p / p.sum() - q / q.sum()).sum())


def ks_statistic(real: pd.Series, synthetic: pd.Series) -> float:
    """KS statistic on the non-missing values; NaN when either side has none."""
    a, b = _numeric_values(real), _numeric_values(synthetic)
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if len(a) == 0 or len(b) == 0:
        return float("nan")
    return float(ks_2samp(a, b).statistic)


def _rank_matrix(frame: pd.DataFrame, schema: Schema) -> np.ndarray:
    """One float column per schema column: numeric values, or category codes (NaN for missing)."""
    out = np.empty((len(frame), len(schema.columns)))
    for j, col in enumerate(schema.columns):
        if col.is_numeric:
            out[:, j] = _numeric_values(frame[col.name])
        else:
            codes = _category_codes(frame[col.name], col).astype(float)
            out[:, j] = np.where(codes < 0, np.nan, codes)
    return out


def _subsample(frame: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    if len(frame) <= KENDALL_MAX_ROWS:
        return frame
    return frame.iloc[np.sort(rng.choice(len(frame), size=KENDALL_MAX_ROWS, replace=False))]


def kendall_tau_pairs(frame: pd.DataFrame, schema: Schema) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Kendall τ-b for every column pair (upper triangle, row-major), on pairwise-complete rows.

    Returns the τ values and the pairs where τ is undefined (a constant column); those are set to 0.
    """
    values = _rank_matrix(frame, schema)
    names = schema.names
    taus, undefined = [], []
    for i, j in combinations(range(len(names)), 2):
        x, y = values[:, i], values[:, j]
        both = ~(np.isnan(x) | np.isnan(y))
        tau = kendalltau(x[both], y[both]).statistic if both.sum() >= 2 else np.nan
        if np.isnan(tau):
            undefined.append((names[i], names[j]))
            tau = 0.0
        taus.append(tau)
    return np.asarray(taus, dtype=float), undefined


def real_kendall_tau_pairs(rows: pd.DataFrame, schema: Schema) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """`kendall_tau_pairs` of the real rows: the same in every cell of a dataset and seed, so computed
    once (`dpgym.computed_once`, keyed by the rows, the schema's columns and this metric's version)."""
    pairs = list(combinations(schema.names, 2))

    def compute() -> dict[str, np.ndarray]:
        taus, undefined = kendall_tau_pairs(rows, schema)
        return {"taus": taus, "undefined": np.array([pair in undefined for pair in pairs], dtype=bool)}

    stored = computed_once("fidelity-kendall-real", [SPEC_VERSION, rows, schema.names], compute)
    return stored["taus"], [pair for pair, flag in zip(pairs, stored["undefined"]) if flag]


def evaluate(ctx: MetricContext) -> MetricResult:
    schema, train, synthetic = ctx.schema, ctx.train, ctx.synthetic
    tvd = {c.name: total_variation(train[c.name], synthetic[c.name], c) for c in schema.columns}
    ks = {c.name: ks_statistic(train[c.name], synthetic[c.name]) for c in schema.columns if c.is_numeric}

    rng = np.random.default_rng(ctx.seed)
    real_tau, real_undefined = real_kendall_tau_pairs(_subsample(train, rng), schema)
    synth_tau, synth_undefined = kendall_tau_pairs(_subsample(synthetic, rng), schema)
    diff = real_tau - synth_tau
    ks_values = [v for v in ks.values() if not np.isnan(v)]
    no_pairs = len(diff) == 0

    values = {
        "marginal_tvd": float(np.mean(list(tvd.values()))),
        "marginal_ks": float(np.mean(ks_values)) if ks_values else float("nan"),
        "kendall_rmse": float("nan") if no_pairs else float(np.sqrt(np.mean(diff**2))),
        "kendall_mae": float("nan") if no_pairs else float(np.mean(np.abs(diff))),
    }
    pairs = [f"{a}|{b}" for a, b in combinations(schema.names, 2)]
    detail: dict[str, Any] = {
        "tvd_per_column": tvd,
        "ks_per_column": ks,
        "kendall_real": dict(zip(pairs, real_tau.tolist())),
        "kendall_synthetic": dict(zip(pairs, synth_tau.tolist())),
        # τ is undefined when a column is constant; such pairs were scored as τ = 0.
        "kendall_undefined_real": [f"{a}|{b}" for a, b in real_undefined],
        "kendall_undefined_synthetic": [f"{a}|{b}" for a, b in synth_undefined],
        "kendall_rows": {"real": min(len(train), KENDALL_MAX_ROWS), "synthetic": min(len(synthetic), KENDALL_MAX_ROWS)},
    }
    return MetricResult(values=values, detail=detail)
