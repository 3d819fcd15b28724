"""Gather a run directory into one self-contained HTML file: leaderboard, figures, ledgers, provenance.

Everything the page shows is read from the run directory (result.json, ledger.json,
synthetic.parquet, run.json, and the audit.json of any empirical audit written into it) and the
leaderboard computed from it; the only other input is the
dataset plugins, for the real training rows the marginal and Kendall-τ figures compare against.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import markupsafe
import numpy as np
import pandas as pd

from dpgym.privacy.ledger import Ledger
from dpgym.registry import Registry
from dpgym.report import figures
from dpgym.report.datasets import dataset_sections, drawn_once, ordered_metrics
from dpgym.report.formatting import eps, num, sig
from dpgym.results.compare import check_claims, compare, report_section, run_cells
from dpgym.results.leaderboard import ARROWS, GROUP, UNDER_SPENT, Leaderboard, metric_info, rank_groups
from dpgym.results.records import CellRecord
from dpgym.results.references import load_reference
from dpgym.results.render import format_accounted_epsilon, ranking_note
from dpgym.results.store import RunStore
from dpgym.specs import Direction

if TYPE_CHECKING:
    from dpgym.engine.pipeline import Run

REPORT_PACKAGES = ("jinja2", "matplotlib", "seaborn", "scikit-posthocs", "scipy", "pandas")


@dataclass
class Cell:
    """One table cell: text, sort key and highlight class."""

    text: str
    sort: float | str
    css: str = ""
    note: str = ""
    rank: str = ""


def notices(lb: Leaderboard, results: list[CellRecord]) -> list[str]:
    """What a reader must know before comparing rows, shown above the leaderboard: rows that spent
    less than their budget, and cells whose guarantee the harness lowered to nominal, with why."""
    out = []
    short = lb.board[lb.board.under_spent]
    if len(short):
        composition = {(r.cell.method, r.cell.dataset, r.cell.epsilon): r.privacy.composition if r.privacy else None
                       for r in results}

        def how(row: Any) -> str:
            calibrated = composition.get((row.generator, row.dataset, float(row.epsilon)))
            return f"noise calibrated with {calibrated}, " if calibrated and calibrated != "basic" else ""

        rows = "; ".join(f"{r.generator} on {r.dataset} at ε = {eps(r.epsilon)} ({how(r)}claims "
                         f"{format_accounted_epsilon(r.claimed_epsilon_max)}, spends {format_accounted_epsilon(r.eps_spent)})" for r in short.itertuples())
        out.append(f"{len(short)} row(s) spent less than {UNDER_SPENT:.0%} of their ε, so they were not compared at the "
                   f"budget they are listed under: {rows}.")
    if lb.scored:
        out.append(lb.scored_note())
    lowered: dict[str, set[str]] = {}
    for r in results:
        if r.method.guarantee_reason and r.cell.method not in lb.scored:
            lowered.setdefault(r.method.guarantee_reason, set()).add(f"{r.cell.method} on {r.cell.dataset}")
    for reason, where in sorted(lowered.items()):
        out.append(f"Nominal, not formal: {', '.join(sorted(where))}. {reason[0].upper()}{reason[1:]}.")
    return out


def overview_tables(lb: Leaderboard, families: dict[str, str]) -> list[dict[str, Any]]:
    """Per dataset: header and rows, the best of every column (per ε) marked."""
    board, metrics = lb.board, ordered_metrics(lb.metrics, families)
    tables = []
    for dataset, part in board.groupby("dataset", sort=True):
        header = ["generator", "guarantee", "ε", "ε spent", "seeds", "failures"]
        header += [f"{m}\u00a0{ARROWS.get(lb.directions.get(m), '(direction undeclared)')}" for m in metrics]
        header += ["fit s", "sample s", "peak MB", "audit", "privacy check"]
        rows = []
        previous_epsilon = None
        for _, row in part.sort_values(["epsilon", "generator"]).iterrows():
            same = part[part.epsilon == row.epsilon]
            cells = [Cell(row.generator, row.generator), Cell(row.guarantee, row.guarantee, f"g-{row.guarantee}"),
                     Cell(eps(row.epsilon), row.epsilon if math.isfinite(row.epsilon) else 1e300),
                     Cell(format_accounted_epsilon(row.eps_spent) + (" under-spent" if row.under_spent else ""),
                          row.eps_spent if math.isfinite(row.eps_spent) else 1e300, "bad" if row.under_spent else ""),
                     Cell(str(row.n_seeds), row.n_seeds),
                     Cell(str(row.failures), row.failures, "bad" if row.failures else "", row.error)]
            for m in metrics:
                mean, low, high, rank = row[f"{m}_mean"], row[f"{m}_ci_low"], row[f"{m}_ci_high"], row[f"{m}_rank"]
                higher = lb.directions.get(m) is Direction.HIGHER
                means = same[f"{m}_mean"].dropna()
                top = (m in lb.directions and math.isfinite(mean) and len(means) > 1
                       and mean == (means.max() if higher else means.min()))
                css = " ".join(c for c in ("best" if rank == 1 and len(means) > 1 else "", "top" if top else "") if c)
                note = "fewer than two seeds' values: no CI" if math.isnan(low) else f"[{num(low)}, {num(high)}]"
                cells.append(Cell(num(mean), mean if math.isfinite(mean) else -1e300, css + " metric", note,
                                  f"{rank:g}" if math.isfinite(rank) else ""))
            for column, digits in (("fit_seconds_mean", 2), ("sample_seconds_mean", 2), ("peak_rss_mb_max", 0)):
                value = row[column]
                best = math.isfinite(value) and value == same[column].min() and len(same) > 1
                cells.append(Cell(num(value, digits) if digits else (f"{value:.0f}" if math.isfinite(value) else "—"),
                                  value if math.isfinite(value) else 1e300, "best" if best else ""))
            cells.append(Cell(row.audit_verdict or "—", row.audit_verdict or "", "text"))
            cells.append(Cell(row.privacy_check or "—", row.privacy_check or "", "text bad" if row.privacy_check else "text"))
            rows.append({"cells": cells, "failed": bool(row.failures),
                         "group_start": previous_epsilon is not None and row.epsilon != previous_epsilon})
            previous_epsilon = row.epsilon
        tables.append({"dataset": dataset, "header": header, "rows": rows})
    return tables


def _ledger_rows(store: RunStore, results: list[CellRecord]) -> list[dict[str, Any]]:
    rows = []
    for r in sorted(results, key=lambda r: (r.cell.dataset, r.cell.method, r.cell.epsilon, r.cell.seed)):
        ledger = store.ledger_file(r.key)
        re = (ledger or {}).get("reaccounted") or {}
        entries = Ledger.from_dict(ledger, str(store.ledger_path(r.key))).entries if ledger else []
        rows.append({
            "cell": r.cell, "status": str(r.status), "guarantee": r.method.guarantee, "epsilon": eps(r.cell.epsilon),
            "ledger": ledger,
            "entries": [{"mechanism": e.type, "epsilon": e.epsilon, "delta": e.delta, "description": e.description,
                         "params_text": ", ".join(f"{k}={sig(v)}" for k, v in
                                                  {**e.event.parameters(), "adjacency": str(e.event.adjacency),
                                                   **e.details}.items())}
                        for e in entries],
            "claimed": (f"ε={sig(ledger['epsilon'])}, δ={sig(ledger['delta'])}" if ledger else "—"),
            "reaccounted": (f"ε={sig(re.get('epsilon'))}" if re else "—"),
            "verdict": re.get("verdict", ""), "accountant": re.get("accountant", ""), "detail": re.get("detail", ""),
        })
    return rows


def _audit_statement(learner: str, rows: pd.DataFrame, cells: pd.DataFrame) -> str:
    """One learner's audit over ε in words: where its AUC is impossible for a true ε-DP learner (with
    how many of its seeds the audit refuted there, when seeds are judged one by one)."""
    at = {v: ", ".join(eps(e) for e in sorted(rows[rows.audit_verdict == v].epsilon)) for v in ("consistent", "vacuous")}
    refuted = cells[cells.audit_verdict == "implausible"].groupby("epsilon").size()
    seeds = cells[cells.status == "ok"].groupby("epsilon").size()
    at["implausible"] = ", ".join(eps(e) + (f" ({refuted[e]} of {seeds[e]} seeds)" if e in refuted else "")
                                  for e in sorted(rows[rows.audit_verdict == "implausible"].epsilon))
    failed = ", ".join(eps(e) for e in sorted(rows[rows.n_seeds == 0].epsilon))
    parts = []
    if at["implausible"]:
        parts.append(f"at ε = {at['implausible']} its AUC is implausible for a true ε-DP learner: the claimed ε "
                     "cannot explain it")
    if at["consistent"]:
        parts.append(f"consistent with its claimed ε at ε = {at['consistent']}")
    if at["vacuous"]:
        parts.append(f"at ε = {at['vacuous']} the audit ran but its bound is vacuous (nothing this learner reached "
                     "is rare enough under permuted labels or random directions to test)")
    if failed:
        parts.append(f"no model at ε = {failed} (every seed failed: see Failures)")
    untested = sorted(set(rows.epsilon) - set(rows[rows.audit_verdict.isin(["implausible", "consistent", "vacuous"])
                                                   | (rows.n_seeds == 0)].epsilon))
    if untested:
        parts.append(f"not audited at ε = {', '.join(eps(e) for e in untested)} (ε·n too large for any bound)")
    return f"{learner} ({rows.guarantee.iloc[0]}): " + "; ".join(parts) + "."


def learning_sections(lb: Leaderboard, palette: dict[str, Any]) -> list[dict[str, Any]]:
    """Per dataset with private learners: AUC versus ε, a learner × ε table, and the audit's result
    stated in words: at which ε each learner's AUC is impossible for a true ε-DP learner."""
    sections = []
    learner_cells = lb.cells[lb.cells.task == "private_learning"]
    for dataset, cells in learner_cells.groupby("dataset", sort=True):
        rows = lb.board[lb.board.dataset == dataset]
        nonprivate = set(cells[cells.plugin == "nonprivate_lr"].generator)
        private = rows[rows.generator.isin(set(cells.generator) - nonprivate)]
        baseline = rows[rows.generator.isin(nonprivate)].auc_median.max()  # the paper's: best of BCE and ℓ2
        draws: dict[str, dict[float, list[float]]] = {}
        ok = cells[(cells.status == "ok") & ~cells.generator.isin(nonprivate)]
        for (learner, epsilon), part in ok.groupby(["generator", "epsilon"]):
            if part.auc_draws.dropna().map(len).max() > 1:  # releases a draw from a distribution (ExpM+NF)
                draws.setdefault(learner, {})[epsilon] = [a for d in part.auc_draws.dropna() for a in d]
        epsilons = sorted(private.epsilon.unique())
        table = []
        for learner, part in private.groupby("generator", sort=True):
            by_eps = part.set_index("epsilon")
            table.append({"learner": learner, "guarantee": part.guarantee.iloc[0],
                          "cells": [by_eps.loc[e].to_dict() if e in by_eps.index else None for e in epsilons]})
        statements = [_audit_statement(learner, part, cells[cells.generator == learner])
                      for learner, part in private.groupby("generator", sort=True)]
        sections.append({"dataset": dataset, "epsilons": [eps(e) for e in epsilons], "table": table,
                         "statements": statements, "nonprivate": baseline,
                         "figure": figures.learner_auc(private, draws, baseline, palette)})
    return sections


def _audit_roc(store: RunStore, audit: dict[str, Any], colour: Any) -> str:
    """The ROC of an audit's chosen attack on the fits that certified it (`figures.audit_roc`)."""
    attack = audit["attacks"][audit["attack"]]
    certifying = np.array(audit["roc"]["certifying"], dtype=bool)
    scores = attack["orientation"] * np.array(attack["scores"], dtype=float)[certifying]
    labels = np.array(audit["roc"]["labels"], dtype=bool)[certifying]
    point = (attack["false_positives"] / max(attack["negatives"], 1),
             1 - attack["false_negatives"] / max(attack["positives"], 1))
    epsilon, delta = audit["epsilon_claimed"], audit["delta"]
    title = f"{audit['generator']}, ε = {epsilon:g}: {audit['attack']}"
    mu = (audit.get("gdp") or {}).get("mu")
    return drawn_once(store, "audit-roc", [scores, labels, point, epsilon, delta, colour, title, mu],
                       lambda: figures.audit_roc(scores, labels, point, epsilon, delta, colour, title, mu))


def audit_context(store: RunStore, lb: Leaderboard, palette: dict[str, Any]) -> dict[str, Any] | None:
    """The empirical audits `dpgym audit` stored in the run directory, per dataset: each audited row's claimed
    and spent ε beside the audit's lower bound, and its chosen attack's ROC; None without audits."""
    if "eps_lower" not in lb.board:
        return None
    spent = {tuple(key): value for *key, value in lb.board[[*GROUP, "eps_spent"]].itertuples(index=False)}
    datasets: dict[str, list[dict[str, Any]]] = {}
    for key, audit in sorted(lb.audits.items(), key=lambda item: (item[0][1], item[0][2], item[0][0])):
        generator, dataset, epsilon, _ = key
        finished = audit["status"] == "ok"
        datasets.setdefault(dataset, []).append({
            "generator": generator, "epsilon": epsilon, "eps_spent": spent[key], "audit": audit,
            "figure": _audit_roc(store, audit, palette[generator]) if finished else None})
    return {"datasets": [{"dataset": d, "rows": rows} for d, rows in datasets.items()],
            "unmatched": [f"{a['generator']} × {a['dataset']} × ε = {eps(a['epsilon_claimed'])}"
                          for a in lb.unmatched_audits]}


def ranking_context(lb: Leaderboard, palette: dict[str, Any]) -> dict[str, Any]:
    ranking = lb.ranking
    context: dict[str, Any] = {"statement": ranking.statement, "generators": ranking.generators,
                               "groups": rank_groups(ranking.generators), "figure": None, "blocks": ranking.blocks,
                               "excluded": ranking.excluded, "flagged": ranking.flagged, "note": ranking_note(lb),
                               "block_definition": ranking.block_definition, "partial": ranking.partial,
                               "by_dataset": None}
    if lb.by_dataset.shape[1] > 1:
        context["by_dataset"] = figures.ranks_by_dataset(lb.by_dataset)
    if ranking.posthoc:
        mean_ranks = pd.Series({e["generator"]: e["mean_rank"] for e in ranking.generators})
        pvalues = pd.DataFrame(ranking.posthoc["pvalues"]).loc[mean_ranks.index, mean_ranks.index]
        if ranking.friedman["pvalue"] >= ranking.alpha:
            pvalues[:] = 1.0  # the omnibus test found nothing: no pair may be drawn as different
        context["figure"] = figures.critical_difference(mean_ranks, pvalues, ranking.alpha, palette)
    return context


def provenance(manifest: dict[str, Any], results: list[CellRecord]) -> dict[str, Any]:
    datasets = {(r.dataset.name, r.dataset.version, r.dataset.checksum) for r in results}
    generators = {(r.method.label or r.method.name, r.method.name, r.method.version, r.method.package,
                   json.dumps(r.method.params, sort_keys=True)) for r in results}
    report_packages = {}
    for name in REPORT_PACKAGES:
        try:
            report_packages[name] = version(name)
        except PackageNotFoundError:
            continue
    return {
        "manifest": manifest,
        "suite_json": json.dumps(manifest.get("suite", {}), indent=2, default=str),
        "datasets": sorted(datasets),
        "generators": sorted(generators),
        "report_packages": report_packages,
        "devices": sorted({r.device for r in results}),
    }


def render(context: dict[str, Any]) -> str:
    env = jinja2.Environment(loader=jinja2.PackageLoader("dpgym.report", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = num
    env.filters["spent"] = format_accounted_epsilon
    env.filters["eps"] = eps
    env.filters["sig"] = sig
    # Let long metric names wrap after their underscores, so the table fits the page.
    env.filters["breakable"] = lambda text: markupsafe.Markup("_<wbr>").join(
        markupsafe.escape(part) for part in str(text).split("_"))
    return env.get_template("report.html.j2").render(**context)


def metric_descriptions(registry: Registry, families: set[str]) -> list[dict[str, str]]:
    """What each metric plugin among `families` measures, in its own words (the privacy metric's
    say that they are empirical risk indicators, not guarantees)."""
    return [{"name": name, "description": provided.spec.description}
            for name, provided in sorted(registry.kinds["metric"].items())
            if name in families and provided.spec.description]


def paper_comparisons(run: Run, directions: dict[str, Direction]) -> list[dict[str, Any]]:
    """The published figures of the references the run's suite names, beside the run's cells (`dpgym
    compare`'s tables), so that the report shows them without a separate command."""
    if not run.suite.references:
        return []
    cells = run_cells(run.results(), directions)
    return [report_section(run.store, reference, compare(reference, cells, directions),
                           check_claims(reference, cells, directions))
            for reference in map(load_reference, run.suite.references)]


def write_report(run: Run, out: Path | None = None) -> Path:
    """Write the run's report (DIR/report.html, or `out`) from its leaderboard, built once and shared
    with whatever showed it before, and return its path."""
    started = time.perf_counter()
    store, registry = run.store, run.registry
    directions, families = metric_info(registry)
    lb, results = run.leaderboard(), run.results()
    palette = figures.generator_palette(lb.board.generator.unique())
    failures = [r for r in results if not r.ok]
    context = {
        "suite_name": run.suite.name,
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "counts": {s: sum(r.status == s for r in results) for s in sorted({str(r.status) for r in results})},
        "n_cells": len(results),
        "notices": notices(lb, results),
        "overview": overview_tables(lb, families),
        "dataset_values": lb.dataset_values.to_dict(orient="records"),
        "metrics": [{"name": m, "direction": str(lb.directions.get(m, "undeclared"))}
                    for m in ordered_metrics(lb.metrics, families)],
        "metric_families": metric_descriptions(registry, {families.get(m) for m in lb.metrics}),
        "ranking": ranking_context(lb, palette),
        "comparisons": paper_comparisons(run, directions),
        "datasets": dataset_sections(store, lb, results, registry, palette),
        "learning": learning_sections(lb, palette),
        "audit": audit_context(store, lb, palette),
        "ledger": _ledger_rows(store, results),
        "failures": sorted(failures, key=lambda r: (r.cell.dataset, r.cell.method, r.cell.seed)),
        "charged": lb.failures().to_dict(orient="records"),
        "time_limit": lb.time_limit,
        "provenance": provenance(run.manifest or {}, results),
    }
    path = Path(out) if out else store.report_path
    context["marginals_file"] = _write_marginal_shares(context["datasets"], path.with_name(f"{path.stem}-marginals.csv"))
    context["build_seconds"] = time.perf_counter() - started
    path.write_text(render(context))
    return path


def _write_marginal_shares(sections: list[dict[str, Any]], path: Path) -> str:
    """Write the data of every marginal figure as one tidy table beside the report, for re-plotting
    (e.g. DP-NF's Fig. 11 from a Life Science run); returns its file name, or "" when there is none."""
    tables = [entry.pop("shares").assign(dataset=section["dataset"], generator=entry["generator"])
              for section in sections for entry in section["generators"] if "shares" in entry]
    if not tables:
        return ""
    columns = ["dataset", "generator", "epsilon", "seed", "cell", "column", "bin", "low", "high", "real", "synthetic"]
    pd.concat(tables, ignore_index=True)[columns].to_csv(path, index=False)
    return path.name
