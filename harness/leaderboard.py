"""Aggregate a run's cells into a leaderboard whose orderings are backed by statistics.

One row per (generator, dataset, ε). Columns, in order:

    generator, dataset, epsilon, delta, eps_spent, under_spent, n_seeds, failures, fit_seconds_mean,
    <m>_mean, <m>_std, <m>_ci_low, <m>_ci_high          for every metric value m,
    unavailable, guarantee, audit_verdict, [eps_lower, audit_fits,] claimed_epsilon_max,
    sample_seconds_mean, peak_rss_mb_max, error,
    <m>_rank                                              for every metric value m

Rows of private learners (task ``private_learning``) also carry ``auc_median`` (median over seeds
of the released model's test AUC), ``auc_draws_median`` (median over every evaluation draw of
every seed: the ExpM+NF paper's statistic), ``auc_fraction_of_nonprivate`` (auc_median over the
best ``nonprivate_lr`` configuration's auc_median on the same dataset, as in the paper), and their
``audit_verdict`` is the most severe of the cells' audits and of the group-privacy check on the
draws pooled over seeds (harness/audit.py).

When the run directory also holds empirical audits (``dpgym audit --out`` the same folder), a row whose
cells ran the mechanism an audit tested (`audit_identity`) carries its certified ε lower bound
(``eps_lower``) and number of fits (``audit_fits``), and its verdict in ``audit_verdict`` where that is
empty (learners keep their own audit's). Without audits these columns are absent.

``eps_spent`` is the ε the harness's independent re-accounting computes from the ledgers (the
largest over seeds): what the row really spent, which the claim only bounds. ``under_spent`` marks
a private row that spent less than ``UNDER_SPENT`` (90%) of its ε, so its method was not compared
at the budget it is listed under; a method that reads no rows (``uniform``) spends 0 by design and
is not marked.

Statistics (see the README's leaderboard section for the reasoning):

- ``<m>_ci_low/high`` is a 95% percentile bootstrap interval of the mean over seeds
  (``scipy.stats.bootstrap``, 2,000 resamples, a generator seeded from the row and metric names,
  so the numbers are identical on every machine and independent of row order). One seed: no CI.
- Failed or timed-out cells are *charged, not dropped* (SDGym's rule): each metric takes the
  uniform baseline's value for the same dataset and ε (same seed when it ran), and the fit time
  is the run's per-cell time limit (the ``timeout`` of its latest start, `run_time_limit`) or,
  without one, the time the cell ran before failing. ``n_seeds`` counts the seeds that finished,
  ``failures`` the charged ones; means, intervals and ranks are over both.
- ``<m>_rank`` = 1 + the number of generators (same dataset and ε) whose CI lies entirely on the
  better side of this one's: generators whose intervals overlap share a rank.
- The overall ranking treats every (dataset, ε, metric value) as a block, ranks the generators
  within it, and runs a Friedman test (scipy) with a Nemenyi post-hoc comparison
  (scikit-posthocs); its rank groups and critical difference feed the report's CD diagram.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scikit_posthocs
from rich.table import Table
from scipy import stats

from dpgym import audit
from dpgym.specs import Direction
from dpgym.store import RunStore, stored_audits

GROUP = ["generator", "dataset", "epsilon", "delta"]
CONFIDENCE = 0.95
ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 10  # any fixed value makes the intervals reproducible; changing it moves them
BASELINE = "uniform"  # SDGym's reference for charging failures: reads no rows, costs ε = 0
UNDER_SPENT = 0.9  # a row spending less than this share of its ε is marked under_spent
NOT_FAILURES = ("ok", "unavailable")  # unavailable = the dataset was missing: nobody's fault, not charged
ARROWS = {Direction.HIGHER: "↑", Direction.LOWER: "↓"}
AUDIT_NOTE = ("ε lower (audit): the empirical audit's lower bound on ε at 95% confidence (`dpgym audit`, "
              "docs/privacy.md#empirical-audit), with its fits; `consistent` proves nothing, a bound above the "
              "row's ε shows the claim false.")


def is_failure(status: str) -> bool:
    return status not in NOT_FAILURES


def metric_names(frame: pd.DataFrame) -> list[str]:
    """Metric values present in a board (from its ``<m>_ci_low`` columns), in column order."""
    return [c.removesuffix("_ci_low") for c in frame.columns if c.endswith("_ci_low")]


def _error_summary(result: dict[str, Any]) -> str:
    err = result.get("error") or {}
    return f"{err.get('stage', '?')}: {err.get('type', '?')}: {err.get('message', '')}" if err else ""


def cell_rows(results: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per cell: identity, status, error, costs, privacy and every metric value."""
    rows = []
    for r in results:
        cell, privacy, timings = r["cell"], r.get("privacy", {}), r.get("timings", {})
        detail = r.get("metric_detail", {}) if r["status"] == "ok" else {}
        rows.append({
            "generator": cell["method"],
            "plugin": r["method"]["name"],
            "task": r.get("task", "synthetic_data"),
            "dataset": cell["dataset"],
            "epsilon": float(cell["epsilon"]),
            "delta": float(cell["delta"]),
            "seed": cell["seed"],
            "key": cell.get("key", ""),
            "status": r["status"],
            "error": _error_summary(r) if r["status"] != "ok" else "",
            "guarantee": r["method"]["guarantee"],
            "audit_verdict": (r.get("audit") or {}).get("verdict", ""),
            "claimed_epsilon": float(privacy.get("claimed_epsilon", math.nan)),
            "reaccounted_epsilon": float(privacy.get("reaccounted", {}).get("epsilon", math.nan)),
            "fit_seconds": timings.get("fit_seconds", math.nan),
            "sample_seconds": timings.get("sample_seconds", math.nan),
            "total_seconds": timings.get("total_seconds", math.nan),
            "peak_rss_mb": r.get("peak_rss_mb", math.nan),
            "n_rows": (r.get("audit") or {}).get("n_rows"),
            # an older result without them: δ = the budget's and add/remove, the looser bound
            "delta_spent": (r.get("audit") or {}).get("delta", float(cell["delta"])),
            "replace_one": (r.get("audit") or {}).get("replace_one", False),
            "auc_draws": detail.get("auc_draws"),
            "auc_permuted_draws": detail.get("auc_permuted_draws"),
            **({f"metric:{k}": v for k, v in r.get("metrics", {}).items()} if r["status"] == "ok" else {}),
        })
    cells = pd.DataFrame(rows)
    metric_cols = sorted(c for c in cells.columns if c.startswith("metric:"))
    return cells[[c for c in cells.columns if not c.startswith("metric:")] + metric_cols]


def _baseline_value(cells: pd.DataFrame, failed: pd.Series, column: str, lower_is_better: bool) -> tuple[float, str]:
    """The value a failed cell is charged for one metric, and where it came from."""
    ok = cells[cells.status == "ok"]
    base = ok[(ok.plugin == BASELINE) & (ok.dataset == failed.dataset)][["epsilon", "seed", column]].dropna()
    for subset in (base[(base.epsilon == failed.epsilon) & (base.seed == failed.seed)],
                   base[base.epsilon == failed.epsilon],
                   base):  # uniform reads no rows, so its score does not depend on ε
        if len(subset):
            return float(subset[column].mean()), BASELINE
    # No uniform baseline in this run: charge the worst value any generator reached here.
    peers = ok[(ok.dataset == failed.dataset) & (ok.epsilon == failed.epsilon)][column].dropna()
    if len(peers):
        return float(peers.max() if lower_is_better else peers.min()), "worst"
    return math.nan, "none"


def charge_failures(cells: pd.DataFrame, directions: dict[str, Direction],
                    time_limit: float | None = None) -> pd.DataFrame:
    """Fill failed cells with the uniform baseline's scores and the time limit (SDGym's rule).

    Dropping failures would reward a generator for crashing on the hard cells; charging them the
    score of a generator that learns nothing keeps the comparison honest.
    """
    cells = cells.copy()
    cells["charged"] = cells.status.map(is_failure).astype(bool)
    cells["charged_with"] = ""
    metric_cols = [c for c in cells.columns if c.startswith("metric:")]
    ok = cells[cells.status == "ok"]
    for idx in cells.index[cells.charged]:
        failed = cells.loc[idx]
        sources = set()
        own = ok[(ok.generator == failed.generator) & (ok.dataset == failed.dataset)]
        # A value the generator's finished cells here never have (e.g. a density metric for a generator
        # without log_prob) is not charged: charging it would rank the generator on its failures alone.
        for col in ([c for c in metric_cols if own[c].notna().any()] if len(own) else metric_cols):
            lower = directions.get(col.removeprefix("metric:"), Direction.HIGHER) is Direction.LOWER
            cells.at[idx, col], source = _baseline_value(cells, failed, col, lower)
            sources.add(source)
        cells.at[idx, "charged_with"] = ",".join(sorted(sources))
        cells.at[idx, "fit_seconds"] = time_limit if time_limit is not None else failed.total_seconds
    return cells


def bootstrap_ci(values: np.ndarray, seed_key: str) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean; NaN with fewer than two values.

    Percentile rather than BCa: with the handful of seeds a benchmark affords, BCa's acceleration
    estimate is degenerate. The resampling stream is keyed by ``seed_key`` so each row's interval
    is reproducible on its own.
    """
    if len(values) < 2:
        return math.nan, math.nan
    if np.all(values == values[0]):
        return float(values[0]), float(values[0])
    rng = np.random.default_rng([BOOTSTRAP_SEED, zlib.crc32(seed_key.encode())])
    result = stats.bootstrap((values,), np.mean, confidence_level=CONFIDENCE, n_resamples=BOOTSTRAP_RESAMPLES,
                             method="percentile", rng=rng)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def mean_and_interval(values: pd.Series, seed_key: str) -> tuple[float, float, float, float]:
    """Mean, standard deviation and 95% bootstrap interval of the non-missing values (`bootstrap_ci`)."""
    v = values.dropna().to_numpy(dtype=float)
    if len(v) == 0:
        return (math.nan,) * 4
    low, high = bootstrap_ci(v, seed_key)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else math.nan, low, high


def interval_key(generator: str, dataset: str, epsilon: float, delta: float, metric: str) -> str:
    """What seeds the bootstrap of one row's metric: the same row gets the same interval wherever it
    is computed (the leaderboard, `dpgym compare`)."""
    return f"{generator}|{dataset}|{epsilon!r}|{delta!r}|{metric}"


def aggregate(cells: pd.DataFrame, directions: dict[str, Direction]) -> pd.DataFrame:
    """Seeds → one row per (generator, dataset, ε); expects failures already charged."""
    metrics = [c.removeprefix("metric:") for c in cells.columns if c.startswith("metric:")]
    rows = []
    incomplete: dict[str, list[bool]] = {m: [] for m in metrics}
    for key, group in cells.groupby(GROUP, sort=True):
        scored = group[(group.status == "ok") | group.charged]
        ok = group[group.status == "ok"]
        for m in metrics:
            values = scored[f"metric:{m}"]
            # A value missing from some seeds (NaN): its mean and interval are over the others, which
            # may flatter the generator, so the row is not ranked on it.
            incomplete[m].append(bool(values.notna().any() and values.isna().any()))
        row: dict[str, Any] = dict(zip(GROUP, key))
        row.update(task=group.task.iloc[0], n_seeds=len(ok), failures=int(group.charged.sum()),
                   fit_seconds_mean=scored.fit_seconds.mean())
        for m in metrics:
            where = interval_key(row["generator"], row["dataset"], row["epsilon"], row["delta"], m)
            mean, std, low, high = mean_and_interval(scored[f"metric:{m}"], where)
            row.update({f"{m}_mean": mean, f"{m}_std": std, f"{m}_ci_low": low, f"{m}_ci_high": high})
        row.update(
            unavailable=int((group.status == "unavailable").sum()),
            guarantee=group.guarantee.iloc[0],
            audit_verdict=next((v for v in group.audit_verdict if v), ""),
            claimed_epsilon_max=ok.claimed_epsilon.max(),
            eps_spent=ok.reaccounted_epsilon.max(),
            sample_seconds_mean=ok.sample_seconds.mean(),
            peak_rss_mb_max=ok.peak_rss_mb.max(),
            error=next((e for e in group[group.charged].error if e), ""),
        )
        if (group.task == "private_learning").all():
            row.update(plugin=group.plugin.iloc[0], **_learning_columns(ok, row["epsilon"]))
        rows.append(row)
    board = pd.DataFrame(rows)
    board["under_spent"] = under_spent(board)
    if "auc_median" in board:
        board["auc_fraction_of_nonprivate"] = board.auc_median / board.dataset.map(_nonprivate_baseline(board))
    for m in metrics:
        board[f"{m}_rank"] = math.nan
        if m not in directions:  # no declared direction (e.g. a value of an older dpgym): nothing to rank by
            continue
        higher = directions[m] is Direction.HIGHER
        for _, part in board.groupby(["dataset", "epsilon"]):
            board.loc[part.index, f"{m}_rank"] = ci_rank(part, m, higher)
        board.loc[board.index[incomplete[m]], f"{m}_rank"] = math.nan
    return board


def _learning_columns(ok: pd.DataFrame, epsilon: float) -> dict[str, Any]:
    if ok.empty:
        return {"auc_median": math.nan, "auc_draws_median": math.nan, "audit_verdict": "not_audited"}
    draws = [a for d in ok.auc_draws.dropna() for a in d]
    permuted = [a for d in ok.auc_permuted_draws.dropna() for a in d]
    verdicts = [v for v in ok.audit_verdict.dropna() if v]
    # One model per seed (DP-SGD): the check needs the seeds pooled. Many draws per seed (ExpM+NF) are
    # iid only within a seed, so pooling would overstate the evidence: their cells are judged one by one.
    if permuted and len(ok) > 1 and all(len(d) == 1 for d in ok.auc_draws.dropna()):
        group = {k: ok[k].iloc[0] for k in ("delta_spent", "replace_one")}
        verdicts.append(audit.group_privacy(np.array(draws), np.array(permuted), epsilon, int(ok.n_rows.iloc[0]),
                                            float(group["delta_spent"]), bool(group["replace_one"])).verdict)
    return {"auc_median": float(ok["metric:auc"].median()),
            "auc_draws_median": float(np.median(draws)) if draws else math.nan,
            "audit_verdict": min(verdicts, key=audit.VERDICT_ORDER.index) if verdicts else "not_audited"}


def _nonprivate_baseline(board: pd.DataFrame) -> dict[str, float]:
    """Per dataset, the best auc_median of any nonprivate_lr configuration (BCE or ℓ2)."""
    baseline = board[board.get("plugin") == "nonprivate_lr"]
    return baseline.groupby("dataset").auc_median.max().to_dict()


def ci_rank(part: pd.DataFrame, metric: str, higher: bool) -> pd.Series:
    """1 + the number of rows whose CI is entirely better than this row's (overlap = tie)."""
    mean, low, high = (part[f"{metric}_{s}"].to_numpy(dtype=float) for s in ("mean", "ci_low", "ci_high"))
    # NaN bounds (one seed) compare False: without an interval nothing is shown to be better.
    better = low[None, :] > high[:, None] if higher else high[None, :] < low[:, None]
    ranks = 1.0 + better.sum(axis=1)
    return pd.Series(np.where(np.isnan(mean), np.nan, ranks), index=part.index)


@dataclass
class Ranking:
    """The overall ranking across blocks and the test behind it (all JSON-ready)."""

    blocks: int
    generators: list[dict[str, Any]]  # generator, mean_rank, rank (1 + significantly better ones)
    statement: str
    friedman: dict[str, float] | None = None
    posthoc: dict[str, Any] | None = None
    critical_difference: float | None = None
    alpha: float = ALPHA
    block_definition: str = ("every (dataset, ε, metric value) with a declared direction where not every generator "
                             "ties; failed cells charged")
    excluded: list[str] = field(default_factory=list)


def _block_table(board: pd.DataFrame, directions: dict[str, Direction]) -> pd.DataFrame:
    """Blocks × generators, oriented so that a smaller value is always better."""
    parts = []
    for m in (m for m in metric_names(board) if m in directions):
        sign = 1.0 if directions[m] is Direction.LOWER else -1.0
        wide = board.pivot_table(index=["dataset", "epsilon"], columns="generator", values=f"{m}_mean", dropna=False)
        parts.append((sign * wide).assign(metric=m).set_index("metric", append=True))
    if not parts:
        return pd.DataFrame()
    table = pd.concat(parts).dropna(axis=1, how="all")
    # A block where every generator has the same value (a reference value such as the real data's
    # accuracy, computed alike in every cell) carries no evidence, yet would pull all mean ranks together.
    tied = table.nunique(axis=1, dropna=True).le(1) & table.notna().sum(axis=1).gt(1)
    return table[~tied]


def under_spent(board: pd.DataFrame) -> pd.Series:
    """Rows at a finite ε that spent something, but less than `UNDER_SPENT` of it."""
    finite = np.isfinite(board.epsilon.astype(float))
    spent = board.eps_spent.astype(float)
    return finite & (spent > 0) & (spent < UNDER_SPENT * board.epsilon.astype(float))


def budget_statement(board: pd.DataFrame, ranked: list[str]) -> str:
    """Whether the ranked rows were compared at the budgets they are listed under."""
    rows = board[board.generator.isin(ranked) & np.isfinite(board.epsilon.astype(float))]
    if rows.empty:
        return ""
    short = rows[rows.under_spent]
    if short.empty:
        return f" Every ranked row at a finite ε spent at least {UNDER_SPENT:.0%} of it."
    listed = "; ".join(f"{r.generator} on {r.dataset} at ε = {r.epsilon:g} spent {r.eps_spent:.3g}"
                       for r in short.itertuples())
    return (f" Not every ranked row spent its budget: {len(short)} of {len(rows)} spent less than {UNDER_SPENT:.0%} "
            f"of their ε ({listed}), so those methods were compared with less privacy spent than listed.")


def overall_ranking(board: pd.DataFrame, directions: dict[str, Direction], alpha: float = ALPHA) -> Ranking:
    """Friedman test over blocks, Nemenyi post-hoc, and rank groups that respect it.

    A run of both synthetic-data generators and private learners ranks the generators: the two kinds
    share no metric (fidelity and utility vs. a model's AUC), so no block holds both, and the
    learners are compared in a section of their own."""
    everyone = sorted(board.generator.unique())
    learners = board.task == "private_learning"
    if learners.any() and not learners.all():
        ranking = overall_ranking(board[~learners], directions, alpha)
        ranking.excluded = sorted(set(ranking.excluded) | set(board.generator[learners]))
        ranking.statement += (" Private learners are not in this ranking: they share no metric with the generators; "
                              "the private-learning section compares them.")
        return ranking
    table = _block_table(board, directions)
    complete = table.dropna(axis=0) if len(table) else table
    excluded = sorted(set(everyone) - set(complete.columns))
    k, n = complete.shape[1], complete.shape[0]
    if k < 2 or n < 1:
        return Ranking(n, [{"generator": g, "mean_rank": math.nan, "rank": math.nan} for g in everyone],
                       "No overall ranking: the run has no metric values shared by two or more generators.",
                       excluded=excluded)
    mean_ranks = complete.rank(axis=1, method="average").mean().sort_values()
    entries = [{"generator": g, "mean_rank": float(r)} for g, r in mean_ranks.items()]
    if k < 3 or n < 2:
        for e in entries:
            e["rank"] = 1.0
        return Ranking(n, entries, (
            f"Mean ranks over {n} block(s) only: a Friedman test needs at least three generators and two blocks, "
            "so no generator is shown to be better than another.") + budget_statement(board, list(complete.columns)),
            excluded=excluded)
    chi2, p = stats.friedmanchisquare(*(complete[c].to_numpy() for c in complete.columns))
    pvalues = scikit_posthocs.posthoc_nemenyi_friedman(complete.to_numpy())
    pvalues.index = pvalues.columns = list(complete.columns)
    cd = float(stats.studentized_range.ppf(1 - alpha, k, np.inf) / math.sqrt(2) * math.sqrt(k * (k + 1) / (6 * n)))
    differ = bool(np.isfinite(p) and p < alpha)
    for e in entries:
        better = [g for g, r in mean_ranks.items() if r < e["mean_rank"] and pvalues.loc[g, e["generator"]] < alpha]
        e["rank"] = float(1 + len(better)) if differ else 1.0
    ranking = Ranking(
        n, entries, "", friedman={"statistic": float(chi2), "pvalue": float(p), "df": k - 1},
        posthoc={"method": "Nemenyi (after Friedman)", "package": f"scikit-posthocs {version('scikit-posthocs')}",
                 "pvalues": {a: {b: float(pvalues.loc[a, b]) for b in pvalues.columns} for a in pvalues.index}},
        critical_difference=cd, alpha=alpha, excluded=excluded)
    ranking.statement = _statement(ranking, differ) + budget_statement(board, list(complete.columns))
    return ranking


def rank_groups(entries: list[dict[str, Any]]) -> list[tuple[float, list[str]]]:
    """Generators grouped by their (tied) rank, best first."""
    groups: dict[float, list[str]] = {}
    for e in entries:
        groups.setdefault(e["rank"], []).append(e["generator"])
    return sorted(groups.items())


def _statement(ranking: Ranking, differ: bool) -> str:
    f = ranking.friedman or {}
    head = (f"Friedman χ²({f['df']}) = {f['statistic']:.2f}, p = {f['pvalue']:.2g} over {ranking.blocks} blocks "
            f"({ranking.block_definition}), α = {ranking.alpha:g}. ")
    if not differ:
        body = "The generators' ranks are not significantly different: all share rank 1."
    else:
        groups = "; ".join(f"{r:g}. {', '.join(gs)}" for r, gs in rank_groups(ranking.generators))
        body = (f"The ranks differ. Nemenyi post-hoc, critical difference {ranking.critical_difference:.2f} mean ranks; "
                f"a generator's rank is 1 + the number of generators significantly better than it, so generators "
                f"that are not significantly different share a rank: {groups}.")
    caveat = (" Blocks from the same dataset share rows and are correlated, so these p-values are optimistic; "
              "the test becomes trustworthy with several datasets.")
    return head + body + caveat


@dataclass
class Leaderboard:
    board: pd.DataFrame
    cells: pd.DataFrame
    ranking: Ranking
    directions: dict[str, Direction]
    time_limit: float | None = None
    # Values of metrics that do not depend on the generator (computed from the real rows alone), once
    # per dataset: dataset, value, mean, std, ci_low, ci_high, seeds. They are in no generator's row.
    dataset_values: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The empirical audit of each audited row, by (generator, dataset, ε, δ), and the audits stored in the
    # run directory that match no row (`match_audits`).
    audits: dict[tuple[str, str, float, float], dict[str, Any]] = field(default_factory=dict)
    unmatched_audits: list[dict[str, Any]] = field(default_factory=list)

    @property
    def metrics(self) -> list[str]:
        return metric_names(self.board)

    def failures(self) -> pd.DataFrame:
        return self.cells[self.cells.charged][["generator", "dataset", "epsilon", "seed", "status", "error",
                                               "charged_with", "key"]]


def _ordered(board: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    head = [*GROUP, "eps_spent", "under_spent", "n_seeds", "failures", "fit_seconds_mean"]
    per_metric = [f"{m}_{s}" for m in metrics for s in ("mean", "std", "ci_low", "ci_high")]
    audited = [c for c in ("eps_lower", "audit_fits") if c in board]
    tail = ["unavailable", "guarantee", "audit_verdict", *audited, "claimed_epsilon_max",
            "sample_seconds_mean", "peak_rss_mb_max", "error"]
    learning = [c for c in ("auc_median", "auc_draws_median", "auc_fraction_of_nonprivate") if c in board]
    return board[head + per_metric + tail + learning + [f"{m}_rank" for m in metrics]]


def run_time_limit(manifest: dict[str, Any]) -> float | None:
    """The wall-clock limit per cell of the run's latest (re)start: its resolved execution settings,
    where a command-line --timeout overrides the suite's [settings]."""
    history = manifest.get("history") or [{}]
    timeout = (history[-1].get("execution") or {}).get("timeout")
    return float(timeout) if timeout else None


def dataset_level(cells: pd.DataFrame, names: Iterable[str]) -> pd.DataFrame:
    """The values in `names` (of metrics that ignore the generator) once per dataset: per seed the
    value every finished cell of that dataset and seed shares, then mean and interval over seeds."""
    ok = cells[cells.status == "ok"]
    rows = []
    for name in sorted(names):
        column = f"metric:{name}"
        if column not in ok:
            continue
        for dataset, part in ok.groupby("dataset", sort=True):
            per_seed = part.dropna(subset=[column]).groupby("seed")[column].first()
            if per_seed.empty:
                continue
            mean, std, low, high = mean_and_interval(per_seed, f"{dataset}|{name}")
            rows.append({"dataset": dataset, "value": name, "mean": mean, "std": std, "ci_low": low, "ci_high": high,
                         "seeds": len(per_seed)})
    return pd.DataFrame(rows, columns=["dataset", "value", "mean", "std", "ci_low", "ci_high", "seeds"])


def audit_identity(method: dict[str, Any], dataset: str, dataset_version: Any, dataset_checksum: Any,
                   epsilon: Any, delta: Any) -> str:
    """What decides a cell's mechanism, everything of its key but the seed and the metrics: the method's
    name, version, package and parameters (defaults filled in), the dataset's name, version and checksum,
    ε and δ. An audit of the same identity tested the mechanism the cell ran; the guarantee is left out,
    since the harness may lower a cell's to nominal."""
    return json.dumps([method.get("name"), method.get("version"), method.get("package"), method.get("params"), dataset,
                       dataset_version, dataset_checksum, float(epsilon), float(delta)], sort_keys=True, default=str)


def match_audits(results: list[dict[str, Any]], audits: list[dict[str, Any]]
                 ) -> tuple[dict[tuple[str, str, float, float], dict[str, Any]], list[dict[str, Any]]]:
    """Each row's (generator, dataset, ε, δ) audit among `audits` (`stored_audits`), and the audits that match
    no row. Where several audits test a row's mechanism (other fits, audit rows or seed), the row shows the
    finished one with the most fits, whose bound rests on the most evidence; one bound of several, chosen by
    its size, would need a correction for the choice."""
    rows: dict[str, set[tuple[str, str, float, float]]] = {}
    for r in results:
        cell, data = r["cell"], r.get("dataset", {})
        identity = audit_identity(r["method"], cell["dataset"], data.get("version"), data.get("checksum"),
                                  cell["epsilon"], cell["delta"])
        rows.setdefault(identity, set()).add((cell["method"], cell["dataset"], float(cell["epsilon"]),
                                              float(cell["delta"])))
    matched, unmatched = {}, []
    for audit in sorted(audits, key=lambda a: (a["status"] == "ok", a["fits_done"], a["key"])):  # the last one wins
        identity = audit_identity(audit["method"], audit["dataset"], audit.get("dataset_version"),
                                  audit.get("dataset_checksum"), audit["epsilon_claimed"], audit["delta"])
        for row in rows.get(identity, ()):
            matched[row] = audit
        if identity not in rows:
            unmatched.append(audit)
    return matched, unmatched


def with_audits(board: pd.DataFrame, audits: dict[tuple[str, str, float, float], dict[str, Any]]) -> pd.DataFrame:
    """The board with each audited row's ε lower bound and fits, and its audit's verdict where the row has none."""
    board = board.copy()
    found = [audits.get(key) for key in zip(*(board[c] for c in GROUP))]
    board["eps_lower"] = [a.get("epsilon_lower", math.nan) if a else math.nan for a in found]
    board["audit_fits"] = pd.Series([a["fits_done"] if a else None for a in found], index=board.index, dtype=object)
    board["audit_verdict"] = [v or (a["verdict"] if a else "") for v, a in zip(board.audit_verdict, found)]
    return board


def build_leaderboard(run_dir: Path, directions: dict[str, Direction], keys: set[str] | None = None,
                      generator_independent: Iterable[str] = ()) -> Leaderboard:
    """Read a run directory (only the cells in `keys`, when given: cells of an earlier suite run
    into the same folder are not mixed in) and compute the board, charged cells and overall ranking.
    Values named in `generator_independent` are summarised once per dataset (`dataset_values`), not
    as columns of every generator's row. Audits stored in the folder by `dpgym audit` join the rows whose
    mechanism they tested (`match_audits`)."""
    store = RunStore(run_dir)
    results = store.results(keys)
    if not results:
        raise ValueError(f"{run_dir} has no finished cells yet")
    manifest = json.loads((Path(run_dir) / "run.json").read_text()) if (Path(run_dir) / "run.json").exists() else {}
    time_limit = run_time_limit(manifest)
    rows = cell_rows(results)
    independent = [c for c in rows.columns if c.removeprefix("metric:") in set(generator_independent)]
    per_dataset = dataset_level(rows, [c.removeprefix("metric:") for c in independent])
    cells = charge_failures(rows.drop(columns=independent), directions, time_limit)
    deltas = sorted(cells.delta.unique())
    if len(deltas) > 1:  # rows, ranks and blocks are per ε: two δ would be compared as one
        raise ValueError(f"{run_dir}: its cells span δ = {', '.join(f'{d:g}' for d in deltas)}, and a leaderboard "
                         "compares one δ; pass the keys of one suite's cells (as `dpgym leaderboard` does) or "
                         "use one run directory per δ")
    board = aggregate(cells, directions)
    ranking = overall_ranking(board, directions)  # before ordering drops the rows' task
    metrics = [c.removeprefix("metric:") for c in cells.columns if c.startswith("metric:")]
    audits = stored_audits(run_dir)
    matched, unmatched = match_audits(results, audits)
    if audits:
        board = with_audits(board, matched)
    return Leaderboard(_ordered(board, metrics), cells, ranking, directions, time_limit, per_dataset, matched,
                       unmatched)


def format_number(value: float, digits: int = 3) -> str:
    if value is None or np.isnan(value):
        return "—"
    return ("∞" if value > 0 else "−∞") if np.isinf(value) else f"{value:.{digits}f}"


def format_accounted_epsilon(value: float) -> str:
    """An ε claimed or spent: three decimals like every other number, but three significant digits
    below 0.01, where budgets such as the private-learning track's (down to 1e-6) would all read 0.000."""
    if value is not None and np.isfinite(value) and 0 < abs(value) < 0.01:
        return f"{value:.3g}"
    return format_number(value)


def markdown_text(text: Any) -> str:
    """Text for one Markdown table cell or list item: a `|` in a label would start a new cell, and a
    `<` would open raw HTML in renderers that allow it."""
    return " ".join(str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").split())


def to_markdown(lb: Leaderboard) -> str:
    board, directions = lb.board, lb.directions
    metrics = lb.metrics
    lines = []
    for (dataset, epsilon), part in board.groupby(["dataset", "epsilon"], sort=True):
        lines.append(f"### {markdown_text(dataset)}, ε = {epsilon:g}\n")
        learning = [c for c in ("auc_median", "auc_fraction_of_nonprivate") if c in board]
        audited = ["ε lower (audit)", "audit fits"] if "eps_lower" in board else []
        header = ["generator", "guarantee", "ε spent", "audit", *audited, "seeds", "failed", "fit s"] + [
            f"{markdown_text(m)} {ARROWS.get(directions.get(m), '(direction undeclared)')}" for m in metrics] + learning
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for _, row in part.iterrows():
            spent = format_accounted_epsilon(row.eps_spent) + (" (under-spent)" if row.under_spent else "")
            audit = []
            if audited:
                audit = [format_number(row.eps_lower), "—" if row.audit_fits is None else str(row.audit_fits)]
            cells = [markdown_text(row.generator), row.guarantee, spent, row.audit_verdict or "—", *audit,
                     str(row.n_seeds), str(row.failures), format_number(row.fit_seconds_mean, 1)]
            for m in metrics:
                mean, low, high, rank = row[f"{m}_mean"], row[f"{m}_ci_low"], row[f"{m}_ci_high"], row[f"{m}_rank"]
                text = format_number(mean)
                if np.isfinite(low):
                    text += f" [{format_number(low)}, {format_number(high)}]"
                cells.append(text + ("" if not np.isfinite(rank) else f" #{rank:g}"))
            cells.extend(format_number(row[c]) for c in learning)
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines.append("ε spent: the independent re-accounting of the ledgers (largest over seeds); under-spent: less than "
                 f"{UNDER_SPENT:.0%} of the row's ε. "
                 "Mean over seeds with its 95% bootstrap CI; `#r` = rank, where generators whose CIs overlap share a "
                 "rank. Failed cells are charged the uniform baseline's scores (see the README). A value missing "
                 "from some of a row's seeds is averaged over the others and not ranked.\n")
    if "eps_lower" in board:
        unmatched = len(lb.unmatched_audits)
        lines.append(AUDIT_NOTE + (f" {unmatched} audit(s) in this folder match no row." if unmatched else "") + "\n")
    if len(lb.dataset_values):
        lines.append("### Computed from the real data alone (the same for every generator)\n")
        lines.append("| dataset | value | mean over seeds | 95% CI | seeds |")
        lines.append("|---|---|---|---|---|")
        for _, row in lb.dataset_values.iterrows():
            arrow = ARROWS.get(directions.get(row.value), "")
            lines.append(f"| {markdown_text(row.dataset)} | {markdown_text(row.value)} {arrow} | {format_number(row['mean'])} | "
                         f"[{format_number(row.ci_low)}, {format_number(row.ci_high)}] | {row.seeds} |")
        lines.append("")
    lines.append("### Overall ranking\n")
    lines.append(lb.ranking.statement + "\n")
    lines.append("| rank | generator | mean rank |")
    lines.append("|---|---|---|")
    for e in lb.ranking.generators:
        lines.append(f"| {format_number(e['rank'], 0)} | {markdown_text(e['generator'])} | {format_number(e['mean_rank'], 2)} |")
    failures = lb.failures()
    if len(failures):
        lines.append("\n### Failed cells (charged)\n")
        for _, f in failures.iterrows():
            lines.append(f"- {markdown_text(f.generator)} × {markdown_text(f.dataset)} × ε={f.epsilon:g} × seed {f.seed}: "
                         f"{markdown_text(f.error)}")
    return "\n".join(lines) + "\n"


def strict_json(value: Any) -> Any:
    """Strict JSON: NaN becomes null, and an infinity (ε, or a log-likelihood of −∞) the string "inf" or "-inf"."""
    if isinstance(value, dict):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    if isinstance(value, float | np.floating):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return None if math.isnan(value) else float(value)
    if isinstance(value, np.integer | np.bool_):
        return value.item()
    return value


def to_json(lb: Leaderboard) -> dict[str, Any]:
    return strict_json({
        "format": "dpgym-leaderboard/1",
        "metrics": {m: str(lb.directions[m]) if m in lb.directions else "undeclared" for m in lb.metrics},
        "statistics": {
            "interval": f"{CONFIDENCE:.0%} percentile bootstrap of the mean over seeds (scipy.stats.bootstrap, "
                        f"{BOOTSTRAP_RESAMPLES} resamples, seeded per row)",
            "metric_rank": "1 + number of generators whose CI is entirely better (overlap = tie)",
            "failures": f"charged the {BASELINE} baseline's score (same dataset, ε, seed when available) "
                        "and the time limit",
            "time_limit_seconds": lb.time_limit,
        },
        "rows": lb.board.to_dict(orient="records"),
        "dataset_values": lb.dataset_values.to_dict(orient="records"),
        "ranking": lb.ranking.__dict__,
        "failures": lb.failures().to_dict(orient="records"),
        **(audit_files(lb) if "eps_lower" in lb.board else {}),
    })


def audit_files(lb: Leaderboard) -> dict[str, Any]:
    """Where each audited row's audit lies in the run directory, and the audits that match no row."""
    def detail(audit: dict[str, Any]) -> str:
        return f"audits/{audit['key']}/audit.json"

    return {"audits": [dict(zip(GROUP, row), detail=detail(audit)) for row, audit in sorted(lb.audits.items())],
            "unmatched_audits": [detail(audit) for audit in lb.unmatched_audits]}


def save_leaderboard(run_dir: Path, lb: Leaderboard) -> str:
    """Write leaderboard.csv, .md and .json into the run directory; returns the Markdown."""
    markdown = to_markdown(lb)
    lb.board.to_csv(run_dir / "leaderboard.csv", index=False)
    (run_dir / "leaderboard.md").write_text(markdown)
    (run_dir / "leaderboard.json").write_text(json.dumps(to_json(lb), indent=2, allow_nan=False))
    return markdown


def write_leaderboard(run_dir: Path, directions: dict[str, Direction],
                      keys: set[str] | None = None) -> tuple[pd.DataFrame, str]:
    """Write leaderboard.csv, .md and .json into the run directory (of the cells in `keys`, if given)."""
    lb = build_leaderboard(Path(run_dir), directions, keys)
    return lb.board, save_leaderboard(Path(run_dir), lb)


# Shown by the terminal summary when a suite names no `headline`: the first of these the run has.
DEFAULT_HEADLINE = ("tstr_auroc", "tstr_macro_f1", "marginal_tvd", "kendall_rmse", "heldout_loglik", "auc_median")
HEADLINE_COLUMNS = 4


def headline_metrics(lb: Leaderboard, chosen: Sequence[str] | None) -> list[str]:
    """The metrics the terminal shows: the suite's `headline` (those the run has), else the first
    defaults the run has, else its first few values."""
    present = [*lb.metrics, *(c for c in ("auc_median",) if c in lb.board)]
    if chosen:
        return [m for m in chosen if m in present]
    return ([m for m in DEFAULT_HEADLINE if m in present] or present)[:HEADLINE_COLUMNS]


def terminal_summary(lb: Leaderboard, headline: Sequence[str] | None = None) -> list[Table]:
    """One compact table per (dataset, ε): each row's guarantee, ε spent and a few headline metrics
    (mean and rank); the full table, with intervals, is leaderboard.md and the report."""
    metrics = headline_metrics(lb, headline)
    tables = []
    for (dataset, epsilon), part in lb.board.groupby(["dataset", "epsilon"], sort=True):
        table = Table(title=f"{dataset}, ε = {epsilon:g}", title_justify="left")
        for column in ("generator", "guarantee", "ε spent"):
            table.add_column(column)
        for m in metrics:
            table.add_column(f"{m} {ARROWS.get(lb.directions.get(m), '')}".strip(), justify="right")
        for _, row in part.iterrows():
            spent = format_accounted_epsilon(row.eps_spent) + (" under" if row.under_spent else "")
            values = []
            for m in metrics:
                rank = row.get(f"{m}_rank", np.nan)
                mean = row[f"{m}_mean"] if f"{m}_mean" in row else row[m]
                values.append(format_number(mean) + ("" if not np.isfinite(rank) else f" #{rank:g}"))
            failed = f" ({row.failures} failed)" if row.failures else ""
            table.add_row(f"{row.generator}{failed}", row.guarantee, spent, *values)
        tables.append(table)
    if len(lb.dataset_values):
        table = Table(title="computed from the real data alone (the same for every generator)", title_justify="left")
        for column in ("dataset", "value", "mean over seeds", "seeds"):
            table.add_column(column)
        for _, row in lb.dataset_values.iterrows():
            table.add_row(row.dataset, f"{row.value} {ARROWS.get(lb.directions.get(row.value), '')}".strip(),
                          format_number(row["mean"]), str(row.seeds))
        tables.append(table)
    return tables
