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
draws pooled over seeds (harness/audit/learners.py).

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
- The overall ranking is over the ranked values: one per metric family that declares one
  (`MetricSpec.ranked_value`: fidelity's and utility's), so each family weighs the same however many
  values it reports. Each (dataset, ε, ranked value) is a block; the generators are ranked within it,
  and a Friedman test (scipy) with a Nemenyi post-hoc comparison (scikit-posthocs) gives rank groups
  and the critical difference of the report's CD diagram. The other values (the privacy-risk
  indicators among them) stay beside the ranking as columns.
- ``privacy_check`` flags a row whose empirical audit found a `violation`, or whose synthetic rows copy
  training rows clearly more often than holdout rows (`privacy_flags`). A generator with a
  flagged row is left out of the overall ranking: a benchmark fixes privacy by ε and compares the rest
  at that ε, so a generator that does not keep its ε is not compared. Generators that claim no privacy
  (guarantee ``none``: the ``real`` reference) are never flagged for copies.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

import numpy as np
import pandas as pd
import scikit_posthocs
from scipy import stats

from dpgym.audit import learners
from dpgym.audit.matching import match_audits
from dpgym.registry import Registry
from dpgym.results.records import SCORED, CellRecord
from dpgym.results.store import RunStore
from dpgym.specs import Direction

GROUP = ["generator", "dataset", "epsilon", "delta"]
CONFIDENCE = 0.95
ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 10  # any fixed value makes the intervals reproducible; changing it moves them
BASELINE = "uniform"  # SDGym's reference for charging failures: reads no rows, costs ε = 0
# A generator run on part of a suite's grid (a deep generator at one ε, say) joins the overall ranking
# only when it covers at least this share of the blocks: the ranking keeps the blocks every ranked
# generator has, so one covering a third of them would shrink the evidence for all the others to that
# third. Below it, the generator is ranked per dataset only (`ranks_by_dataset`).
MIN_COVERAGE = 0.5
UNDER_SPENT = 0.9  # a row spending less than this share of its ε is marked under_spent
NOT_FAILURES = ("ok", "unavailable")  # unavailable = the dataset was missing: nobody's fault, not charged
ARROWS = {Direction.HIGHER: "↑", Direction.LOWER: "↓"}
# A row copies training rows when the share of its synthetic rows that match a training row (among as
# many training rows as the test split has, `exact_match_rate_train_sized_as_test`) exceeds the share
# that match a holdout row by both margins: at least COPY_MARGIN more, and at least COPY_RATIO times as
# much. Duplicates in the population put some exact matches on both sides, in equal shares.
COPY_MARGIN = 0.01
COPY_RATIO = 2.0
AUDIT_NOTE = ("ε lower (audit): the empirical audit's lower bound on ε at 95% confidence (`dpgym audit`, "
              "docs/privacy.md#empirical-audits), with its fits; `consistent` proves nothing, a bound above the "
              "row's ε shows the claim false.")


def generator_independent_values(registry: Registry) -> frozenset[str]:
    """The values of metrics that do not depend on the generator: the leaderboard shows them once per
    dataset."""
    return frozenset(name for provided in registry.kinds["metric"].values()
                     if not provided.spec.depends_on_generator for name in provided.spec.directions)


def ranked_values(registry: Registry) -> tuple[str, ...]:
    """The value of each metric family that the overall ranking uses: each metric's declared
    `ranked_value`, and the private learners' AUC (learners are ranked among themselves)."""
    declared = (provided.spec.ranked_value for _, provided in sorted(registry.kinds["metric"].items()))
    return (*(value for value in declared if value), learners.RANKED_VALUE)


def metric_info(registry: Registry) -> tuple[dict[str, Direction], dict[str, str]]:
    """Each metric value's direction and the metric plugin (family) that produces it; the values of
    private-learning cells come from the harness (`dpgym.audit.learners`)."""
    directions: dict[str, Direction] = dict(learners.DIRECTIONS)
    families = dict.fromkeys(learners.DIRECTIONS, "private learning")
    for provided in registry.kinds["metric"].values():
        for name, direction in provided.spec.directions.items():
            directions[name], families[name] = direction, provided.spec.name
    return directions, families


def is_failure(status: str) -> bool:
    return status not in NOT_FAILURES


def metric_names(frame: pd.DataFrame) -> list[str]:
    """Metric values present in a board (from its ``<m>_ci_low`` columns), in column order."""
    return [c.removesuffix("_ci_low") for c in frame.columns if c.endswith("_ci_low")]


def _seconds(value: float | None) -> float:
    return math.nan if value is None else value


def cell_rows(results: list[CellRecord]) -> pd.DataFrame:
    """One row per cell: identity, status, error, costs, privacy and every metric value."""
    rows = []
    for r in results:
        cell, audit = r.cell, r.audit or {}
        detail = (r.metric_detail or {}) if r.ok else {}
        rows.append({
            "generator": cell.method,
            "plugin": r.method.name,
            "scored": r.method.kind == SCORED,
            "task": r.task,
            "dataset": cell.dataset,
            "epsilon": cell.epsilon,
            "delta": cell.delta,
            "seed": cell.seed,
            "key": cell.key,
            "status": str(r.status),
            "error": r.error.summary() if r.error and not r.ok else "",
            "guarantee": r.method.guarantee,
            "audit_verdict": audit.get("verdict", ""),
            "claimed_epsilon": r.privacy.claimed_epsilon if r.privacy else math.nan,
            "reaccounted_epsilon": r.privacy.reaccounted.epsilon if r.privacy else math.nan,
            "fit_seconds": _seconds(r.timings.fit_seconds),
            "sample_seconds": _seconds(r.timings.sample_seconds),
            "total_seconds": _seconds(r.timings.total_seconds),
            "peak_rss_mb": r.peak_rss_mb,
            "n_rows": audit.get("n_rows"),
            # an older result without them: δ = the budget's and add/remove, the looser bound
            "delta_spent": audit.get("delta", cell.delta),
            "replace_one": audit.get("replace_one", False),
            "auc_draws": detail.get("auc_draws"),
            "auc_permuted_draws": detail.get("auc_permuted_draws"),
            "copies_train_sized": (detail.get("privacy") or {}).get("exact_match_rate_train_sized_as_test"),
            **({f"metric:{k}": v for k, v in (r.metrics or {}).items()} if r.ok else {}),
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


def bootstrap_rng(seed_key: str) -> np.random.Generator:
    """The resampling stream of one interval, keyed by `seed_key`: the same interval wherever it is computed."""
    return np.random.default_rng([BOOTSTRAP_SEED, zlib.crc32(seed_key.encode())])


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
    result = stats.bootstrap((values,), np.mean, confidence_level=CONFIDENCE, n_resamples=BOOTSTRAP_RESAMPLES,
                             method="percentile", rng=bootstrap_rng(seed_key))
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
        row.update(task=group.task.iloc[0], scored=bool(group.scored.all()), n_seeds=len(ok),
                   failures=int(group.charged.sum()), fit_seconds_mean=scored.fit_seconds.mean())
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
            copies_train_sized=pd.to_numeric(ok.copies_train_sized, errors="coerce").mean(),
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
        for _, part in board[~board.scored].groupby(["dataset", "epsilon"]):  # scored rows: no verified ε
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
        verdicts.append(learners.group_privacy(np.array(draws), np.array(permuted), epsilon, int(ok.n_rows.iloc[0]),
                                            float(group["delta_spent"]), bool(group["replace_one"])).verdict)
    return {"auc_median": float(ok["metric:auc"].median()),
            "auc_draws_median": float(np.median(draws)) if draws else math.nan,
            "audit_verdict": min(verdicts, key=learners.VERDICT_ORDER.index) if verdicts else "not_audited"}


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
    ranked: list[str] = field(default_factory=list)  # the values whose blocks it ranks, one per family
    excluded: list[str] = field(default_factory=list)  # generators missing from some block
    partial: list[str] = field(default_factory=list)  # generators left out for covering too few blocks
    flagged: list[str] = field(default_factory=list)  # generators left out by the privacy check
    datasets: int = 0  # how many datasets the blocks come from

    @property
    def block_definition(self) -> str:
        values = ", ".join(self.ranked) or "none"
        return (f"every (dataset, ε) for each ranked value ({values}: one per metric family) where not every "
                "generator ties; failed cells charged")


def _block_table(board: pd.DataFrame, directions: dict[str, Direction], ranked: Sequence[str]) -> pd.DataFrame:
    """Blocks × generators, oriented so that a smaller value is always better."""
    parts = []
    for m in (m for m in metric_names(board) if m in directions and m in ranked):
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


def privacy_flags(board: pd.DataFrame) -> pd.Series:
    """Per row, why the privacy check flags it ("" when it does not): an audit's `violation`, or copies of
    training rows (COPY_MARGIN, COPY_RATIO) by a generator that claims privacy."""
    train = board.copies_train_sized.astype(float)
    holdout = board.get("exact_match_rate_holdout_mean", pd.Series(math.nan, index=board.index)).astype(float)
    copies = (board.guarantee != "none") & (train >= holdout + COPY_MARGIN) & (train >= COPY_RATIO * holdout)
    flags = []
    for verdict, copying, t, h in zip(board.audit_verdict, copies, train, holdout):
        reasons = ["audit: violation"] if verdict == "violation" else []
        if copying:
            reasons.append(f"copies training rows ({t:.3g} exact matches vs {h:.3g} of holdout rows)")
        flags.append("; ".join(reasons))
    return pd.Series(flags, index=board.index, dtype=object)


def overall_ranking(board: pd.DataFrame, directions: dict[str, Direction], ranked: Sequence[str],
                    alpha: float = ALPHA) -> Ranking:
    """Friedman test over the ranked values' blocks, Nemenyi post-hoc, and rank groups that respect it.

    A run of both synthetic-data generators and private learners ranks the generators: the two kinds
    share no metric (fidelity and utility vs. a model's AUC), so no block holds both, and the
    learners are compared in a section of their own. Generators with a row flagged by the privacy
    check (`privacy_check`) are left out."""
    ranked = [m for m in ranked if m in directions and m in metric_names(board)]
    if "scored" in board and board.scored.any():
        ranking = overall_ranking(board[~board.scored], directions, ranked, alpha)
        ranking.excluded = sorted(set(ranking.excluded) | set(board.generator[board.scored]))
        ranking.statement += (f" Scored rows ({', '.join(sorted(set(board.generator[board.scored])))}) are shown, not "
                              "ranked: made elsewhere, no ledger verifies their ε.")
        return ranking
    learners = board.task == "private_learning"
    if learners.any() and not learners.all():
        ranking = overall_ranking(board[~learners], directions, ranked, alpha)
        ranking.excluded = sorted(set(ranking.excluded) | set(board.generator[learners]))
        ranking.statement += (" Private learners are not in this ranking: they share no metric with the generators; "
                              "the private-learning section compares them.")
        return ranking
    flagged = sorted(set(board.generator[board.privacy_check != ""])) if "privacy_check" in board else []
    board = board[~board.generator.isin(flagged)]
    everyone = sorted(board.generator.unique())
    table = _block_table(board, directions, ranked)
    coverage = table.notna().mean() if len(table) else pd.Series(dtype=float)
    partial = sorted(coverage.index[coverage < MIN_COVERAGE])
    table = table.drop(columns=partial)
    complete = table.dropna(axis=0) if len(table) else table
    excluded = sorted(set(everyone) - set(complete.columns) - set(partial))
    k, n = complete.shape[1], complete.shape[0]
    left_out_note = (f" Left out by the privacy check: {', '.join(flagged)}." if flagged else "")
    if partial:
        left_out_note = (f" Left out as they cover fewer than {MIN_COVERAGE:.0%} of the blocks (the suite runs them "
                         f"on part of its grid): {', '.join(partial)}.") + left_out_note
    if k < 2 or n < 1:
        return Ranking(n, [{"generator": g, "mean_rank": math.nan, "rank": math.nan} for g in everyone],
                       "No overall ranking: the run has no ranked values shared by two or more generators."
                       + left_out_note, ranked=ranked, excluded=excluded, flagged=flagged, partial=partial)
    mean_ranks = complete.rank(axis=1, method="average").mean().sort_values()
    entries = [{"generator": g, "mean_rank": float(r)} for g, r in mean_ranks.items()]
    if k < 3 or n < 2:
        for e in entries:
            e["rank"] = 1.0
        return Ranking(n, entries, (
            f"Mean ranks over {n} block(s) only: a Friedman test needs at least three generators and two blocks, "
            "so no generator is shown to be better than another.") + budget_statement(board, list(complete.columns))
            + left_out_note, ranked=ranked, excluded=excluded, flagged=flagged, partial=partial)
    datasets = complete.index.get_level_values("dataset").nunique()
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
        critical_difference=cd, alpha=alpha, ranked=ranked, excluded=excluded, flagged=flagged,
        partial=partial, datasets=datasets)
    ranking.statement = _statement(ranking, differ) + budget_statement(board, list(complete.columns)) + left_out_note
    return ranking


def ranks_by_dataset(board: pd.DataFrame, directions: dict[str, Direction], ranked: Sequence[str]) -> pd.DataFrame:
    """Each generator's rank on each dataset (generators × datasets, best first), for seeing where a
    method wins and where it loses: per block, (rank − 1) / (generators in the block − 1), so 0 is the
    best and 1 the worst whatever the number of generators that ran there, averaged over the dataset's
    blocks (each ranked value at each ε). Unlike the overall ranking, a generator run on part of the
    grid is ranked wherever it ran; generators flagged by the privacy check, private learners and scored
    rows (no verified ε) are not."""
    keep = board.task != "private_learning"
    if "privacy_check" in board:
        keep &= board.privacy_check == ""
    if "scored" in board:
        keep &= ~board.scored.astype(bool)
    table = _block_table(board[keep], directions, [m for m in ranked if m in directions])
    if table.empty:
        return pd.DataFrame()
    present = table.notna().sum(axis=1)
    table = table[present > 1]
    relative = table.rank(axis=1, method="average").sub(1).div(present[present > 1] - 1, axis=0)
    by_dataset = relative.groupby(level="dataset", sort=False).mean().T
    return by_dataset.loc[by_dataset.mean(axis=1).sort_values().index]


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
    caveat = ("" if ranking.datasets > 1 else
              " The blocks come from one dataset, whose rows they share: they are correlated, so these p-values are "
              "optimistic; the test becomes trustworthy with several datasets.")
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
    # Each generator's relative rank on each dataset (`ranks_by_dataset`): generators × datasets.
    by_dataset: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def metrics(self) -> list[str]:
        return metric_names(self.board)

    @property
    def scored(self) -> list[str]:
        """The labels of synthetic rows made elsewhere (`dpgym score`): shown beside the generators, not ranked."""
        return sorted(set(self.cells.generator[self.cells.scored])) if len(self.cells) else []

    def scored_note(self) -> str:
        """What a reader must know of the scored rows: their claim is unverified, so they are not ranked."""
        if not self.scored:
            return ""
        rows = self.board[self.board.generator.isin(self.scored)]
        listed = "; ".join(f"{r.generator} on {r.dataset} at ε = {r.epsilon:g} (guarantee {r.guarantee})"
                           for r in rows.itertuples())
        return (f"Scored rows, shown and not ranked: {listed}. Their synthetic rows were made elsewhere and scored by "
                "`dpgym score`: no ledger records how they were made, so any ε stated for them is a claim dpgym has "
                "not verified (guarantee nominal; none when no ε was stated).")

    def failures(self) -> pd.DataFrame:
        return self.cells[self.cells.charged][["generator", "dataset", "epsilon", "seed", "status", "error",
                                               "charged_with", "key"]]


def _ordered(board: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    head = [*GROUP, "eps_spent", "under_spent", "n_seeds", "failures", "fit_seconds_mean"]
    per_metric = [f"{m}_{s}" for m in metrics for s in ("mean", "std", "ci_low", "ci_high")]
    audited = [c for c in ("eps_lower", "audit_fits") if c in board]
    tail = ["unavailable", "guarantee", "audit_verdict", *audited, "privacy_check", "claimed_epsilon_max",
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


def with_audits(board: pd.DataFrame, audits: dict[tuple[str, str, float, float], dict[str, Any]]) -> pd.DataFrame:
    """The board with each audited row's ε lower bound and fits, and its audit's verdict where the row has none."""
    board = board.copy()
    found = [audits.get(key) for key in zip(*(board[c] for c in GROUP))]
    board["eps_lower"] = [a.get("epsilon_lower", math.nan) if a else math.nan for a in found]
    board["audit_fits"] = pd.Series([a["fits_done"] if a else None for a in found], index=board.index, dtype=object)
    board["audit_verdict"] = [v or (a["verdict"] if a else "") for v, a in zip(board.audit_verdict, found)]
    return board


def build_leaderboard(store: RunStore, results: list[CellRecord], manifest: dict[str, Any],
                      directions: dict[str, Direction], ranked: Sequence[str],
                      generator_independent: Iterable[str] = ()) -> Leaderboard:
    """The board, charged cells and overall ranking of a run's cells (`results`, one suite's: cells of
    an earlier suite run into the same folder are not mixed in), under its manifest's time limit. The
    ranking is over the values in `ranked` (`ranked_values`). Values named in `generator_independent`
    are summarised once per dataset (`dataset_values`), not as columns of every generator's row. Audits
    stored in the folder by `dpgym audit` join the rows whose mechanism they tested (`match_audits`)
    before the privacy check flags rows."""
    if not results:
        raise ValueError(f"{store.root} has no finished cells yet")
    time_limit = run_time_limit(manifest)
    rows = cell_rows(results)
    independent = [c for c in rows.columns if c.removeprefix("metric:") in set(generator_independent)]
    per_dataset = dataset_level(rows, [c.removeprefix("metric:") for c in independent])
    cells = charge_failures(rows.drop(columns=independent), directions, time_limit)
    deltas = sorted(cells.delta.unique())
    if len(deltas) > 1:  # rows, ranks and blocks are per ε: two δ would be compared as one
        raise ValueError(f"{store.root}: its cells span δ = {', '.join(f'{d:g}' for d in deltas)}, and a leaderboard "
                         "compares one δ; pass the keys of one suite's cells (as `dpgym leaderboard` does) or "
                         "use one run directory per δ")
    board = aggregate(cells, directions)
    audits = store.stored_audits()
    matched, unmatched = match_audits(results, audits)
    if audits:
        board = with_audits(board, matched)
    board["privacy_check"] = privacy_flags(board)
    ranking = overall_ranking(board, directions, ranked)  # before ordering drops the rows' task
    by_dataset = ranks_by_dataset(board, directions, ranking.ranked)
    metrics = [c.removeprefix("metric:") for c in cells.columns if c.startswith("metric:")]
    return Leaderboard(_ordered(board, metrics), cells, ranking, directions, time_limit, per_dataset, matched,
                       unmatched, by_dataset)
