"""Gather a run directory into one self-contained HTML file: leaderboard, figures, ledgers, provenance.

Everything the page shows is read from the run directory (result.json, ledger.json,
synthetic.parquet, run.json, and the audit.json of any empirical audit written into it) and the
leaderboard computed from it; the only other input is the
dataset plugins, for the real training rows the marginal and Kendall-τ figures compare against.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from itertools import combinations
from pathlib import Path
from typing import Any

import jinja2
import markupsafe
import numpy as np
import pandas as pd

from dpgym import learning
from dpgym.cache import digest
from dpgym.compare import check_claims, compare, report_section, run_cells
from dpgym.threads import cpu_count
from dpgym.inference import UnreviewedSchemaWarning
from dpgym.leaderboard import (ARROWS, GROUP, UNDER_SPENT, Leaderboard, build_leaderboard, format_accounted_epsilon,
                               rank_groups)
from dpgym.references import load_reference
from dpgym.registry import Registry
from dpgym.report import figures
from dpgym.schema import Schema
from dpgym.privacy.ledger import Ledger
from dpgym.specs import Direction
from dpgym.store import RunStore, write_json_atomic
from dpgym.worker import die_with_parent

REFERENCE_EPSILON = 1.0  # per-generator figures show the run's ε closest to this (log scale)
KENDALL_MAX_ROWS = 5_000  # when the fidelity metric did not store its τ matrices, recompute on a sample
REPORT_PACKAGES = ("jinja2", "matplotlib", "seaborn", "scikit-posthocs", "scipy", "pandas")
FAMILY_TITLES = {"utility": "Utility (train on synthetic, test on real)", "fidelity": "Fidelity to the real rows"}


def generator_independent_values(registry: Registry) -> frozenset[str]:
    """The values of metrics that do not depend on the generator: the leaderboard shows them once per
    dataset."""
    return frozenset(name for provided in registry.kinds["metric"].values()
                     if not provided.spec.depends_on_generator for name in provided.spec.directions)


def metric_info(registry: Registry) -> tuple[dict[str, Direction], dict[str, str]]:
    """Each metric value's direction and the metric plugin (family) that produces it; the values of
    private-learning cells come from the harness (`dpgym.learning`)."""
    directions: dict[str, Direction] = dict(learning.DIRECTIONS)
    families = dict.fromkeys(learning.DIRECTIONS, "private learning")
    for provided in registry.kinds["metric"].values():
        for name, direction in provided.spec.directions.items():
            directions[name], families[name] = direction, provided.spec.name
    return directions, families


def _num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) >= 1000 else f"{value:.{digits}f}"
    return str(value)


def _sig(value: Any) -> str:
    """Four significant digits for ledger numbers (ε, δ, σ, sensitivities span many magnitudes)."""
    if isinstance(value, str) and value in ("inf", "Infinity"):
        return "∞"
    return f"{value:.4g}".replace("inf", "∞") if isinstance(value, float | int) and not isinstance(value, bool) \
        else str(value)


def _eps(value: float) -> str:
    return "∞" if value == math.inf else f"{value:g}"


@dataclass
class Cell:
    """One table cell: text, sort key and highlight class."""

    text: str
    sort: float | str
    css: str = ""
    note: str = ""
    rank: str = ""


def ordered_metrics(metrics: list[str], families: dict[str, str]) -> list[str]:
    """Utility first, then fidelity, then anything else: the order a reader asks in."""
    order = {"utility": 0, "fidelity": 1}
    return sorted(metrics, key=lambda m: (order.get(families.get(m, ""), 2), metrics.index(m)))


def notices(lb: Leaderboard, results: list[dict[str, Any]]) -> list[str]:
    """What a reader must know before comparing rows, shown above the leaderboard: rows that spent
    less than their budget, and cells whose guarantee the harness lowered to nominal, with why."""
    out = []
    short = lb.board[lb.board.under_spent]
    if len(short):
        composition = {(r["cell"]["method"], r["cell"]["dataset"], float(r["cell"]["epsilon"])):
                       r.get("privacy", {}).get("composition") for r in results}

        def how(row: Any) -> str:
            calibrated = composition.get((row.generator, row.dataset, float(row.epsilon)))
            return f"noise calibrated with {calibrated}, " if calibrated and calibrated != "basic" else ""

        rows = "; ".join(f"{r.generator} on {r.dataset} at ε = {_eps(r.epsilon)} ({how(r)}claims "
                         f"{format_accounted_epsilon(r.claimed_epsilon_max)}, spends {format_accounted_epsilon(r.eps_spent)})" for r in short.itertuples())
        out.append(f"{len(short)} row(s) spent less than {UNDER_SPENT:.0%} of their ε, so they were not compared at the "
                   f"budget they are listed under: {rows}.")
    lowered: dict[str, set[str]] = {}
    for r in results:
        if r["method"].get("guarantee_reason"):
            lowered.setdefault(r["method"]["guarantee_reason"], set()).add(f"{r['cell']['method']} on {r['cell']['dataset']}")
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
        header += ["fit s", "sample s", "peak MB", "audit"]
        rows = []
        previous_epsilon = None
        for _, row in part.sort_values(["epsilon", "generator"]).iterrows():
            same = part[part.epsilon == row.epsilon]
            cells = [Cell(row.generator, row.generator), Cell(row.guarantee, row.guarantee, f"g-{row.guarantee}"),
                     Cell(_eps(row.epsilon), row.epsilon if math.isfinite(row.epsilon) else 1e300),
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
                note = "fewer than two seeds' values: no CI" if math.isnan(low) else f"[{_num(low)}, {_num(high)}]"
                cells.append(Cell(_num(mean), mean if math.isfinite(mean) else -1e300, css + " metric", note,
                                  f"{rank:g}" if math.isfinite(rank) else ""))
            for column, digits in (("fit_seconds_mean", 2), ("sample_seconds_mean", 2), ("peak_rss_mb_max", 0)):
                value = row[column]
                best = math.isfinite(value) and value == same[column].min() and len(same) > 1
                cells.append(Cell(_num(value, digits) if digits else (f"{value:.0f}" if math.isfinite(value) else "—"),
                                  value if math.isfinite(value) else 1e300, "best" if best else ""))
            cells.append(Cell(row.audit_verdict or "—", row.audit_verdict or "", "text"))
            rows.append({"cells": cells, "failed": bool(row.failures),
                         "group_start": previous_epsilon is not None and row.epsilon != previous_epsilon})
            previous_epsilon = row.epsilon
        tables.append({"dataset": dataset, "header": header, "rows": rows})
    return tables


def _ledger_rows(run_dir: Path, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in sorted(results, key=lambda r: (r["cell"]["dataset"], r["cell"]["method"],
                                           float(r["cell"]["epsilon"]), r["cell"]["seed"])):
        path = run_dir / "cells" / r["cell"]["key"] / "ledger.json"
        ledger = json.loads(path.read_text()) if path.exists() else None
        re = (ledger or {}).get("reaccounted") or {}
        entries = Ledger.from_dict(ledger, str(path)).entries if ledger else []
        rows.append({
            "cell": r["cell"], "status": r["status"], "guarantee": r["method"]["guarantee"],
            "epsilon": _eps(float(r["cell"]["epsilon"])),
            "ledger": ledger,
            "entries": [{"mechanism": e.type, "epsilon": e.epsilon, "delta": e.delta, "description": e.description,
                         "params_text": ", ".join(f"{k}={_sig(v)}" for k, v in
                                                  {**e.event.parameters(), "adjacency": str(e.event.adjacency),
                                                   **e.details}.items())}
                        for e in entries],
            "claimed": (f"ε={_sig(ledger['epsilon'])}, δ={_sig(ledger['delta'])}" if ledger else "—"),
            "reaccounted": (f"ε={_sig(re.get('epsilon'))}" if re else "—"),
            "verdict": re.get("verdict", ""), "accountant": re.get("accountant", ""), "detail": re.get("detail", ""),
        })
    return rows


def _codes(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Numeric values or schema category codes, the same encoding the fidelity metric ranks."""
    out = {}
    for col in schema.columns:
        if col.is_numeric:
            out[col.name] = pd.to_numeric(frame[col.name]).astype(float)
        else:
            codes = pd.Categorical(frame[col.name].astype(object), categories=list(col.categories)).codes
            out[col.name] = np.where(codes < 0, np.nan, codes.astype(float))
    return pd.DataFrame(out)


def kendall_matrix(frame: pd.DataFrame, schema: Schema, seed: int) -> pd.DataFrame:
    if len(frame) > KENDALL_MAX_ROWS:
        frame = frame.sample(KENDALL_MAX_ROWS, random_state=seed)
    return _codes(frame, schema).corr(method="kendall").fillna(0.0)


def _matrix_from_pairs(pairs: dict[str, float], names: list[str]) -> pd.DataFrame | None:
    """The fidelity metric's τ values, keyed "a|b" in row-major upper-triangle order, matched to the
    column pairs by that order; None when they do not map one-to-one. A `|` inside column names can
    make two pairs one key (columns `x`, `y|label`, `x|y`, `label`: both give "x|y|label"), and the
    metric's dict then kept only one of them."""
    expected = list(combinations(names, 2))
    if list(pairs) != [f"{a}|{b}" for a, b in expected]:
        return None
    matrix = pd.DataFrame(np.eye(len(names)), index=names, columns=names)
    for (a, b), tau in zip(expected, pairs.values(), strict=True):
        matrix.loc[a, b] = matrix.loc[b, a] = tau
    return matrix


def _reference_epsilon(epsilons: list[float]) -> float:
    finite = [e for e in epsilons if math.isfinite(e) and e > 0]
    if not finite:
        return epsilons[0]
    return min(finite, key=lambda e: (abs(math.log(e / REFERENCE_EPSILON)), -e))


def _curves(run_dir: Path, part: pd.DataFrame, lb: Leaderboard, families: dict[str, str],
            palette: dict[str, Any]) -> list[dict]:
    """One metric-vs-ε figure per metric family (utility, then fidelity, then others)."""
    directions = {m: str(lb.directions.get(m, "undeclared")) for m in lb.metrics}
    by_family: dict[str, list[str]] = {}
    for m in ordered_metrics(lb.metrics, families):
        if part[f"{m}_mean"].notna().any():
            by_family.setdefault(families.get(m, "other"), []).append(m)
    curves = []
    for family, metrics in sorted(by_family.items(), key=lambda kv: {"utility": 0, "fidelity": 1}.get(kv[0], 2)):
        uri = _metric_curves(run_dir, part, metrics, {m: directions[m] for m in metrics}, palette)
        if uri:
            curves.append({"title": FAMILY_TITLES.get(family, family), "uri": uri})
    return curves


def _metric_curves(run_dir: Path, part: pd.DataFrame, metrics: list[str], directions: dict[str, str],
                   palette: dict[str, Any]) -> str | None:
    """`figures.metric_curves`, drawn once per content: keyed by everything the figure shows."""
    columns = ["generator", "epsilon", *(f"{m}_{s}" for m in metrics for s in ("mean", "ci_low", "ci_high"))]
    shown = part[columns].reset_index(drop=True)
    colours = [palette.get(g) for g in sorted(shown.generator.unique())]
    return _drawn_once(run_dir, "curves", [metrics, directions, colours, shown],
                       lambda: figures.metric_curves(part, metrics, directions, palette))


def _drawn_once(run_dir: Path, name: str, shown: list[Any], draw: Callable[[], str | None]) -> str | None:
    """The figure `draw` returns, drawn once per content: kept under DIR/figures/, keyed by what it shows
    (`shown`), the drawing code's version and matplotlib's; `name` labels the file."""
    key = digest([FIGURES_VERSION, version("matplotlib"), *shown])
    path = run_dir / FIGURES_DIR / f"{name}-{key[:24]}.txt"
    if path.exists():
        return path.read_text() or None
    uri = draw()
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(uri or "")
    os.replace(tmp, path)
    return uri


class RealRows:
    """A dataset's real training rows and schema, with its Kendall-τ matrix computed at most once."""

    def __init__(self, train: pd.DataFrame, schema: Schema):
        self.train, self.schema = train, schema
        self._tau: pd.DataFrame | None = None

    def kendall(self) -> pd.DataFrame:
        if self._tau is None:
            self._tau = kendall_matrix(self.train, self.schema, seed=0)
        return self._tau


# Drawn figures are kept beside the run's cells, one file per cell drawn, and reused while the
# cell's result, this drawing code (FIGURES_VERSION: raise it when the figures change) and matplotlib
# stay the same: a report rebuilt with nothing new draws nothing.
FIGURES_DIR = "figures"
FIGURES_VERSION = "2"


def _drawn_cell(mine: pd.DataFrame, reference: float) -> pd.Series | None:
    """The cell whose figures stand for one generator: at the reference ε (else its closest), lowest
    finished seed; None when no cell finished."""
    ok = mine[mine.status == "ok"]
    if ok.empty:
        return None
    at = ok[ok.epsilon == reference]
    if at.empty:  # this generator did not run (or failed) at the reference ε: take its closest
        at = ok[ok.epsilon == _reference_epsilon(sorted(ok.epsilon.unique()))]
    return at.sort_values("seed").iloc[0]


def _figures_stamp(run_dir: Path, key: str) -> dict[str, Any]:
    result = run_dir / "cells" / key / "result.json"
    return {"version": FIGURES_VERSION, "matplotlib": version("matplotlib"),
            "result": result.stat().st_mtime_ns if result.exists() else None}


def _stored_figures(run_dir: Path, key: str) -> dict[str, Any] | None:
    """A cell's figures drawn before, if still current."""
    path = run_dir / FIGURES_DIR / f"{key}.json"
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if stored.get("stamp") != _figures_stamp(run_dir, key):
        return None
    entry = stored["entry"]
    if "shares" in entry:
        entry["shares"] = pd.DataFrame(**entry["shares"])
    return entry


def _store_figures(run_dir: Path, key: str, entry: dict[str, Any]) -> None:
    saved = {k: (v.to_dict(orient="split", index=False) if isinstance(v, pd.DataFrame) else v) for k, v in entry.items()}
    (run_dir / FIGURES_DIR).mkdir(exist_ok=True)
    write_json_atomic(run_dir / FIGURES_DIR / f"{key}.json", {"stamp": _figures_stamp(run_dir, key), "entry": saved})


def _generator_figures(run_dir: Path, mine: pd.DataFrame, reference: float, real: RealRows) -> dict[str, Any]:
    """Marginals and Kendall-τ heatmaps of one generator's cell at the reference ε (lowest finished seed)."""
    entry: dict[str, Any] = {"generator": mine.generator.iloc[0], "message": "", "cell": ""}
    chosen = _drawn_cell(mine, reference)
    if chosen is None:
        first = mine.iloc[0]
        entry["message"] = f"No synthetic data: every cell {first.status}. {first.error}"
        return entry
    folder = run_dir / "cells" / chosen.key
    entry["cell"] = f"ε = {_eps(chosen.epsilon)}, seed {chosen.seed}"
    try:
        synthetic = pd.read_parquet(folder / "synthetic.parquet")
    except (OSError, ValueError) as err:  # deleted or damaged since the run: the other figures still draw
        entry["message"] = f"No figures: this cell's synthetic rows are unreadable ({type(err).__name__}: {err})"
        return entry
    shares = figures.marginal_shares(real.train, synthetic, real.schema)
    entry["marginals"] = figures.marginals(shares, real.schema)
    entry["shares"] = shares.assign(epsilon=chosen.epsilon, seed=chosen.seed, cell=chosen.key)
    detail = json.loads((folder / "result.json").read_text()).get("metric_detail", {}).get("fidelity", {})
    stored = [_matrix_from_pairs(detail[k], real.schema.names) if k in detail else None
              for k in ("kendall_real", "kendall_synthetic")]
    if all(m is not None for m in stored):
        real_tau, synth_tau = stored
        entry["kendall_source"] = "the fidelity metric's τ-b matrices for this cell"
    else:
        real_tau, synth_tau = real.kendall(), kendall_matrix(synthetic, real.schema, seed=0)
        entry["kendall_source"] = f"τ-b recomputed on at most {KENDALL_MAX_ROWS:,} rows of each table"
    entry["kendall"] = figures.kendall_heatmaps(
        [("real", real_tau), ("synthetic", synth_tau), ("synthetic − real", synth_tau - real_tau)])
    _store_figures(run_dir, chosen.key, entry)
    return entry


def class_f1_table(results: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per generator and ε, the utility metric's F1 of each target class (one dataset's results),
    averaged over the finished seeds: macro-F1 is a row's mean, so a class a generator's rows lose,
    which the averaged score hides, shows as a 0. None unless the target has more than two classes."""
    cells, scores = [], []
    for result in results:
        per_class = result.get("metric_detail", {}).get("utility", {}).get("f1_per_class")
        if result["status"] == "ok" and per_class:
            cells.append((float(result["cell"]["epsilon"]), result["cell"]["method"]))
            scores.append(per_class)
    classes = list(scores[0]) if scores else []
    if len(classes) < 3:
        return None
    # Classes are the only columns, and the cell's identity the index: a class may be named "generator".
    f1 = pd.DataFrame(scores, columns=classes, index=pd.MultiIndex.from_tuples(cells, names=["epsilon", "generator"]))
    grouped = f1.groupby(level=["epsilon", "generator"], sort=True)
    means, seeds = grouped.mean(), grouped.size()
    return {"classes": classes,
            "rows": [{"epsilon": _eps(epsilon), "generator": generator, "seeds": int(seeds[(epsilon, generator)]),
                      "values": [float(v) for v in means.loc[(epsilon, generator)]]}
                     for epsilon, generator in means.index]}


def dataset_sections(run_dir: Path, lb: Leaderboard, results: list[dict[str, Any]], registry: Registry,
                     palette: dict[str, Any]) -> list[dict[str, Any]]:
    """Per dataset: the metric-vs-ε curves and the F1 of each target class, then per generator its
    marginals and Kendall-τ heatmaps."""
    sections, jobs, real_rows = [], [], {}
    families = metric_info(registry)[1]
    for dataset, part in lb.board.groupby("dataset", sort=True):
        cells = lb.cells[lb.cells.dataset == dataset]
        reference = _reference_epsilon(sorted(cells.epsilon.unique()))
        learners = cells.task == "private_learning"
        section: dict[str, Any] = {"dataset": dataset, "curves": _curves(run_dir, part, lb, families, palette),
                                   "generators": [], "note": "", "reference_epsilon": _eps(reference),
                                   "learners": sorted(cells[learners].generator.unique())}
        section["class_f1"] = class_f1_table([r for r in results if r["cell"]["dataset"] == dataset])
        cells = cells[~learners]  # a learner releases a model, not rows: nothing to draw marginals of
        if cells.empty:
            sections.append(section)
            continue
        to_draw = []
        for generator, mine in cells.groupby("generator", sort=True):
            chosen = _drawn_cell(mine, reference)
            stored = _stored_figures(run_dir, chosen.key) if chosen is not None else None
            if stored is not None and stored["generator"] == generator:
                section["generators"].append(stored)
            else:
                to_draw.append(mine)
        if not to_draw:  # every figure drawn before: the real rows are not even loaded
            sections.append(section)
            continue
        try:
            spec = registry.dataset(dataset)
            with warnings.catch_warnings():  # an unreviewed schema: said once before the run, and above
                warnings.simplefilter("ignore", UnreviewedSchemaWarning)
                real_rows[dataset] = RealRows(spec.load().train, spec.schema())
        except Exception as err:  # a dataset plugin's fault costs its figures, not the report
            section["note"] = f"Real rows unavailable, so no marginal or Kendall-τ figures: {type(err).__name__}: {err}"
        else:
            jobs += [(len(sections), (run_dir, dataset, mine, reference)) for mine in to_draw]
        sections.append(section)
    for (i, _), entry in zip(jobs, generator_figures([job for _, job in jobs], real_rows), strict=True):
        sections[i]["generators"].append(entry)
    for section in sections:
        section["generators"].sort(key=lambda entry: entry["generator"])
    return sections


_INHERITED: dict[str, RealRows] = {}  # real rows the forked figure workers inherit, not receive pickled


def _figures_job(job: tuple[Path, str, pd.DataFrame, float]) -> dict[str, Any]:
    run_dir, dataset, mine, reference = job
    return _generator_figures(run_dir, mine, reference, _INHERITED[dataset])


def generator_figures(jobs: list[tuple[Path, str, pd.DataFrame, float]], real_rows: dict[str, RealRows]) -> list[dict[str, Any]]:
    """Every generator's figures, drawn on every core: matplotlib draws on one, and these figures
    are most of a report's build time (~4 s per generator and dataset). Workers are forked, so they
    inherit the real rows; where forking is unsafe (no fork, or other threads alive, as a dask
    client leaves behind) the figures are drawn here, one after another. A worker dies with the
    process that forked it: a driver killed while it draws leaves no worker (hundreds of MB) behind."""
    _INHERITED.clear()
    _INHERITED.update(real_rows)
    workers = min(cpu_count(), len(jobs))
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"), initializer=die_with_parent,
                                 initargs=(os.getpid(),)) as pool:
            return list(pool.map(_figures_job, jobs))
    return [_figures_job(job) for job in jobs]


def _audit_statement(learner: str, rows: pd.DataFrame, cells: pd.DataFrame) -> str:
    """One learner's audit over ε in words: where its AUC is impossible for a true ε-DP learner (with
    how many of its seeds the audit refuted there, when seeds are judged one by one)."""
    at = {v: ", ".join(_eps(e) for e in sorted(rows[rows.audit_verdict == v].epsilon)) for v in ("consistent", "vacuous")}
    refuted = cells[cells.audit_verdict == "implausible"].groupby("epsilon").size()
    seeds = cells[cells.status == "ok"].groupby("epsilon").size()
    at["implausible"] = ", ".join(_eps(e) + (f" ({refuted[e]} of {seeds[e]} seeds)" if e in refuted else "")
                                  for e in sorted(rows[rows.audit_verdict == "implausible"].epsilon))
    failed = ", ".join(_eps(e) for e in sorted(rows[rows.n_seeds == 0].epsilon))
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
        parts.append(f"not audited at ε = {', '.join(_eps(e) for e in untested)} (ε·n too large for any bound)")
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
        sections.append({"dataset": dataset, "epsilons": [_eps(e) for e in epsilons], "table": table,
                         "statements": statements, "nonprivate": baseline,
                         "figure": figures.learner_auc(private, draws, baseline, palette)})
    return sections


def _audit_roc(run_dir: Path, audit: dict[str, Any], colour: Any) -> str:
    """The ROC of an audit's chosen attack on the fits that certified it (`figures.audit_roc`)."""
    attack = audit["attacks"][audit["attack"]]
    certifying = np.array(audit["roc"]["certifying"], dtype=bool)
    scores = attack["orientation"] * np.array(attack["scores"], dtype=float)[certifying]
    labels = np.array(audit["roc"]["labels"], dtype=bool)[certifying]
    point = (attack["false_positives"] / max(attack["negatives"], 1),
             1 - attack["false_negatives"] / max(attack["positives"], 1))
    epsilon, delta = audit["epsilon_claimed"], audit["delta"]
    title = f"{audit['generator']}, ε = {epsilon:g}: {audit['attack']}"
    return _drawn_once(run_dir, "audit-roc", [scores, labels, point, epsilon, delta, colour, title],
                       lambda: figures.audit_roc(scores, labels, point, epsilon, delta, colour, title))


def audit_context(run_dir: Path, lb: Leaderboard, palette: dict[str, Any]) -> dict[str, Any] | None:
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
            "figure": _audit_roc(run_dir, audit, palette[generator]) if finished else None})
    return {"datasets": [{"dataset": d, "rows": rows} for d, rows in datasets.items()],
            "unmatched": [f"{a['generator']} × {a['dataset']} × ε = {_eps(a['epsilon_claimed'])}"
                          for a in lb.unmatched_audits]}


def ranking_context(lb: Leaderboard, palette: dict[str, Any]) -> dict[str, Any]:
    ranking = lb.ranking
    context: dict[str, Any] = {"statement": ranking.statement, "generators": ranking.generators,
                               "groups": rank_groups(ranking.generators), "figure": None, "blocks": ranking.blocks,
                               "excluded": ranking.excluded}
    if ranking.posthoc:
        mean_ranks = pd.Series({e["generator"]: e["mean_rank"] for e in ranking.generators})
        pvalues = pd.DataFrame(ranking.posthoc["pvalues"]).loc[mean_ranks.index, mean_ranks.index]
        if ranking.friedman["pvalue"] >= ranking.alpha:
            pvalues[:] = 1.0  # the omnibus test found nothing: no pair may be drawn as different
        context["figure"] = figures.critical_difference(mean_ranks, pvalues, ranking.alpha, palette)
    return context


def provenance(run_dir: Path, results: list[dict[str, Any]]) -> dict[str, Any]:
    manifest = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
    datasets = {(r["dataset"]["name"], r["dataset"].get("version", ""), r["dataset"].get("checksum", ""))
                for r in results if "dataset" in r}
    generators = {(r["method"]["label"] if r["method"].get("label") else r["method"]["name"],
                   r["method"]["name"], r["method"].get("version", ""), r["method"].get("package", ""),
                   json.dumps(r["method"].get("params", {}), sort_keys=True)) for r in results}
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
        "devices": sorted({r.get("device", "") for r in results}),
    }


def render(context: dict[str, Any]) -> str:
    env = jinja2.Environment(loader=jinja2.PackageLoader("dpgym.report", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _num
    env.filters["spent"] = format_accounted_epsilon
    env.filters["eps"] = _eps
    env.filters["sig"] = _sig
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


def paper_comparisons(run_dir: Path, references: list[str], directions: dict[str, Direction],
                      keys: set[str] | None) -> list[dict[str, Any]]:
    """The published figures of the references the run's suite names, beside the run's cells (`dpgym
    compare`'s tables), so that the report shows them without a separate command."""
    if not references:
        return []
    cells = run_cells(run_dir, directions, keys)
    return [report_section(reference, compare(reference, cells, directions), check_claims(reference, cells, directions))
            for reference in map(load_reference, references)]


def write_report(run_dir: Path, registry: Registry, out: Path | None = None, keys: set[str] | None = None) -> Path:
    """Write DIR/report.html (or `out`) of the cells in `keys` (default: all) and return its path."""
    started = time.perf_counter()
    run_dir = Path(run_dir)
    directions, families = metric_info(registry)
    lb = build_leaderboard(run_dir, directions, keys, generator_independent_values(registry))
    results = RunStore(run_dir).results(keys)
    suite = RunStore(run_dir).manifest().get("suite", {})
    palette = figures.generator_palette(lb.board.generator.unique())
    failures = [r for r in results if r["status"] != "ok"]
    context = {
        "suite_name": suite.get("name", run_dir.name),
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "counts": {s: sum(r["status"] == s for r in results) for s in sorted({r["status"] for r in results})},
        "n_cells": len(results),
        "notices": notices(lb, results),
        "overview": overview_tables(lb, families),
        "dataset_values": lb.dataset_values.to_dict(orient="records"),
        "metrics": [{"name": m, "direction": str(lb.directions.get(m, "undeclared"))}
                    for m in ordered_metrics(lb.metrics, families)],
        "metric_families": metric_descriptions(registry, {families.get(m) for m in lb.metrics}),
        "ranking": ranking_context(lb, palette),
        "comparisons": paper_comparisons(run_dir, suite.get("references", []), directions, keys),
        "datasets": dataset_sections(run_dir, lb, results, registry, palette),
        "learning": learning_sections(lb, palette),
        "audit": audit_context(run_dir, lb, palette),
        "ledger": _ledger_rows(run_dir, results),
        "failures": sorted(failures, key=lambda r: (r["cell"]["dataset"], r["cell"]["method"], r["cell"]["seed"])),
        "charged": lb.failures().to_dict(orient="records"),
        "time_limit": lb.time_limit,
        "provenance": provenance(run_dir, results),
    }
    path = Path(out) if out else run_dir / "report.html"
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
