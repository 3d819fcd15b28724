"""Synthetic rows made elsewhere, scored as a cell's are: `dpgym score` and `dpgym.score`.

The rows (a CSV or Parquet file) are checked against the dataset's public schema before anything is
written, then scored by the metrics a cell runs (`dpgym.engine.cell.evaluate`) against the dataset's
real split, with the run's metric options and the evaluation stream of the seed they are scored
under, so rows a cell made score exactly as the cell did. They are stored in the run directory as a
cell of their own (method kind `SCORED`, listed in DIR/scored.json) beside the run's generators.

Nothing accounts for their privacy: there is no ledger, the guarantee is `nominal` when an ε is stated
and `none` otherwise, and the leaderboard shows the row without ranking it.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pandas as pd

import dpgym
from dpgym.data.datafiles import sha256_of
from dpgym.data.inference import read_table
from dpgym.data.splits import load_split
from dpgym.engine.cell import CellFailure, evaluate
from dpgym.engine.grid import Cell, cell_key, default_metrics, seed_streams
from dpgym.engine.pipeline import Run
from dpgym.engine.preflight import InputError
from dpgym.engine.suite import MethodConfig
from dpgym.privacy.budget import Guarantee
from dpgym.registry import Registry
from dpgym.results.records import SCORED, CellRecord, DatasetRecord, MethodRecord, Status
from dpgym.results.store import RunStore
from dpgym.specs import MetricContext

DELIMITERS = {";": "semicolons", "\t": "tabs", "|": "vertical bars"}


class _NoCapabilities:
    """What scored rows declare to `default_metrics`: nothing (no log-likelihood, no learned model)."""

    capabilities: frozenset[Any] = frozenset()


def read_rows(path: Path, schema: Any) -> pd.DataFrame:
    """The file's rows in schema form, or one `InputError`/`SchemaError` naming what is wrong: an empty
    file, a delimiter other than a comma, columns that do not match the schema, categories or values
    outside the public domain (each with its count and first rows, numbered from 1 after the header)."""
    frame = read_table(path)
    if len(frame.columns) == 1 and len(schema.names) > 1:
        header = str(frame.columns[0])
        used = next((name for mark, name in DELIMITERS.items() if mark in header), None)
        if used is not None:
            raise InputError(f"{path}: the header is one column {header!r}, separated by {used}: dpgym reads "
                             "comma-separated CSV; save the file with commas (or as Parquet)")
    if frame.empty:
        raise InputError(f"{path}: no data rows (a header only)")
    frame.index = pd.RangeIndex(1, len(frame) + 1)
    return schema.conform(frame, f"{path} (rows numbered from 1 after the header)")


def score_rows(store: RunStore, registry: Registry, dataset: str, path: Path, label: str, epsilon: float | None,
               seed: int = 0, metrics: tuple[str, ...] | None = None) -> CellRecord:
    """Score the rows of `path` as `label` on `dataset` and store them in the run directory `store` (which a
    suite has run into: the row is shown beside its generators, at its δ). Everything is checked before
    the run directory is touched; the record is returned."""
    run = Run.open(store, registry)
    if not label or label in {method.display for method in run.suite.configs}:
        raise InputError(f"--label {label!r}: name the scored rows with a label of their own (the run's generators "
                         f"are {', '.join(m.display for m in run.suite.configs)})")
    if seed < 0:
        raise InputError(f"--seed must be ≥ 0, got {seed}")
    if epsilon is not None and not epsilon > 0:
        raise InputError(f"--epsilon must be positive (or inf), got {epsilon:g}")
    spec = registry.dataset(dataset)
    missing = spec.missing()
    if missing:
        raise InputError(f"dataset {dataset!r} is unavailable here: {missing}")
    schema = spec.schema()
    synthetic = read_rows(path, schema)
    split = load_split(spec.load)
    suite = run.suite
    names = metrics if metrics is not None else suite.metrics
    if names is None:
        names = default_metrics(registry, _NoCapabilities(), spec)[0]
    metric_specs = [registry.metric(name) for name in names]
    options = {name: json.dumps(registry.metric(name).resolve_options(given), sort_keys=True)
               for name, given in suite.metric_options.items() if name in names}
    identity = spec.identity or spec.name
    budget_epsilon = math.inf if epsilon is None else float(epsilon)
    digest = sha256_of(path)
    key = cell_key({"harness": dpgym.__version__, SCORED: [label, digest],
                    "dataset": [identity, spec.version, spec.checksum],
                    "metrics": sorted([m.name, m.version, *([options[m.name]] if m.name in options else [])]
                                      for m in metric_specs),
                    "epsilon": repr(budget_epsilon), "delta": repr(float(suite.delta)), "seed": seed})
    cell = Cell(MethodConfig(label, {}, label, kind=SCORED), dataset, budget_epsilon, suite.delta, seed,
                tuple(names), key, tuple(sorted(options.items())), identity)
    guarantee = Guarantee.NOMINAL if epsilon is not None else Guarantee.NONE
    record = CellRecord(
        task="synthetic_data", cell=cell.info(),
        method=MethodRecord(SCORED, SCORED, label, "", "external", str(guarantee),
                            {"file": path.name, "sha256": digest},
                            guarantee_reason="synthetic rows made elsewhere, scored by `dpgym score`: "
                                             + ("the ε stated for them is claimed, not verified (no ledger)"
                                                if epsilon is not None else "no ε was stated")),
        dataset=DatasetRecord(spec.name, spec.version, spec.checksum), budget=cell.budget.to_dict(),
        seeds=seed_streams(seed, identity))
    started = time.perf_counter()
    context = MetricContext(train=split.train, test=split.test, synthetic=synthetic, schema=schema,
                            seed=record.seeds["evaluate"])
    try:
        evaluate(cell, spec, metric_specs, record, context)
    except CellFailure as failure:
        raise InputError(f"{path}: scoring failed at {failure}") from failure.error
    record.status = Status.OK
    record.timings.total_seconds = time.perf_counter() - started
    with store.locked():
        store.write_cell(record, synthetic)
        store.add_scored(record)
    return record
