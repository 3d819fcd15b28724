"""The report's section per dataset: the metric-vs-ε curves, the F1 of each target class, and per
generator its marginals and Kendall-τ heatmaps. Figures are drawn once per content and kept beside
the run's cells (`RunStore.figures`), so a report rebuilt with nothing new draws nothing."""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from importlib.metadata import version
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from dpgym.data.cache import digest
from dpgym.data.inference import UnreviewedSchemaWarning
from dpgym.data.splits import load_split
from dpgym.registry import Registry
from dpgym.report import figures
from dpgym.report.formatting import eps
from dpgym.results.leaderboard import Leaderboard, metric_info
from dpgym.results.records import CellRecord
from dpgym.results.store import RunStore, write_json_atomic
from dpgym.engine.threads import cpu_count
from dpgym.engine.worker import die_with_parent
from dpgym.schema import Schema

REFERENCE_EPSILON = 1.0  # per-generator figures show the run's ε closest to this (log scale)
KENDALL_MAX_ROWS = 5_000  # when the fidelity metric did not store its τ matrices, recompute on a sample
FAMILY_TITLES = {"utility": "Utility (train on synthetic, test on real)", "fidelity": "Fidelity to the real rows"}


def ordered_metrics(metrics: list[str], families: dict[str, str]) -> list[str]:
    """Utility first, then fidelity, then anything else: the order a reader asks in."""
    order = {"utility": 0, "fidelity": 1}
    return sorted(metrics, key=lambda m: (order.get(families.get(m, ""), 2), metrics.index(m)))


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


def _curves(store: RunStore, part: pd.DataFrame, lb: Leaderboard, families: dict[str, str],
            palette: dict[str, Any]) -> list[dict]:
    """One metric-vs-ε figure per metric family (utility, then fidelity, then others)."""
    directions = {m: str(lb.directions.get(m, "undeclared")) for m in lb.metrics}
    by_family: dict[str, list[str]] = {}
    for m in ordered_metrics(lb.metrics, families):
        if part[f"{m}_mean"].notna().any():
            by_family.setdefault(families.get(m, "other"), []).append(m)
    curves = []
    for family, metrics in sorted(by_family.items(), key=lambda kv: {"utility": 0, "fidelity": 1}.get(kv[0], 2)):
        uri = _metric_curves(store, part, metrics, {m: directions[m] for m in metrics}, palette)
        if uri:
            curves.append({"title": FAMILY_TITLES.get(family, family), "uri": uri})
    return curves


def _metric_curves(store: RunStore, part: pd.DataFrame, metrics: list[str], directions: dict[str, str],
                   palette: dict[str, Any]) -> str | None:
    """`figures.metric_curves`, drawn once per content: keyed by everything the figure shows."""
    columns = ["generator", "epsilon", *(f"{m}_{s}" for m in metrics for s in ("mean", "ci_low", "ci_high"))]
    shown = part[columns].reset_index(drop=True)
    colours = [palette.get(g) for g in sorted(shown.generator.unique())]
    return drawn_once(store, "curves", [metrics, directions, colours, shown],
                       lambda: figures.metric_curves(part, metrics, directions, palette))


def drawn_once(store: RunStore, name: str, shown: list[Any], draw: Callable[[], str | None]) -> str | None:
    """The figure `draw` returns, drawn once per content: kept with the run's figures, keyed by what it
    shows (`shown`), the drawing code's version and matplotlib's; `name` labels the file."""
    key = digest([FIGURES_VERSION, version("matplotlib"), *shown])
    path = store.figure_path(f"{name}-{key[:24]}.txt")
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


def _figures_stamp(store: RunStore, key: str) -> dict[str, Any]:
    """What a cell's drawn figures depend on. The result by its content, not its file's time: a run
    directory carried to another machine (scripts/checkpoint.py) keeps its figures without its
    synthetic rows."""
    result = store.result_path(key)
    return {"version": FIGURES_VERSION, "matplotlib": version("matplotlib"),
            "result": hashlib.sha256(result.read_bytes()).hexdigest() if result.exists() else None}


def _stored_figures(store: RunStore, key: str) -> dict[str, Any] | None:
    """A cell's figures drawn before, if still current."""
    path = store.figure_path(f"{key}.json")
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if stored.get("stamp") != _figures_stamp(store, key):
        return None
    entry = stored["entry"]
    if "shares" in entry:
        entry["shares"] = pd.DataFrame(**entry["shares"])
    return entry


def _store_figures(store: RunStore, key: str, entry: dict[str, Any]) -> None:
    saved = {k: (v.to_dict(orient="split", index=False) if isinstance(v, pd.DataFrame) else v) for k, v in entry.items()}
    store.figures.mkdir(exist_ok=True)
    write_json_atomic(store.figure_path(f"{key}.json"), {"stamp": _figures_stamp(store, key), "entry": saved})


def _generator_figures(store: RunStore, mine: pd.DataFrame, reference: float, real: RealRows,
                       fidelity: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Marginals and Kendall-τ heatmaps of one generator's cell at the reference ε (lowest finished seed);
    `fidelity`: each cell's fidelity detail, whose τ matrices are reused when it stored them."""
    entry: dict[str, Any] = {"generator": mine.generator.iloc[0], "message": "", "cell": ""}
    chosen = _drawn_cell(mine, reference)
    if chosen is None:
        first = mine.iloc[0]
        entry["message"] = f"No synthetic data: every cell {first.status}. {first.error}"
        return entry
    entry["cell"] = f"ε = {eps(chosen.epsilon)}, seed {chosen.seed}"
    try:
        synthetic = store.synthetic(chosen.key)
    except (OSError, ValueError) as err:  # deleted or damaged since the run: the other figures still draw
        entry["message"] = f"No figures: this cell's synthetic rows are unreadable ({type(err).__name__}: {err})"
        return entry
    shares = figures.marginal_shares(real.train, synthetic, real.schema)
    entry["marginals"] = figures.marginals(shares, real.schema)
    entry["shares"] = shares.assign(epsilon=chosen.epsilon, seed=chosen.seed, cell=chosen.key)
    detail = fidelity.get(chosen.key, {})
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
    _store_figures(store, chosen.key, entry)
    return entry


def class_f1_table(results: list[CellRecord]) -> dict[str, Any] | None:
    """Per generator and ε, the utility metric's F1 of each target class (one dataset's results),
    averaged over the finished seeds: macro-F1 is a row's mean, so a class a generator's rows lose,
    which the averaged score hides, shows as a 0. None unless the target has more than two classes."""
    cells, scores = [], []
    for result in results:
        per_class = (result.metric_detail or {}).get("utility", {}).get("f1_per_class")
        if result.ok and per_class:
            cells.append((result.cell.epsilon, result.cell.method))
            scores.append(per_class)
    classes = list(scores[0]) if scores else []
    if len(classes) < 3:
        return None
    # Classes are the only columns, and the cell's identity the index: a class may be named "generator".
    f1 = pd.DataFrame(scores, columns=classes, index=pd.MultiIndex.from_tuples(cells, names=["epsilon", "generator"]))
    grouped = f1.groupby(level=["epsilon", "generator"], sort=True)
    means, seeds = grouped.mean(), grouped.size()
    return {"classes": classes,
            "rows": [{"epsilon": eps(epsilon), "generator": generator, "seeds": int(seeds[(epsilon, generator)]),
                      "values": [float(v) for v in means.loc[(epsilon, generator)]]}
                     for epsilon, generator in means.index]}


def dataset_sections(store: RunStore, lb: Leaderboard, results: list[CellRecord], registry: Registry,
                     palette: dict[str, Any]) -> list[dict[str, Any]]:
    """Per dataset: the metric-vs-ε curves and the F1 of each target class, then per generator its
    marginals and Kendall-τ heatmaps."""
    sections, jobs, real_rows = [], [], {}
    families = metric_info(registry)[1]
    for dataset, part in lb.board.groupby("dataset", sort=True):
        cells = lb.cells[lb.cells.dataset == dataset]
        reference = _reference_epsilon(sorted(cells.epsilon.unique()))
        learners = cells.task == "private_learning"
        section: dict[str, Any] = {"dataset": dataset, "curves": _curves(store, part, lb, families, palette),
                                   "generators": [], "note": "", "reference_epsilon": eps(reference),
                                   "learners": sorted(cells[learners].generator.unique())}
        section["class_f1"] = class_f1_table([r for r in results if r.cell.dataset == dataset])
        cells = cells[~learners]  # a learner releases a model, not rows: nothing to draw marginals of
        if cells.empty:
            sections.append(section)
            continue
        to_draw = []
        for generator, mine in cells.groupby("generator", sort=True):
            chosen = _drawn_cell(mine, reference)
            stored = _stored_figures(store, chosen.key) if chosen is not None else None
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
                real_rows[dataset] = RealRows(load_split(spec.load).train, spec.schema())
        except Exception as err:  # a dataset plugin's fault costs its figures, not the report
            section["note"] = f"Real rows unavailable, so no marginal or Kendall-τ figures: {type(err).__name__}: {err}"
        else:
            fidelity = {r.key: (r.metric_detail or {}).get("fidelity", {}) for r in results
                        if r.cell.dataset == dataset and r.ok}
            jobs += [(len(sections), (store, dataset, mine, reference, fidelity)) for mine in to_draw]
        sections.append(section)
    for (i, _), entry in zip(jobs, generator_figures([job for _, job in jobs], real_rows), strict=True):
        sections[i]["generators"].append(entry)
    for section in sections:
        section["generators"].sort(key=lambda entry: entry["generator"])
    return sections


_INHERITED: dict[str, RealRows] = {}  # real rows the forked figure workers inherit, not receive pickled


FiguresJob = tuple[RunStore, str, pd.DataFrame, float, dict[str, dict[str, Any]]]


def _figures_job(job: FiguresJob) -> dict[str, Any]:
    store, dataset, mine, reference, fidelity = job
    return _generator_figures(store, mine, reference, _INHERITED[dataset], fidelity)


def generator_figures(jobs: list[FiguresJob], real_rows: dict[str, RealRows]) -> list[dict[str, Any]]:
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
