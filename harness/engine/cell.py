"""How one cell runs, from data to metrics, in the order it happens.

`run_cell` is what every executor calls, in whatever process it runs the cell:

1. resolve the device and switch torch to deterministic kernels;
2. load the dataset's fixed split (once per process) and its public schema;
3. build the generator (or learner) from its spec and fit it on a copy of the training rows;
4. re-account its ledger independently (`check_ledger`); an overspent or mislabelled ledger fails
   the cell;
5. a generator samples as many rows as the training split holds, conformed to the schema, and each
   metric scores them; a learner's released model is scored on the real test split instead
   (`dpgym.audit.learners`);
6. everything the cell returns must be JSON: what is not fails the cell here, naming the plugin.

A plugin's fault (an exception, even `SystemExit`) fails its cell with the stage it happened in,
never the run. Limits on time and memory are the executors' (`dpgym.engine.worker`).

Each stage is announced as it starts (`STAGE_LISTENER`: "fit", "sample", "evaluate: utility", ...),
so that a run's progress display can say what every running cell is doing.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import psutil

from dpgym.audit import learners
from dpgym.data.datafiles import DatasetUnavailable
from dpgym.data.splits import load_split
from dpgym.privacy.budget import Guarantee
from dpgym.privacy.events import Adjacency
from dpgym.privacy.ledger import Ledger, PrivacyViolation
from dpgym.privacy.reaccount import reaccount
from dpgym.registry import Provided, Registry
from dpgym.results.records import CellRecord, DatasetRecord, ErrorRecord, MethodRecord, PrivacyRecord, Status
from dpgym.results.store import to_json
from dpgym.engine.grid import Cell
from dpgym.schema import Schema
from dpgym.specs import Capability, DatasetSpec, MetricContext, MetricSpec, Split

# Told the label of each stage as it starts, when an executor listens (a context variable, so cells
# run in threads of one process each have their own).
STAGE_LISTENER: ContextVar[Callable[[str], None] | None] = ContextVar("dpgym_stage_listener", default=None)

class CellFailure(Exception):
    """A stage of a cell failed; the cell is recorded as failed at that stage."""

    def __init__(self, stage: str, error: BaseException):
        super().__init__(f"{stage}: {type(error).__name__}: {error}")
        self.stage, self.error = stage, error


def run_cell(cell: Cell, registry: Registry, device: str = "cpu") -> tuple[CellRecord, pd.DataFrame | None]:
    """Run one cell; never raises for a plugin's fault. Returns its record (with its ledger, when the
    method returned one) and its synthetic rows."""
    provided = registry.get(cell.method.kind, cell.method.name)
    dataset = registry.dataset(cell.dataset)
    record = cell_header(cell, registry)
    synthetic: pd.DataFrame | None = None
    started = time.perf_counter()
    with PeakRss() as rss, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            # An explicit `device` hyper-parameter (suite or --set) wins over the run's --device.
            record.device = resolve_device(str(cell.method.params.get("device", device)), provided.spec)
            deterministic_torch(record.device, provided.spec)
            if cell.method.kind == "learner":
                run_learner(cell, provided, dataset, record)
            else:
                metrics = [registry.metric(name) for name in cell.metrics]
                synthetic = run_generator(cell, provided, dataset, metrics, record)
            record.status = Status.OK
        except DatasetUnavailable as err:
            record.status, record.error = Status.UNAVAILABLE, ErrorRecord("load", type(err).__name__, str(err))
        except CellFailure as failure:
            record.status, record.error = Status.FAILED, error_record(failure.stage, failure.error)
    record.warnings = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    record.timings.total_seconds = time.perf_counter() - started
    record.peak_rss_mb = rss.peak / 2**20
    if record.device == "cuda":
        import torch

        record.peak_gpu_mb = torch.cuda.max_memory_allocated() / 2**20
    try:
        _check_recordable(cell, record)
    except CellFailure as failure:
        return unrecorded(cell, registry, record, failure.error), None
    return record, synthetic


def cell_header(cell: Cell, registry: Registry) -> CellRecord:
    """What result.json says about a cell before it runs (also used for cells killed by a limit)."""
    provided = registry.get(cell.method.kind, cell.method.name)
    dataset = registry.dataset(cell.dataset)
    return CellRecord(
        task="private_learning" if cell.method.kind == "learner" else "synthetic_data",
        cell=cell.info(),
        method=MethodRecord(cell.method.kind, cell.method.name, cell.method.display, provided.spec.version,
                            provided.package, str(provided.spec.guarantee),
                            {**provided.spec.defaults, **cell.method.params}),
        dataset=DatasetRecord(dataset.name, dataset.version, dataset.checksum),
        budget=cell.budget.to_dict(),
        seeds=cell.seeds,
    )


# --- 1. device and determinism ----------------------------------------------------------------


def resolve_device(requested: str, spec: Any) -> str:
    """The device a cell runs on: a GPU only for a method whose spec declares `Capability.DEVICE`
    and only where torch sees one; torch is imported only for such a method."""
    if requested == "cpu" or Capability.DEVICE not in spec.capabilities:
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if requested == "cuda":
        raise CellFailure("device", RuntimeError("device 'cuda' requested but torch.cuda.is_available() is False"))
    return "cpu"


def deterministic_torch(device: str, spec: Any) -> None:
    """Deterministic kernels wherever torch is in use (a method that can use a device, or a plugin
    module that imported it); a torch-free cell never imports it."""
    if Capability.DEVICE not in spec.capabilities and "torch" not in sys.modules:
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # needed by deterministic cuBLAS
    import torch

    torch.use_deterministic_algorithms(True)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()


# --- 2-5. the stages --------------------------------------------------------------------------


def _with_rows(split: Split) -> Split:
    if split.train.empty:  # no generator can fit, nor any metric compare, on no rows
        raise ValueError("the training split has no rows")
    return split


def stage(name: str, fn: Callable[[], Any], label: str | None = None) -> Any:
    """Run one stage of a cell: a plugin's fault becomes a `CellFailure` at that stage. The listener,
    if any, hears `label` (default: the stage's name) first."""
    listener = STAGE_LISTENER.get()
    if listener is not None:
        listener(label or name)
    try:
        return fn()
    except DatasetUnavailable as err:
        if name == "load":
            raise
        raise CellFailure(name, err) from err  # a generator's or metric's failure, not a missing dataset
    except (Exception, SystemExit) as err:  # a plugin's fault (sys.exit too: serially, it would end the run)
        raise CellFailure(name, err) from err  # fails its cell, never the run


def timed(record: CellRecord, name: str, stage_name: str, fn: Callable[[], Any]) -> Any:
    """`stage`, recording its wall time as the record's timing `name`."""
    start = time.perf_counter()
    value = stage(stage_name, fn)
    setattr(record.timings, name, time.perf_counter() - start)
    return value


def build_and_fit(cell: Cell, provided: Provided, dataset: DatasetSpec, record: CellRecord,
                  ) -> tuple[Any, Split, Schema, Ledger]:
    """Stages 2-4, shared by generators and learners: load, build, fit on a copy of the training
    rows, and check the ledger. Returns (fitted method, split, schema, ledger)."""
    spec = provided.spec
    split: Split = timed(record, "load_seconds", "load", lambda: _with_rows(load_split(dataset.load)))
    schema = dataset.schema()
    if not schema.reviewed and spec.guarantee in (Guarantee.FORMAL, Guarantee.PURE):
        record.method.guarantee = str(Guarantee.NOMINAL)
        record.method.guarantee_reason = (
            f"{spec.guarantee} by its ledger, but schema {schema.name!r} was drafted from the private rows and is not "
            "reviewed: its bounds and categories were read without a DP mechanism")
    method = stage("build", lambda: spec.build(method_params(cell, spec, record)))
    train = split.train.copy()  # its own copy: it cannot alter what metrics see
    ledger = timed(record, "fit_seconds", "fit", lambda: method.fit(train, schema, cell.budget, record.seeds["fit"]))
    check_ledger(ledger, spec, cell, record)
    return method, split, schema, ledger


def method_params(cell: Cell, spec: Any, record: CellRecord) -> dict[str, Any]:
    """The hyper-parameters the method is built with: the suite's, and the resolved device for a
    method that declares `Capability.DEVICE`."""
    params = dict(cell.method.params)
    if Capability.DEVICE in spec.capabilities:
        params["device"] = record.device
    return params


def check_ledger(ledger: Ledger, spec: Any, cell: Cell, record: CellRecord) -> None:
    """Re-account a fitted plugin's ledger and refuse the cell unless its claim holds and fits the budget.
    The ledger joins the record first, so that a refused cell shows what it claimed."""
    what = f"{cell.method.kind} {spec.name!r}"
    if not isinstance(ledger, Ledger):
        raise CellFailure("fit", TypeError(f"{what}: fit() returned {type(ledger).__name__}, not a Ledger"))
    check = stage("privacy", lambda: reaccount(ledger, cell.budget))
    record.ledger = ledger
    record.privacy = stage("privacy", lambda: PrivacyRecord(ledger.epsilon, ledger.delta, ledger.composition, check))
    if ledger.guarantee is not spec.guarantee:
        raise CellFailure("privacy", PrivacyViolation(
            f"{what} declares guarantee {spec.guarantee!s} but its ledger says {ledger.guarantee!s}"))
    contradiction = ledger_contradiction(ledger, spec)
    if contradiction:
        raise CellFailure("privacy", PrivacyViolation(f"{what}: {contradiction}"))
    stage("privacy", lambda: ledger.check_within(cell.budget))
    if check.verdict != "ok":
        raise CellFailure("privacy", PrivacyViolation(f"{what}: re-accounting verdict {check.verdict}: {check.detail}"))


def ledger_contradiction(ledger: Ledger, spec: Any) -> str:
    """Why a ledger cannot stand for its method, or "": its label contradicts its entries, or a
    `formal`/`pure` method that does not declare `Capability.READS_NO_ROWS` records no mechanism
    (an empty ledger re-accounts to ε = 0, whatever the method read)."""
    if (not ledger.entries and ledger.guarantee in (Guarantee.FORMAL, Guarantee.PURE)
            and Capability.READS_NO_ROWS not in spec.capabilities):
        return ("its ledger records no mechanism, so it claims ε = 0; a method that reads no training row "
                "declares capabilities={Capability.READS_NO_ROWS}, any other records what it spent")
    return ledger.label_contradiction()


def run_generator(cell: Cell, provided: Provided, dataset: DatasetSpec, metrics: list[MetricSpec],
                  record: CellRecord) -> pd.DataFrame:
    """A synthetic-data cell: fit, sample as many rows as the training split, score every metric."""
    seeds = record.seeds
    generator, split, schema, _ = build_and_fit(cell, provided, dataset, record)
    raw = timed(record, "sample_seconds", "sample", lambda: generator.sample(len(split.train), seeds["sample"]))
    synthetic = stage("validate", lambda: _conform_sample(raw, len(split.train), schema, provided.spec.name))
    density = generator if Capability.LOG_PROB in provided.spec.capabilities else None
    evaluate(cell, dataset, metrics, record, MetricContext(train=split.train, test=split.test, synthetic=synthetic,
                                                           schema=schema, seed=seeds["evaluate"], generator=generator,
                                                           density=density))
    return synthetic


def evaluate(cell: Cell, dataset: DatasetSpec, metrics: list[MetricSpec], record: CellRecord,
             context: MetricContext) -> None:
    """Stage 5's scoring: each metric on the cell's synthetic rows (`context`), with the cell's options;
    its values and details join the record. Synthetic rows made elsewhere (`dpgym.engine.scoring`) are
    scored by this same function."""
    schema = context.schema
    record.metrics, record.metric_detail = {}, {}
    start = time.perf_counter()
    for metric in metrics:
        if metric.requires_target and schema.target is None:
            record.metric_detail[metric.name] = {"skipped": f"dataset {dataset.name!r} has no target column"}
            continue
        options = cell.options_of(metric.name)
        metric_context = replace(context, options=metric.options if options is None else options)
        output = stage("evaluate", lambda metric=metric, ctx=metric_context: metric.evaluate(ctx),
                       label=f"evaluate: {metric.name}")
        record.metrics.update({k: float(v) for k, v in output.values.items()})
        record.metric_detail[metric.name] = output.detail
    record.timings.evaluate_seconds = time.perf_counter() - start


def _conform_sample(raw: Any, n: int, schema: Schema, generator: str) -> pd.DataFrame:
    """The generator's sample in schema form; it must hold the `n` rows asked for, since metrics
    compare it with a training split of that size."""
    what = f"synthetic data of generator {generator!r}"
    if not isinstance(raw, pd.DataFrame):
        raise TypeError(f"{what}: sample() returned {type(raw).__name__}, not a pandas DataFrame")
    if len(raw) != n:
        raise ValueError(f"{what}: sample({n}) returned {len(raw)} rows")
    return schema.conform(raw, what)


def run_learner(cell: Cell, provided: Provided, dataset: DatasetSpec, record: CellRecord) -> None:
    """A private-learning cell: fit, score the released model by AUC on the real test split, and
    audit the claim where it can bite (`dpgym.audit.learners` says what each number means)."""
    spec, seeds, epsilon = provided.spec, record.seeds, cell.epsilon
    learner, split, schema, ledger = build_and_fit(cell, provided, dataset, record)
    y_test = stage("evaluate", lambda: learners.positive_labels(split.test, schema))
    released = stage("evaluate", lambda: learners.audit_auc(learner.release(), split.test, y_test))
    draws = stage("evaluate", lambda: learners.evaluation_aucs(learner, split.test, y_test, seeds["sample"]))
    record.metrics = {"auc": released, "auc_draws_median": float(np.median(draws))}
    record.metric_detail = {"auc_draws": [float(a) for a in draws]}
    n = len(split.train)
    group = {"delta": ledger.delta,
             "replace_one": all(e.event.adjacency is Adjacency.REPLACE_ONE for e in ledger.entries)}
    findings, diagnostics = [], {}
    if learners.auditable(spec, epsilon, n):
        permuted = learners.permuted_labels(split.train, schema, seeds["evaluate"])
        twin = stage("audit", lambda: spec.build(method_params(cell, spec, record)))
        timed(record, "audit_seconds", "audit", lambda: twin.fit(permuted, schema, cell.budget, seeds["fit"]))
        perm_draws = stage("audit", lambda: learners.evaluation_aucs(twin, split.test, y_test, seeds["sample"]))
        record.metric_detail["auc_permuted_draws"] = [float(a) for a in perm_draws]
        diagnostics["auc_permuted_median"] = float(np.median(perm_draws))
        findings.append(learners.group_privacy(np.array(draws), np.array(perm_draws), epsilon, n, **group))
        if Capability.AUDIT_FINDINGS in spec.capabilities:
            findings.extend(stage("audit", lambda: learner.audit_findings(split, schema, cell.budget, np.array(draws))))
    record.audit = {"verdict": learners.combine(findings), "findings": [f.to_dict() for f in findings],
                    "n_rows": n, "log_factor": n * epsilon if math.isfinite(epsilon) else "inf", **group,
                    **diagnostics}


# --- 6. recording -----------------------------------------------------------------------------


def error_record(stage_name: str, error: BaseException) -> ErrorRecord:
    return ErrorRecord(stage_name, type(error).__name__, str(error), "".join(traceback.format_exception(error)))


def _check_recordable(cell: Cell, record: CellRecord) -> None:
    """What a cell stores must be JSON. A plugin's output that is not (a dict keyed by tuples) fails
    its cell here, in the cell's own process and naming the plugin, rather than the driver's write.
    Each payload is serialised once; only a failing result is searched for the metric at fault."""
    plugin = f"{cell.method.kind} {cell.method.name!r}"
    for what, payload in ((f"the ledger of {plugin}", record.ledger_file), (f"the result of {plugin}", record.to_dict)):
        try:
            to_json(payload())
        except (TypeError, ValueError) as err:
            details = (record.metric_detail or {}) if payload == record.to_dict else {}
            what = next((f"the detail of metric {name!r}" for name, detail in details.items()
                         if not _writable(detail)), what)
            raise CellFailure("record", TypeError(f"{what} cannot be written as JSON: {err}")) from err


def _writable(payload: Any) -> bool:
    try:
        to_json(payload)
    except (TypeError, ValueError):
        return False
    return True


def unrecorded(cell: Cell, registry: Registry, record: CellRecord, error: BaseException) -> CellRecord:
    """The failed record of a cell whose output could not be stored: of `record`, only what the
    harness measured is kept, since anything a plugin made may be what could not be written."""
    failed = cell_header(cell, registry)
    failed.device, failed.timings, failed.warnings = record.device, record.timings, record.warnings
    failed.peak_rss_mb, failed.peak_gpu_mb, failed.execution = record.peak_rss_mb, record.peak_gpu_mb, record.execution
    failed.status, failed.error = Status.FAILED, error_record("record", error)
    return failed


class PeakRss:
    """Peak resident memory of this process while the block runs (sampled every 20 ms)."""

    def __enter__(self) -> PeakRss:
        self._process = psutil.Process()
        self.peak = self._process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._process.memory_info().rss)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)
