"""The code of `dpgym.plugins.metrics.fidelity`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.metrics.fidelity`, which holds the spec."""

from __future__ import annotations

import math
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
# tvd_3way averages over every triple of columns up to this many, over a uniform sample of this
# many triples (seeded by the context seed) beyond it.
MAX_TRIPLES = 2_000


def _numeric_values(series: pd.Series) -> np.ndarray:
    return pd.to_numeric(series).to_numpy(dtype=float, na_value=np.nan)


def _category_codes(series: pd.Series, col: Column) -> np.ndarray:
    """Codes in the schema's category order; -1 marks a missing value."""
    return series.astype(col.dtype).cat.codes.to_numpy()


def _numeric_edges(col: Column) -> np.ndarray:
    span = col.max - col.min + 1
    if col.kind is ColumnKind.INTEGER and span <= EXACT_INTEGER_VALUES:
        return np.arange(col.min - 0.5, col.max + 1.0, 1.0)
    return np.linspace(col.min, col.max, TVD_BINS + 1)


def bin_codes(series: pd.Series, col: Column) -> tuple[np.ndarray, int]:
    """Each value's public bin (int64) and the number of bins; the last bin holds missing values.

    Numeric bins are closed on the left, the last one on both sides; a value outside the public
    bounds counts in the edge bin on its side instead of being dropped."""
    if not col.is_numeric:
        codes = _category_codes(series, col).astype(np.int64)
        missing = len(col.categories)
        return np.where(codes < 0, missing, codes), missing + 1
    values = _numeric_values(series)
    edges = _numeric_edges(col)
    missing = len(edges) - 1
    cells = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, missing - 1)
    return np.where(np.isnan(values), missing, cells), missing + 1


def _bin_counts(series: pd.Series, col: Column) -> np.ndarray:
    """Counts per public bin, the last entry counting missing values."""
    codes, size = bin_codes(series, col)
    return np.bincount(codes, minlength=size)


def total_variation(real: pd.Series, synthetic: pd.Series, col: Column) -> float:
    p = _bin_counts(real, col).astype(float)
    q = _bin_counts(synthetic, col).astype(float)
    return 0.5 * float(np.abs(p / p.sum() - q / q.sum()).sum())


def code_matrix(frame: pd.DataFrame, schema: Schema) -> tuple[np.ndarray, np.ndarray]:
    """The public bin of every value as int32, one row per schema column (shape columns × rows),
    and each column's number of bins."""
    coded = [bin_codes(frame[col.name], col) for col in schema.columns]
    codes = np.empty((len(coded), len(frame)), dtype=np.int32)
    for j, (column_codes, _) in enumerate(coded):
        codes[j] = column_codes
    return codes, np.array([size for _, size in coded], dtype=np.int64)


def _joint_cells(codes: np.ndarray, sizes: np.ndarray, subset: np.ndarray, dtype: type,
                 prefix: np.ndarray | None = None) -> np.ndarray:
    """Each row's cell in the joint histogram of the columns in `subset` (mixed-radix index), from
    the cells of `subset[:-1]` when they are given as `prefix`."""
    if prefix is None:
        prefix = codes[subset[0]].astype(dtype)
        rest = subset[1:]
    else:
        prefix = prefix.copy()
        rest = subset[-1:]
    for j in rest:
        prefix *= int(sizes[j])
        prefix += codes[j]
    return prefix


def marginal_tvds(codes: np.ndarray, real_rows: int, sizes: np.ndarray, subsets: np.ndarray) -> np.ndarray:
    """Total-variation distance between the real and synthetic normalised joint histograms of each
    column subset (one row of `subsets`). `codes` holds the real rows' codes (`code_matrix`), then
    the synthetic rows': its first `real_rows` columns are the real rows.

    Counts are `np.bincount` over the mixed-radix cell index. Passes over the rows are most of the
    cost, so the index is int32 where it fits (half the memory traffic of int64), and consecutive
    subsets that share all but their last column (as lexicographic ones do) share that part of the
    index. When a subset has more cells than the two tables have rows, only the cells that occur are
    counted (`np.unique`), so memory stays proportional to the rows. The difference of the shares is
    taken in integers (n_s·c_r − n_r·c_s), so identical tables score exactly 0."""
    n, m = real_rows, codes.shape[1] - real_rows
    if n == 0 or m == 0:  # a histogram of no rows has no shares
        return np.full(len(subsets), np.nan)
    out = np.empty(len(subsets))
    shared_key, shared = None, None  # the leading columns of the previous subset and their cells
    for s, subset in enumerate(subsets):
        cells = math.prod(int(sizes[j]) for j in subset)
        if cells >= 2**62:  # the mixed-radix index would overflow int64
            _, index = np.unique(codes[subset].T, axis=0, return_inverse=True)
            index = index.ravel()
            cells = int(index.max()) + 1
        else:
            dtype = np.int32 if cells < 2**31 else np.int64
            key = (tuple(subset[:-1]), dtype)
            if len(subset) > 2 and key != shared_key:
                shared_key, shared = key, _joint_cells(codes, sizes, subset[:-1], dtype)
            index = _joint_cells(codes, sizes, subset, dtype, shared if len(subset) > 2 else None)
            if cells > n + m:
                occurring, index = np.unique(index, return_inverse=True)
                cells = len(occurring)
        difference = np.bincount(index[:n], minlength=cells) * m - np.bincount(index[n:], minlength=cells) * n
        out[s] = 0.5 * float(np.abs(difference).sum()) / (n * m)
    return out


def column_subsets(columns: int, k: int, limit: int | None = None,
                   rng: np.random.Generator | None = None) -> tuple[np.ndarray, int]:
    """Every k-subset of the columns (as sorted index rows, in lexicographic order), or, when there
    are more than `limit`, a uniform sample of `limit` of them without replacement; and how many
    there are in all."""
    subsets = np.array(list(combinations(range(columns), k)), dtype=np.int64).reshape(-1, k)
    total = len(subsets)
    if limit is not None and total > limit:
        if rng is None:
            raise ValueError(f"sampling {limit} of {total} column subsets needs a random generator")
        subsets = subsets[np.sort(rng.choice(total, size=limit, replace=False))]
    return subsets, total


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
    real_codes, sizes = code_matrix(train, schema)
    codes = np.concatenate([real_codes, code_matrix(synthetic, schema)[0]], axis=1)
    d = len(schema.columns)
    tvd = dict(zip(schema.names, marginal_tvds(codes, len(train), sizes, column_subsets(d, 1)[0]).tolist()))
    ks = {c.name: ks_statistic(train[c.name], synthetic[c.name]) for c in schema.columns if c.is_numeric}

    rng = np.random.default_rng(ctx.seed)
    real_tau, real_undefined = real_kendall_tau_pairs(_subsample(train, rng), schema)
    synth_tau, synth_undefined = kendall_tau_pairs(_subsample(synthetic, rng), schema)
    diff = real_tau - synth_tau
    ks_values = [v for v in ks.values() if not np.isnan(v)]
    no_pairs = len(diff) == 0

    pairs_index, _ = column_subsets(d, 2)
    triples_index, all_triples = column_subsets(d, 3, MAX_TRIPLES, np.random.default_rng(ctx.seed))
    tvd_pairs = marginal_tvds(codes, len(train), sizes, pairs_index)
    tvd_triples = marginal_tvds(codes, len(train), sizes, triples_index)

    values = {
        "marginal_tvd": float(np.mean(list(tvd.values()))),
        "marginal_ks": float(np.mean(ks_values)) if ks_values else float("nan"),
        "kendall_rmse": float("nan") if no_pairs else float(np.sqrt(np.mean(diff**2))),
        "kendall_mae": float("nan") if no_pairs else float(np.mean(np.abs(diff))),
        "tvd_2way": float(np.mean(tvd_pairs)) if len(tvd_pairs) else float("nan"),
        "tvd_3way": float(np.mean(tvd_triples)) if len(tvd_triples) else float("nan"),
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
        "tvd_2way_per_pair": dict(zip(pairs, tvd_pairs.tolist())),
        # tvd_3way's triples: how many were scored, of how many, and the five farthest apart.
        "tvd_3way_triples": {"scored": len(triples_index), "of": all_triples,
                             "sampled": len(triples_index) < all_triples, "seed": ctx.seed},
        "tvd_3way_worst": {"|".join(schema.names[j] for j in triples_index[t]): float(tvd_triples[t])
                           for t in np.argsort(-tvd_triples, kind="stable")[:5]},
    }
    return MetricResult(values=values, detail=detail)
