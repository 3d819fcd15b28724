"""The leaderboard written out: leaderboard.md, .csv and .json in the run directory, and the compact
table the terminal shows. The statistics behind every number are `dpgym.results.leaderboard`'s."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.table import Table

from dpgym.results.leaderboard import (
    ARROWS,
    AUDIT_NOTE,
    BASELINE,
    BOOTSTRAP_RESAMPLES,
    CONFIDENCE,
    GROUP,
    UNDER_SPENT,
    Leaderboard,
)
from dpgym.results.store import RunStore
from dpgym.specs import Direction


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
        header = ["generator", "guarantee", "ε spent", "audit", *audited, "privacy check", "seeds", "failed", "fit s"] + [
            f"{markdown_text(m)} {ARROWS.get(directions.get(m), '(direction undeclared)')}" for m in metrics] + learning
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for _, row in part.iterrows():
            spent = format_accounted_epsilon(row.eps_spent) + (" (under-spent)" if row.under_spent else "")
            audit = []
            if audited:
                audit = [format_number(row.eps_lower), "—" if row.audit_fits is None else str(row.audit_fits)]
            cells = [markdown_text(row.generator), row.guarantee, spent, row.audit_verdict or "—", *audit,
                     markdown_text(row.privacy_check) or "—", str(row.n_seeds), str(row.failures), format_number(row.fit_seconds_mean, 1)]
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
    if lb.scored:
        lines.append(lb.scored_note() + "\n")
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
    lines.append(ranking_note(lb) + "\n")
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


def ranking_note(lb: Leaderboard) -> str:
    """What the overall ranking ranks, in words: the leaderboard's footnote and the report's."""
    ranked = ", ".join(f"`{m}` {ARROWS.get(lb.directions.get(m), '')}".rstrip() for m in lb.ranking.ranked) or "nothing"
    return (f"What is ranked: one value per metric family ({ranked}), each family weighing the same; a block is one "
            "(dataset, ε) of one ranked value. The other values, the privacy-risk indicators among them, are a check "
            "beside the ranking, not a score: a generator whose row the privacy check flags (an audit's `violation`, "
            "or synthetic rows that copy training rows clearly more often than holdout rows) is not ranked.")


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
        "ranking": {**lb.ranking.__dict__, "block_definition": lb.ranking.block_definition},
        "failures": lb.failures().to_dict(orient="records"),
        **(audit_files(lb) if "eps_lower" in lb.board else {}),
    })


def audit_files(lb: Leaderboard) -> dict[str, Any]:
    """Where each audited row's audit lies in the run directory, and the audits that match no row."""
    def detail(audit: dict[str, Any]) -> str:
        return f"audits/{audit['key']}/audit.json"

    return {"audits": [dict(zip(GROUP, row), detail=detail(audit)) for row, audit in sorted(lb.audits.items())],
            "unmatched_audits": [detail(audit) for audit in lb.unmatched_audits]}


def save_leaderboard(store: RunStore, lb: Leaderboard) -> str:
    """Write leaderboard.csv, .md and .json into the run directory; returns the Markdown."""
    markdown = to_markdown(lb)
    lb.board.to_csv(store.leaderboard_path("csv"), index=False)
    store.leaderboard_path("md").write_text(markdown)
    store.leaderboard_path("json").write_text(json.dumps(to_json(lb), indent=2, allow_nan=False))
    return markdown


# Shown by the terminal summary when a suite names no `headline`: the first of these the run has.
DEFAULT_HEADLINE = ("tstr_auroc", "tvd_2way", "tstr_macro_f1", "marginal_tvd", "kendall_rmse", "heldout_loglik",
                    "auc_median")
# The terminal table cuts a generator's label to this many characters (with "…"), so that at 100 columns
# a long ablation label does not wrap over several lines; leaderboard.md and the report keep it whole.
TERMINAL_LABEL = 24
HEADLINE_COLUMNS = 4


def headline_metrics(lb: Leaderboard, chosen: Sequence[str] | None) -> list[str]:
    """The metrics the terminal shows: the suite's `headline` (those the run has), else the first
    defaults the run has, else its first few values."""
    present = [*lb.metrics, *(c for c in ("auc_median",) if c in lb.board)]
    if chosen:
        return [m for m in chosen if m in present]
    return ([m for m in DEFAULT_HEADLINE if m in present] or present)[:HEADLINE_COLUMNS]


def short_label(label: str) -> str:
    return label if len(label) <= TERMINAL_LABEL else label[:TERMINAL_LABEL - 1] + "…"


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
            flagged = " (flagged)" if row.get("privacy_check") else ""
            table.add_row(f"{short_label(row.generator)}{failed}{flagged}", row.guarantee, spent, *values)
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
