"""How one cell runs, from data to metrics, in the order it happens.

`run_cell` is what every executor calls, in whatever process it runs the cell:

1. resolve the device and switch torch to deterministic kernels;
2. load the dataset's fixed split (once per process) and its public schema;
3. build the generator (or learner) from its spec and fit it on a copy of the training rows;
4. re-account its ledger independently (`check_ledger`); an overspent or mislabelled ledger fails
   the cell;
5. a generator samples as many rows as the training split holds, conformed to the schema, and each
   metric scores them; a learner's released model is scored on the real test split instead
   (`dpgym.learning`);
6. everything the cell returns must be JSON: what is not fails the cell here, naming the plugin.

A plugin's fault (an exception, even `SystemExit`) fails its cell with the stage it happened in,
never the run. Limits on time and memory are the executors' (`dpgym.worker`).

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
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import psutil

from dpgym import audit, learning
from dpgym.datafiles import DatasetUnavailable
from dpgym.grid import Cell
from dpgym.privacy.budget import Guarantee
from dpgym.privacy.events import Adjacency
from dpgym.privacy.ledger import Ledger, PrivacyViolation
from dpgym.privacy.reaccount import reaccount
from dpgym.registry import Provided, Registry
from dpgym.schema import Schema
from dpgym.specs import Capability, DatasetSpec, MetricContext, MetricSpec, Split
from dpgym.store import RESULT_FORMAT, to_json

# Told the label of each stage as it starts, when an executor listens (a context variable, so cells
# run in threads of one process each have their own).
STAGE_LISTENER: ContextVar[Callable[[str], None] | None] = ContextVar("dpgym_stage_listener", default=None)

# What the harness itself measures about a cell, as opposed to what its plugins return.
MEASURED = ("device", "timings", "warnings", "peak_rss_mb", "peak_gpu_mb", "execution")


class CellFailure(Exception):
    """A stage of a cell failed; the cell is recorded as failed at that stage."""

    def __init__(self, stage: str, error: BaseException):
        super().__init__(f"{stage}: {type(error).__name__}: {error}")
        self.stage, self.error = stage, error


def run_cell(cell: Cell, registry: Registry, device: str = "cpu",
             ) -> tuple[dict[str, Any], dict[str, Any] | None, pd.DataFrame | None]:
    """Run one cell; never raises for a plugin's fault. Returns (result, ledger, synthetic)."""
    provided = registry.get(cell.method.kind, cell.method.name)
    dataset = registry.dataset(cell.dataset)
    result = cell_header(cell, registry)
    ledger_json: dict[str, Any] | None = None
    synthetic: pd.DataFrame | None = None
    started = time.perf_counter()
    with PeakRss() as rss, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            # An explicit `device` hyper-parameter (suite or --set) wins over the run's --device.
            result["device"] = resolve_device(str(cell.method.params.get("device", device)), provided.spec)
            deterministic_torch(result["device"], provided.spec)
            if cell.method.kind == "learner":
                ledger_json = run_learner(cell, provided, dataset, result)
            else:
                metrics = [registry.metric(name) for name in cell.metrics]
                ledger_json, synthetic = run_generator(cell, provided, dataset, metrics, result)
            result["status"] = "ok"
        except DatasetUnavailable as err:
            result.update(status="unavailable", error={"stage": "load", "type": type(err).__name__, "message": str(err)})
        except CellFailure as failure:
            ledger_json = result.pop("_ledger", None)
            result.update(status="failed", error=error_record(failure.stage, failure.error))
    result["warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    result["timings"]["total_seconds"] = time.perf_counter() - started
    result["peak_rss_mb"] = rss.peak / 2**20
    if result["device"] == "cuda":
        import torch

        result["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    result.pop("_ledger", None)
    try:
        _check_recordable(cell, result, ledger_json)
    except CellFailure as failure:
        return unrecorded(cell, registry, result, failure.error), None, None
    return result, ledger_json, synthetic


def cell_header(cell: Cell, registry: Registry) -> dict[str, Any]:
    """What result.json says about a cell before it runs (also used for cells killed by a limit)."""
    provided = registry.get(cell.method.kind, cell.method.name)
    dataset = registry.dataset(cell.dataset)
    return {
        "format": RESULT_FORMAT,
        "task": "private_learning" if cell.method.kind == "learner" else "synthetic_data",
        "cell": cell.describe(),
        "method": {
            "kind": cell.method.kind, "name": cell.method.name, "label": cell.method.display,
            "version": provided.spec.version, "package": provided.package, "guarantee": str(provided.spec.guarantee),
            "params": {**provided.spec.defaults, **cell.method.params},
        },
        "dataset": {"name": dataset.name, "version": dataset.version, "checksum": dataset.checksum},
        "budget": cell.budget.to_dict(),
        "seeds": cell.seeds,
        "device": "cpu",
        "timings": {},
        "warnings": [],
    }


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


@cache
def load_split(load: Callable[[], Split]) -> Split:
    """Each dataset is loaded once per process and shared by its cells (read-only)."""
    split = load()
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


def timed(result: dict[str, Any], name: str, stage_name: str, fn: Callable[[], Any]) -> Any:
    """`stage`, recording its wall time as ``result["timings"][name]``."""
    start = time.perf_counter()
    value = stage(stage_name, fn)
    result["timings"][name] = time.perf_counter() - start
    return value


def build_and_fit(cell: Cell, provided: Provided, dataset: DatasetSpec, result: dict[str, Any],
                  ) -> tuple[Any, Split, Schema, Ledger, dict[str, Any]]:
    """Stages 2-4, shared by generators and learners: load, build, fit on a copy of the training
    rows, and check the ledger. Returns (fitted method, split, schema, ledger, ledger as JSON)."""
    spec = provided.spec
    split: Split = timed(result, "load_seconds", "load", lambda: load_split(dataset.load))
    schema = dataset.schema()
    if not schema.reviewed and spec.guarantee in (Guarantee.FORMAL, Guarantee.PURE):
        result["method"]["guarantee"] = str(Guarantee.NOMINAL)
        result["method"]["guarantee_reason"] = (
            f"{spec.guarantee} by its ledger, but schema {schema.name!r} was drafted from the private rows and is not "
            "reviewed: its bounds and categories were read without a DP mechanism")
    method = stage("build", lambda: spec.build(method_params(cell, spec, result)))
    train = split.train.copy()  # its own copy: it cannot alter what metrics see
    ledger = timed(result, "fit_seconds", "fit", lambda: method.fit(train, schema, cell.budget, result["seeds"]["fit"]))
    ledger_json = check_ledger(ledger, spec, cell, result)
    return method, split, schema, ledger, ledger_json


def method_params(cell: Cell, spec: Any, result: dict[str, Any]) -> dict[str, Any]:
    """The hyper-parameters the method is built with: the suite's, and the resolved device for a
    method that declares `Capability.DEVICE`."""
    params = dict(cell.method.params)
    if Capability.DEVICE in spec.capabilities:
        params["device"] = result["device"]
    return params


def check_ledger(ledger: Ledger, spec: Any, cell: Cell, result: dict[str, Any]) -> dict[str, Any]:
    """Re-account a fitted plugin's ledger and refuse the cell unless its claim holds and fits the budget."""
    what = f"{cell.method.kind} {spec.name!r}"
    if not isinstance(ledger, Ledger):
        raise CellFailure("fit", TypeError(f"{what}: fit() returned {type(ledger).__name__}, not a Ledger"))
    check = stage("privacy", lambda: reaccount(ledger, cell.budget))
    ledger_json = stage("privacy", lambda: {**ledger.to_dict(), "budget": cell.budget.to_dict(),
                                            "reaccounted": check.to_dict()})
    result["_ledger"] = ledger_json
    result["privacy"] = {"claimed_epsilon": ledger_json["epsilon"], "claimed_delta": ledger.delta,
                         "composition": ledger.composition, "reaccounted": check.to_dict()}
    if ledger.guarantee is not spec.guarantee:
        raise CellFailure("privacy", PrivacyViolation(
            f"{what} declares guarantee {spec.guarantee!s} but its ledger says {ledger.guarantee!s}"))
    contradiction = ledger_contradiction(ledger, spec)
    if contradiction:
        raise CellFailure("privacy", PrivacyViolation(f"{what}: {contradiction}"))
    stage("privacy", lambda: ledger.check_within(cell.budget))
    if check.verdict != "ok":
        raise CellFailure("privacy", PrivacyViolation(f"{what}: re-accounting verdict {check.verdict}: {check.detail}"))
    return ledger_json


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
                  result: dict[str, Any]) -> tuple[dict[str, Any], pd.DataFrame]:
    """A synthetic-data cell: fit, sample as many rows as the training split, score every metric."""
    seeds = result["seeds"]
    generator, split, schema, _, ledger_json = build_and_fit(cell, provided, dataset, result)
    raw = timed(result, "sample_seconds", "sample", lambda: generator.sample(len(split.train), seeds["sample"]))
    synthetic = stage("validate", lambda: _conform_sample(raw, len(split.train), schema, provided.spec.name))
    density = generator if Capability.LOG_PROB in provided.spec.capabilities else None
    context = MetricContext(train=split.train, test=split.test, synthetic=synthetic, schema=schema,
                            seed=seeds["evaluate"], generator=generator, density=density)
    result["metrics"], result["metric_detail"] = {}, {}
    start = time.perf_counter()
    for metric in metrics:
        if metric.requires_target and schema.target is None:
            result["metric_detail"][metric.name] = {"skipped": f"dataset {dataset.name!r} has no target column"}
            continue
        options = cell.options_of(metric.name)
        metric_context = replace(context, options=metric.options if options is None else options)
        output = stage("evaluate", lambda metric=metric, ctx=metric_context: metric.evaluate(ctx),
                       label=f"evaluate: {metric.name}")
        result["metrics"].update({k: float(v) for k, v in output.values.items()})
        result["metric_detail"][metric.name] = output.detail
    result["timings"]["evaluate_seconds"] = time.perf_counter() - start
    return ledger_json, synthetic


def _conform_sample(raw: Any, n: int, schema: Schema, generator: str) -> pd.DataFrame:
    """The generator's sample in schema form; it must hold the `n` rows asked for, since metrics
    compare it with a training split of that size."""
    what = f"synthetic data of generator {generator!r}"
    if not isinstance(raw, pd.DataFrame):
        raise TypeError(f"{what}: sample() returned {type(raw).__name__}, not a pandas DataFrame")
    if len(raw) != n:
        raise ValueError(f"{what}: sample({n}) returned {len(raw)} rows")
    return schema.conform(raw, what)


def run_learner(cell: Cell, provided: Provided, dataset: DatasetSpec, result: dict[str, Any]) -> dict[str, Any]:
    """A private-learning cell: fit, score the released model by AUC on the real test split, and
    audit the claim where it can bite (`dpgym.learning` says what each number means)."""
    spec, seeds, epsilon = provided.spec, result["seeds"], cell.epsilon
    learner, split, schema, ledger, ledger_json = build_and_fit(cell, provided, dataset, result)
    y_test = stage("evaluate", lambda: learning.positive_labels(split.test, schema))
    released = stage("evaluate", lambda: learning.audit_auc(learner.release(), split.test, y_test))
    draws = stage("evaluate", lambda: learning.evaluation_aucs(learner, split.test, y_test, seeds["sample"]))
    result["metrics"] = {"auc": released, "auc_draws_median": float(np.median(draws))}
    result["metric_detail"] = {"auc_draws": [float(a) for a in draws]}
    n = len(split.train)
    group = {"delta": ledger.delta,
             "replace_one": all(e.event.adjacency is Adjacency.REPLACE_ONE for e in ledger.entries)}
    findings, diagnostics = [], {}
    if learning.auditable(spec, epsilon, n):
        permuted = learning.permuted_labels(split.train, schema, seeds["evaluate"])
        twin = stage("audit", lambda: spec.build(method_params(cell, spec, result)))
        timed(result, "audit_seconds", "audit", lambda: twin.fit(permuted, schema, cell.budget, seeds["fit"]))
        perm_draws = stage("audit", lambda: learning.evaluation_aucs(twin, split.test, y_test, seeds["sample"]))
        result["metric_detail"]["auc_permuted_draws"] = [float(a) for a in perm_draws]
        diagnostics["auc_permuted_median"] = float(np.median(perm_draws))
        findings.append(audit.group_privacy(np.array(draws), np.array(perm_draws), epsilon, n, **group))
        if Capability.AUDIT_FINDINGS in spec.capabilities:
            findings.extend(stage("audit", lambda: learner.audit_findings(split, schema, cell.budget, np.array(draws))))
    result["audit"] = {"verdict": audit.combine(findings), "findings": [f.to_dict() for f in findings],
                       "n_rows": n, "log_factor": n * epsilon if math.isfinite(epsilon) else "inf", **group,
                       **diagnostics}
    return ledger_json


# --- 6. recording -----------------------------------------------------------------------------


def error_record(stage_name: str, error: BaseException) -> dict[str, Any]:
    return {"stage": stage_name, "type": type(error).__name__, "message": str(error),
            "traceback": "".join(traceback.format_exception(error))}


def _check_recordable(cell: Cell, result: dict[str, Any], ledger_json: dict[str, Any] | None) -> None:
    """What a cell stores must be JSON. A plugin's output that is not (a dict keyed by tuples) fails
    its cell here, in the cell's own process and naming the plugin, rather than the driver's write.
    Each payload is serialised once; only a failing result is searched for the metric at fault."""
    plugin = f"{cell.method.kind} {cell.method.name!r}"
    for what, payload in ((f"the ledger of {plugin}", ledger_json), (f"the result of {plugin}", result)):
        try:
            to_json(payload)
        except (TypeError, ValueError) as err:
            details = result.get("metric_detail", {}) if payload is result else {}
            what = next((f"the detail of metric {name!r}" for name, detail in details.items()
                         if not _writable(detail)), what)
            raise CellFailure("record", TypeError(f"{what} cannot be written as JSON: {err}")) from err


def _writable(payload: Any) -> bool:
    try:
        to_json(payload)
    except (TypeError, ValueError):
        return False
    return True


def unrecorded(cell: Cell, registry: Registry, result: dict[str, Any], error: BaseException) -> dict[str, Any]:
    """The failed result of a cell whose output could not be stored: of `result`, only what the
    harness measured is kept, since anything a plugin made may be what could not be written."""
    failed = cell_header(cell, registry)
    failed.update({name: result[name] for name in MEASURED if name in result})
    failed.update(status="failed", error=error_record("record", error))
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
