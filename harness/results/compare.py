"""Published figures against a run: `dpgym compare RUN_DIR --reference dp-hflow`.

A reference file (`dpgym.results.references`) holds the numbers one paper publishes that dpgym's paper
suites can reproduce, each as an entry naming the suite's generator label, dataset, metric value
and ε. For every entry the run covers, ours is the mean over
seeds with the leaderboard's 95% bootstrap interval (`dpgym.results.leaderboard.mean_and_interval`, failed
cells charged as the leaderboard charges them, so the two agree), and the entry gets a status:

- ``reproduced``: the paper's value (± its reading precision, for a value read from a plot) lies in
  our interval, or our mean lies in the entry's ``band`` (a tolerance the paper's own text states);
  with one replicate there is no interval, and our mean must lie within the reading precision;
- ``better`` / ``worse``: otherwise, by the metric's declared direction;
- ``not run``: the run has no cells for the entry, or its cells did not compute the metric.

A relative entry (``relative_to``: "greater than 93 % of the non-private AUC") states a ratio to another
row of the same suite. Ours is then the ratio of our two means over seeds, its interval a percentile
bootstrap resampling each row's seeds (scipy.stats.bootstrap, two independent samples), and the
status judges our ratio against the paper's: the paper's own baseline value, from its preparation of
the data, never enters.

An entry is compared on each of its datasets (its `variants`, other preparations of the same data)
that the run has any cells of; an entry whose datasets the run has none of is one ``not run`` row.

A claim (an ordering or closeness the paper states in words, a lost plot's "large gap between flat
clipping and the other three") is checked on the run's cells of each generator it names, each with
the same mean and interval:

- ``reproduced``: ``below``: each named generator's interval lies wholly under each other
  generator's (with one replicate, its mean under theirs); ``within``: the means span no more than
  the claim's tolerance;
- ``not reproduced``: otherwise;
- ``not run``: a generator it names has no value at the claim's dataset and ε.

Entries without ``epsilon`` are non-private results (the "Real" column of a table): a non-private
method's cells are the same fits at every ε (a cell's random streams do not depend on ε), so they
are compared at the run's largest ε for that method rather than pooled across ε.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from rich.table import Table
from scipy import stats

from dpgym.results.leaderboard import (BOOTSTRAP_RESAMPLES, CONFIDENCE, bootstrap_rng, cell_rows, charge_failures,
                                       interval_key, mean_and_interval)
from dpgym.results.records import CellRecord
from dpgym.results.references import Claim, Entry, Reference, ReferenceError, format_epsilon
from dpgym.results.render import format_number, markdown_text, strict_json
from dpgym.results.store import RunStore
from dpgym.specs import Direction

REPRODUCED, BETTER, WORSE, NOT_RUN, NOT_REPRODUCED = "reproduced", "better", "worse", "not run", "not reproduced"
STATUS_RULES = ("reproduced: the paper's value (± its reading precision) lies in our 95% interval, or our mean lies "
                "in the band the paper's text states; better / worse: otherwise, by the metric's direction; "
                "not run: no cells, or the metric was not computed")
CLAIM_RULES = ("reproduced: below: each named generator's 95% interval lies wholly under each other generator's "
               "(with one seed, its mean); within: the means span no more than the tolerance; not reproduced: "
               "otherwise; not run: a generator named has no value at the claim's dataset and ε")


@dataclass(frozen=True)
class Comparison:
    """One reference entry against the run's cells of one dataset (or pooled replicates)."""

    entry: Entry
    status: str
    datasets: tuple[str, ...]
    epsilon: float | None = None  # the run's ε compared; None when not run
    delta: float | None = None
    mean: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    n_replicates: int = 0  # seeds (or pooled folds) that gave a value
    failures: int = 0
    reason: str = ""

    @property
    def difference(self) -> float:
        return self.mean - self.entry.value


@dataclass(frozen=True)
class Estimate:
    """One generator's value in a claim: the leaderboard's mean and interval of its row."""

    generator: str
    mean: float
    ci_low: float
    ci_high: float
    n_replicates: int
    failures: int


@dataclass(frozen=True)
class ClaimCheck:
    """One claim against the run's cells."""

    claim: Claim
    status: str
    estimates: tuple[Estimate, ...] = ()
    reason: str = ""


def judge(entry: Entry, mean: float, low: float, high: float, direction: Direction) -> str:
    """The status of our mean and interval against a published value (module docstring)."""
    reading = entry.precision or 0.0
    if math.isfinite(low):
        inside = entry.value - reading <= high and low <= entry.value + reading
    else:  # one replicate: no interval
        inside = abs(mean - entry.value) <= reading
    if inside or (entry.band is not None and entry.band[0] <= mean <= entry.band[1]):
        return REPRODUCED
    return BETTER if (mean > entry.value) == (direction is Direction.HIGHER) else WORSE


def run_cells(results: list[CellRecord], directions: dict[str, Direction]) -> pd.DataFrame:
    """A run's cells as the leaderboard scores them: failures charged."""
    cells = charge_failures(cell_rows(results), directions)
    return cells[(cells.status == "ok") | cells.charged]


def check_metrics(reference: Reference, directions: dict[str, Direction]) -> None:
    unknown = sorted({e.metric for e in (*reference.entries, *reference.claims)} - set(directions))
    if unknown:
        raise ReferenceError(f"{reference.path}: {unknown} are not values of any installed metric")


def compare(reference: Reference, cells: pd.DataFrame, directions: dict[str, Direction]) -> list[Comparison]:
    """Every entry of `reference` against `cells` (`run_cells`): one row per dataset it is compared on."""
    check_metrics(reference, directions)
    rows, ran = [], set(cells.dataset)
    for entry in reference.entries:
        candidates = [(entry.dataset, *entry.replicates), *((v,) for v in entry.variants)]
        # A preparation the run has no cells of at all is another suite's, not a gap in this run.
        for datasets in [c for c in candidates if ran.intersection(c)] or candidates[:1]:
            rows.extend(_compare_on(entry, datasets, cells, directions[entry.metric]))
    return rows


def check_claims(reference: Reference, cells: pd.DataFrame, directions: dict[str, Direction]) -> list[ClaimCheck]:
    """Every claim of `reference` against `cells` (`run_cells`)."""
    check_metrics(reference, directions)
    return [_check(claim, cells) for claim in reference.claims]


def _cells_of(cells: pd.DataFrame, generator: str, datasets: tuple[str, ...], delta: float | None) -> pd.DataFrame:
    """The cells of one generator on `datasets`, at `delta` when one is named."""
    mine = cells[(cells.generator == generator) & cells.dataset.isin(datasets)]
    if delta is not None:
        mine = mine[[math.isclose(d, delta, rel_tol=1e-6) for d in mine.delta]]
    return mine


def _check(claim: Claim, cells: pd.DataFrame) -> ClaimCheck:
    estimates, column = [], f"metric:{claim.metric}"
    where = f"on {claim.dataset} at ε = {format_epsilon(claim.epsilon)}"
    for generator in (*claim.generators, *claim.others):
        mine = _cells_of(cells, generator, (claim.dataset,), claim.delta)
        mine = mine[mine.epsilon == claim.epsilon]
        values = mine[column] if column in mine else pd.Series(dtype=float)
        if values.notna().sum() == 0:
            return ClaimCheck(claim, NOT_RUN, reason=f"the run has no {claim.metric} of {generator} {where}")
        if mine.delta.nunique() > 1:
            return ClaimCheck(claim, NOT_RUN, reason=f"the run has {generator} {where} at several δ: the claim must "
                                                     "name one ('delta')")
        key = interval_key(generator, claim.dataset, claim.epsilon, mine.delta.iloc[0], claim.metric)
        mean, _, low, high = mean_and_interval(values, key)
        estimates.append(Estimate(generator, mean, low, high, int(values.notna().sum()), int(mine.charged.sum())))
    if claim.kind == "below":
        status, reason = _below(estimates[:len(claim.generators)], estimates[len(claim.generators):])
    else:
        status, reason = _within(estimates, claim)
    return ClaimCheck(claim, status, tuple(estimates), reason)


def _under(low: Estimate, high: Estimate) -> bool:
    if math.isfinite(low.ci_high) and math.isfinite(high.ci_low):
        return low.ci_high < high.ci_low
    return low.mean < high.mean


def _below(lower: list[Estimate], upper: list[Estimate]) -> tuple[str, str]:
    crossing = [(a, b) for a in lower for b in upper if not _under(a, b)]
    if crossing:
        return NOT_REPRODUCED, "; ".join(f"{a.generator} {_estimate(a)} is not under {b.generator} {_estimate(b)}"
                                         for a, b in crossing)
    a, b = min(((a, b) for a in lower for b in upper), key=lambda pair: pair[1].mean - pair[0].mean)
    return REPRODUCED, f"smallest gap in means {b.mean - a.mean:.3g}, {a.generator} to {b.generator}"


def _within(estimates: list[Estimate], claim: Claim) -> tuple[str, str]:
    lowest, highest = min(estimates, key=lambda e: e.mean), max(estimates, key=lambda e: e.mean)
    span = highest.mean - lowest.mean
    status = REPRODUCED if span <= claim.tolerance else NOT_REPRODUCED
    return status, (f"means span {span:.3g} ({lowest.generator} to {highest.generator}) against the tolerance "
                    f"{claim.tolerance:g} ({claim.tolerance_source})")


def dataset_text(datasets: tuple[str, ...]) -> str:
    """The datasets of a row, short: pooled folds are "lifesci + 9 more"."""
    return " + ".join(datasets) if len(datasets) < 3 else f"{datasets[0]} + {len(datasets) - 1} more"


def _compare_on(entry: Entry, datasets: tuple[str, ...], cells: pd.DataFrame, direction: Direction) -> list[Comparison]:
    mine = _cells_of(cells, entry.generator, datasets, entry.delta)
    if mine.empty:
        return [Comparison(entry, NOT_RUN, datasets, reason=f"the run has no cells of {entry.generator} on "
                           f"{dataset_text(datasets)}" + ("" if entry.delta is None else f" at δ = {entry.delta:g}"))]
    epsilon = mine.epsilon.max() if entry.epsilon is None else entry.epsilon
    at_epsilon = mine[mine.epsilon == epsilon]
    if at_epsilon.empty:
        ran = ", ".join(format_epsilon(e) for e in sorted(mine.epsilon.unique()))
        return [Comparison(entry, NOT_RUN, datasets, reason=f"the run has {entry.generator} on {dataset_text(datasets)} "
                           f"at ε = {ran} only")]
    return [_compare_group(entry, datasets, group, direction, cells)
            for _, group in at_epsilon.groupby("delta", sort=True)]


def _compare_group(entry: Entry, datasets: tuple[str, ...], group: pd.DataFrame, direction: Direction,
                   cells: pd.DataFrame) -> Comparison:
    epsilon, delta = group.epsilon.iloc[0], group.delta.iloc[0]
    column = f"metric:{entry.metric}"
    values = group[column] if column in group else pd.Series(dtype=float)
    if values.notna().sum() == 0:
        return Comparison(entry, NOT_RUN, datasets, float(epsilon), float(delta),
                          reason=f"the run's cells of {entry.generator} did not compute {entry.metric}")
    # One dataset: the leaderboard row's own interval; pooled replicates: an interval of their own.
    where = interval_key(entry.generator, "+".join(datasets), epsilon, delta, entry.metric)
    if entry.relative_to is None:
        mean, _, low, high = mean_and_interval(values, where)
        failures = int(group.charged.sum())
    else:
        base = _baseline_cells(entry, datasets, float(epsilon), float(delta), cells)
        base_column = f"metric:{entry.relative_to.metric}"
        if base.empty or base_column not in base or base[base_column].notna().sum() == 0:
            return Comparison(entry, NOT_RUN, datasets, float(epsilon), float(delta),
                              reason=f"the run has no {entry.relative_to.text} on {dataset_text(datasets)} to divide by")
        mean, low, high = ratio_and_interval(values, base[base_column], f"{where}/{entry.relative_to.text}")
        failures = int(group.charged.sum() + base.charged.sum())
    return Comparison(entry, judge(entry, mean, low, high, direction), datasets, float(epsilon), float(delta),
                      mean, low, high, int(values.notna().sum()), failures)


def _baseline_cells(entry: Entry, datasets: tuple[str, ...], epsilon: float, delta: float,
                    cells: pd.DataFrame) -> pd.DataFrame:
    """The cells of a relative entry's baseline row: at the entry's ε and δ where the baseline ran there,
    else (a non-private baseline, the same fits at every ε) at its largest ε."""
    base = _cells_of(cells, entry.relative_to.generator, datasets, None)
    same = base[(base.epsilon == epsilon) & (base.delta == delta)]
    if len(same):
        return same
    return base[base.epsilon == base.epsilon.max()]


def ratio_and_interval(values: pd.Series, base: pd.Series, seed_key: str) -> tuple[float, float, float]:
    """The ratio of two rows' means over seeds, and its 95% percentile bootstrap interval resampling
    each row's seeds on their own (NaN with fewer than two seeds on either side)."""
    ours, theirs = values.dropna().to_numpy(dtype=float), base.dropna().to_numpy(dtype=float)
    ratio = float(ours.mean() / theirs.mean())
    if min(len(ours), len(theirs)) < 2:
        return ratio, math.nan, math.nan
    result = stats.bootstrap((ours, theirs), lambda a, b, axis=-1: a.mean(axis=axis) / b.mean(axis=axis),
                             confidence_level=CONFIDENCE, n_resamples=BOOTSTRAP_RESAMPLES, method="percentile",
                             paired=False, rng=bootstrap_rng(seed_key))
    return ratio, float(result.confidence_interval.low), float(result.confidence_interval.high)


def _published(entry: Entry) -> str:
    text = format_number(entry.value)
    if entry.spread is not None:
        text += f" ± {format_number(entry.spread)} ({entry.spread_kind})"
    if entry.precision is not None:
        text += f" (read ± {format_number(entry.precision, 2)})"
    if entry.band is not None:
        text += f" band [{format_number(entry.band[0])}, {format_number(entry.band[1])}]"
    if entry.relative_to is not None:
        text += f" × {entry.relative_to.text}"
    return text


def _estimate(row: Comparison | Estimate) -> str:
    """Mean [95% interval] (n, failures charged)."""
    interval = f" [{format_number(row.ci_low)}, {format_number(row.ci_high)}]" if math.isfinite(row.ci_low) else ""
    charged = f", {row.failures} failed" if row.failures else ""
    return f"{format_number(row.mean)}{interval} (n = {row.n_replicates}{charged})"


def _ours(row: Comparison) -> str:
    return "—" if row.status == NOT_RUN else _estimate(row)


def _cells(row: Comparison) -> list[str]:
    """A row's columns, shared by the terminal table and the Markdown file."""
    e = row.entry
    epsilon = row.epsilon if row.epsilon is not None else e.epsilon
    return [e.figure, e.generator, dataset_text(row.datasets), "—" if epsilon is None else format_epsilon(epsilon),
            e.metric, _published(e), _ours(row),
            "—" if row.status == NOT_RUN else f"{row.difference:+.3f}", row.status, row.reason]


HEADER = ["figure", "generator", "dataset", "ε", "metric", "paper", "ours: mean [95% CI] (n)", "difference", "status",
          "why"]
CLAIM_HEADER = ["figure", "claim", "dataset", "ε", "metric", "paper's words", "ours: mean [95% CI] (n)", "status",
                "why"]


def _claim_cells(check: ClaimCheck) -> list[str]:
    c = check.claim
    ours = "; ".join(f"{e.generator} {_estimate(e)}" for e in check.estimates) or "—"
    return [c.figure, c.text, c.dataset, format_epsilon(c.epsilon), c.metric, c.statement, ours, check.status,
            check.reason]


def terminal_tables(reference: Reference, rows: list[Comparison], claims: list[ClaimCheck]) -> list[Table]:
    """The entries' table and, when the reference has claims, theirs."""
    table = Table(title=f"{reference.name}: {reference.title}", title_justify="left")
    for column in HEADER:
        table.add_column(column, justify="right" if column in ("difference",) else "left")
    for row in rows:
        table.add_row(*_cells(row))
    if not claims:
        return [table]
    claim_table = Table(title=f"{reference.name}: claims the paper states in words", title_justify="left")
    for column in CLAIM_HEADER:
        claim_table.add_column(column)
    for check in claims:
        claim_table.add_row(*_claim_cells(check))
    return [table, claim_table]


OURS = ("Ours: the mean over seeds (or pooled replicates) with the leaderboard's 95% bootstrap interval, failed "
        "cells charged; for an entry relative to another row (paper \"0.93 × nonprivate-l2 auc\"), the ratio of "
        "the two rows' means with a bootstrap interval resampling each row's seeds.")


def status_counts(rows: list[Comparison], claims: Sequence[ClaimCheck] = ()) -> str:
    counts = {s: sum(r.status == s for r in rows) for s in (REPRODUCED, BETTER, WORSE, NOT_RUN)}
    text = ", ".join(f"{n} {s}" for s, n in counts.items())
    if claims:
        claim_counts = {s: sum(c.status == s for c in claims) for s in (REPRODUCED, NOT_REPRODUCED, NOT_RUN)}
        text += "; claims: " + ", ".join(f"{n} {s}" for s, n in claim_counts.items())
    return text


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(markdown_text(c) for c in row) + " |" for row in rows)]


def to_markdown(reference: Reference, rows: list[Comparison], run_dir: Path, claims: Sequence[ClaimCheck] = ()) -> str:
    lines = [f"# {markdown_text(reference.title)} against {markdown_text(run_dir)}\n",
             f"Reference `{reference.path.name}`: {status_counts(rows, claims)}. {STATUS_RULES}. {OURS}\n",
             *_markdown_table(HEADER, [_cells(row) for row in rows])]
    if claims:
        lines += ["\n## Claims the paper states in words\n", f"{CLAIM_RULES}. {OURS}\n",
                  *_markdown_table(CLAIM_HEADER, [_claim_cells(check) for check in claims])]
    lines.append("\n## What each figure measures\n")
    lines += [f"- **{markdown_text(figure)}**: {markdown_text(notes)}" for figure, notes in reference.figures.items()]
    noted = [item for item in (*reference.entries, *reference.claims) if item.notes]
    if noted:
        lines.append("\n## Notes on single entries and claims\n")
        lines += [f"- {markdown_text(item.label)}: {markdown_text(item.notes)}" for item in noted]
    return "\n".join(lines) + "\n"


def to_json(reference: Reference, rows: list[Comparison], run_dir: Path,
            claims: Sequence[ClaimCheck] = ()) -> dict[str, Any]:
    return strict_json({
        "format": "dpgym-compare/1",
        "reference": reference.name,
        "title": reference.title,
        "run_dir": str(run_dir),
        "status_rules": STATUS_RULES,
        "rows": [{**asdict(row.entry), "compared_datasets": list(row.datasets), "compared_epsilon": row.epsilon,
                  "compared_delta": row.delta, "status": row.status, "mean": row.mean, "ci_low": row.ci_low,
                  "ci_high": row.ci_high, "n_replicates": row.n_replicates, "failures": row.failures,
                  "difference": row.difference, "reason": row.reason} for row in rows],
        "claim_rules": CLAIM_RULES,
        "claims": [{**asdict(check.claim), "status": check.status, "reason": check.reason,
                    "estimates": [asdict(e) for e in check.estimates]} for check in claims],
    })


def report_section(store: RunStore, reference: Reference, rows: list[Comparison],
                   claims: list[ClaimCheck]) -> dict[str, Any]:
    """One reference's comparison as the HTML report shows it: the Markdown file's tables and counts,
    and the name of the file `dpgym compare` writes beside the run."""
    return {"name": reference.name, "title": reference.title, "counts": status_counts(rows, claims),
            "rules": f"{STATUS_RULES}. {OURS}", "header": HEADER,
            "rows": [{"cells": _cells(row), "status": row.status} for row in rows],
            "claim_rules": CLAIM_RULES, "claim_header": CLAIM_HEADER,
            "claims": [{"cells": _claim_cells(check), "status": check.status} for check in claims],
            "file": store.comparison_path(reference.name, "md").name}


def write_comparison(store: RunStore, reference: Reference, rows: list[Comparison],
                     claims: Sequence[ClaimCheck] = ()) -> tuple[Path, Path]:
    """RUN_DIR/compare-NAME.md and .json."""
    markdown, data = store.comparison_path(reference.name, "md"), store.comparison_path(reference.name, "json")
    markdown.write_text(to_markdown(reference, rows, store.root, claims))
    data.write_text(json.dumps(to_json(reference, rows, store.root, claims), indent=2, allow_nan=False))
    return markdown, data
