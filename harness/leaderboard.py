"""Aggregate a run's cells into a leaderboard: per (generator, dataset, ε) over seeds.

Columns: generator, dataset, epsilon, delta, n_seeds, failures, fit_seconds_mean, then for every
metric value ``<metric>_mean, <metric>_std, <metric>_ci_low, <metric>_ci_high`` (95% Student-t
interval over seeds), then guarantee, privacy and cost columns, then ``<metric>_rank`` (1 = best
within the dataset and ε, by the metric's declared direction; failed cells are not ranked).

Rows of private learners (task ``private_learning``) also carry ``auc_median`` (median over seeds
of the released model's test AUC), ``auc_draws_median`` (median over every evaluation draw of
every seed: the ExpM+NF paper's statistic), ``auc_fraction_of_nonprivate`` (auc_median over the
best ``nonprivate_lr`` configuration's auc_median on the same dataset, as in the paper) and
``audit_verdict`` (the most severe of the cells' audits and of the group-privacy check on the
draws pooled over seeds; see harness/audit.py).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from harness import audit
from harness.specs import Direction
from harness.store import RunStore

GROUP = ["generator", "dataset", "epsilon", "delta"]


def cell_rows(results: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per cell: identity, status, costs, privacy and every metric value."""
    rows = []
    for r in results:
        cell = r["cell"]
        privacy = r.get("privacy", {})
        detail = r.get("metric_detail", {}) if r["status"] == "ok" else {}
        rows.append({
            "generator": cell["generator"],
            "plugin": r["generator"]["name"],
            "task": r.get("task", "synthetic_data"),
            "dataset": cell["dataset"],
            "epsilon": float(cell["epsilon"]),
            "delta": float(cell["delta"]),
            "seed": cell["seed"],
            "status": r["status"],
            "guarantee": r["generator"]["guarantee"],
            "claimed_epsilon": float(privacy.get("claimed_epsilon", math.nan)),
            "reaccounted_epsilon": float(privacy.get("reaccounted", {}).get("epsilon", math.nan)),
            "fit_seconds": r["timings"].get("fit_seconds", math.nan),
            "sample_seconds": r["timings"].get("sample_seconds", math.nan),
            "peak_rss_mb": r.get("peak_rss_mb", math.nan),
            "audit_verdict": r.get("audit", {}).get("verdict"),
            "n_rows": r.get("audit", {}).get("n_rows"),
            "auc_draws": detail.get("auc_draws"),
            "auc_permuted_draws": detail.get("auc_permuted_draws"),
            **({f"metric:{k}": v for k, v in r.get("metrics", {}).items()} if r["status"] == "ok" else {}),
        })
    return pd.DataFrame(rows)


def _interval(values: pd.Series) -> tuple[float, float, float, float]:
    v = values.dropna().to_numpy(dtype=float)
    if len(v) == 0:
        return (math.nan,) * 4
    mean = float(v.mean())
    if len(v) == 1:
        return mean, math.nan, math.nan, math.nan
    std = float(v.std(ddof=1))
    half = float(stats.t.ppf(0.975, len(v) - 1) * std / math.sqrt(len(v)))
    return mean, std, mean - half, mean + half


def aggregate(cells: pd.DataFrame, directions: dict[str, Direction]) -> pd.DataFrame:
    metrics = sorted(c.removeprefix("metric:") for c in cells.columns if c.startswith("metric:"))
    rows = []
    for key, group in cells.groupby(GROUP, sort=True):
        ok = group[group.status == "ok"]
        row: dict[str, Any] = dict(zip(GROUP, key))
        row.update(n_seeds=len(ok), failures=int((group.status == "failed").sum()),
                   fit_seconds_mean=ok.fit_seconds.mean())
        for m in metrics:
            mean, std, low, high = _interval(ok[f"metric:{m}"]) if len(ok) else (math.nan,) * 4
            row.update({f"{m}_mean": mean, f"{m}_std": std, f"{m}_ci_low": low, f"{m}_ci_high": high})
        row.update(
            unavailable=int((group.status == "unavailable").sum()),
            guarantee=group.guarantee.iloc[0],
            claimed_epsilon_max=ok.claimed_epsilon.max(),
            reaccounted_epsilon_max=ok.reaccounted_epsilon.max(),
            sample_seconds_mean=ok.sample_seconds.mean(),
            peak_rss_mb_max=ok.peak_rss_mb.max(),
        )
        if (group.task == "private_learning").all():
            row.update(plugin=group.plugin.iloc[0], **_learning_columns(ok, row["epsilon"]))
        rows.append(row)
    board = pd.DataFrame(rows)
    if "auc_median" in board:
        board["auc_fraction_of_nonprivate"] = board.auc_median / board.dataset.map(_nonprivate_baseline(board))
    for m in metrics:
        higher = directions.get(m, Direction.HIGHER) is Direction.HIGHER
        board[f"{m}_rank"] = board.groupby(["dataset", "epsilon"])[f"{m}_mean"].rank(
            ascending=not higher, method="min")
    return board


def _learning_columns(ok: pd.DataFrame, epsilon: float) -> dict[str, Any]:
    if ok.empty:
        return {"auc_median": math.nan, "auc_draws_median": math.nan, "audit_verdict": "not_audited"}
    draws = [a for d in ok.auc_draws.dropna() for a in d]
    permuted = [a for d in ok.auc_permuted_draws.dropna() for a in d]
    verdicts = [v for v in ok.audit_verdict.dropna()]
    if permuted and len(ok) > 1:  # one model per seed (DP-SGD): the check needs the seeds pooled
        verdicts.append(audit.group_privacy(np.array(draws), np.array(permuted), epsilon, int(ok.n_rows.iloc[0])).verdict)
    return {"auc_median": float(ok["metric:auc"].median()),
            "auc_draws_median": float(np.median(draws)) if draws else math.nan,
            "audit_verdict": min(verdicts, key=audit.VERDICT_ORDER.index) if verdicts else "not_audited"}


def _nonprivate_baseline(board: pd.DataFrame) -> dict[str, float]:
    """Per dataset, the best auc_median of any nonprivate_lr configuration (BCE or ℓ2)."""
    baseline = board[board.plugin == "nonprivate_lr"]
    return baseline.groupby("dataset").auc_median.max().to_dict()


def to_markdown(board: pd.DataFrame, directions: dict[str, Direction]) -> str:
    metrics = [c.removesuffix("_mean") for c in board.columns if c.endswith("_mean")
               and c not in ("fit_seconds_mean", "sample_seconds_mean")]
    lines = []
    for (dataset, epsilon), part in board.groupby(["dataset", "epsilon"], sort=True):
        lines.append(f"### {dataset}, ε = {epsilon:g}\n")
        learning = ["auc_median", "auc_fraction_of_nonprivate", "audit_verdict"] if "auc_median" in board else []
        header = ["generator", "guarantee", "seeds", "failed", "fit s"] + [
            f"{m} {'↑' if directions.get(m, Direction.HIGHER) is Direction.HIGHER else '↓'}" for m in metrics] + learning
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for _, row in part.iterrows():
            cells = [row.generator, row.guarantee, str(row.n_seeds), str(row.failures), f"{row.fit_seconds_mean:.1f}"]
            for m in metrics:
                mean, std = row[f"{m}_mean"], row[f"{m}_std"]
                cells.append("—" if np.isnan(mean) else f"{mean:.3f}" + ("" if np.isnan(std) else f" ± {std:.3f}"))
            for column in learning:
                value = row[column]
                cells.append("—" if value is None or (isinstance(value, float) and np.isnan(value))
                             else (f"{value:.3f}" if isinstance(value, float) else str(value)))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def write_leaderboard(run_dir: Path, directions: dict[str, Direction],
                      keys: set[str] | None = None) -> tuple[pd.DataFrame, str]:
    """Aggregate the cells of `run_dir` (only `keys`, when given: cells of an earlier suite run
    into the same folder are not mixed in) and write leaderboard.csv / .md."""
    store = RunStore(run_dir)
    results = store.results(keys)
    if not results:
        raise ValueError(f"{run_dir} has no finished cells yet")
    board = aggregate(cell_rows(results), directions)
    markdown = to_markdown(board, directions)
    board.to_csv(run_dir / "leaderboard.csv", index=False)
    (run_dir / "leaderboard.md").write_text(markdown)
    return board, markdown
