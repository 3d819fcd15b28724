"""Grid expansion, cell keys, per-cell seeds, and running one cell from data to metrics."""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import threading
import time
import traceback
import warnings
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import psutil
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

import dpgym
from dpgym.datafiles import DatasetUnavailable
from dpgym.executors import Plan, make_executor
from dpgym.privacy import Budget, Guarantee, Ledger, PrivacyViolation, reaccount
from dpgym.registry import Provided, Registry
from dpgym.schema import Schema
from dpgym.store import RunStore, to_json
from dpgym.worker import Outcome
from dpgym.specs import DatasetSpec, GeneratorSpec, MetricContext, MetricSpec, SpecError, Split
from dpgym.suite import DEVICES, GeneratorConfig, Settings, Suite

STREAMS = ("fit", "sample", "evaluate")
# What the harness itself measures about a cell, as opposed to what its plugins return.
MEASURED = ("device", "timings", "warnings", "peak_rss_mb", "peak_gpu_mb", "execution")


@dataclass(frozen=True)
class Cell:
    generator: GeneratorConfig
    dataset: str
    epsilon: float
    delta: float
    seed: int
    metrics: tuple[str, ...]
    key: str
    # (metric, JSON of its resolved options) for the metrics whose options the suite sets
    metric_options: tuple[tuple[str, str], ...] = ()

    def options_of(self, metric: str) -> dict[str, Any] | None:
        return next((json.loads(o) for name, o in self.metric_options if name == metric), None)

    @property
    def budget(self) -> Budget:
        return Budget(self.epsilon, self.delta)

    def describe(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "generator": self.generator.display,
            "dataset": self.dataset,
            "epsilon": self.epsilon if math.isfinite(self.epsilon) else "inf",
            "delta": self.delta,
            "seed": self.seed,
        }


def seed_streams(seed: int, dataset: str) -> dict[str, int]:
    """Independent integer seeds for each random stream of a cell.

    The root depends on the seed and the dataset only, so every generator at the same seed sees
    the same sampling and evaluation randomness (common random numbers make comparisons sharper).
    """
    root = np.random.SeedSequence(entropy=seed, spawn_key=(zlib.crc32(dataset.encode()),))
    return {name: int(child.generate_state(1, dtype=np.uint32)[0]) for name, child in zip(STREAMS, root.spawn(len(STREAMS)))}


def cell_key(content: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _check_params(gen: GeneratorConfig, spec: Any) -> None:
    """Build the plugin once, so unknown or invalid hyper-parameters are a user error before any work."""
    device = gen.params.get("device")
    if device is not None and device not in DEVICES:  # the harness resolves it (resolve_device), not the plugin
        raise SpecError(f"{gen.kind} {gen.name!r}: device must be one of {', '.join(DEVICES)}, got {device!r}")
    try:
        spec.build(gen.params)
    except SpecError:
        raise
    except Exception as err:  # the plugin's own check of a value, or a value of the wrong type
        raise SpecError(f"{gen.kind} {gen.name!r}: invalid hyper-parameters {gen.params}: "
                        f"{type(err).__name__}: {err}") from err


def expand(suite: Suite, registry: Registry) -> list[Cell]:
    """All cells of the suite; unknown plugin names and hyper-parameters fail here, before any work."""
    metric_names = suite.metrics if suite.metrics is not None else tuple(sorted(registry.kinds["metric"]))
    metrics = [registry.get("metric", m) for m in metric_names]
    options = {name: json.dumps(registry.metric(name).resolve_options(given), sort_keys=True)
               for name, given in suite.metric_options.items()}
    metric_keys = sorted((m.spec.name, m.spec.version, *([options[m.spec.name]] if m.spec.name in options else []))
                         for m in metrics)
    cells: list[Cell] = []
    first: dict[str, Cell] = {}  # cell key → the first cell that has it
    for gen in suite.configs:
        provided = registry.get(gen.kind, gen.name)
        params = {**provided.spec.defaults, **gen.params}
        _check_params(gen, provided.spec)
        for dataset_name in suite.datasets:
            dataset = registry.dataset(dataset_name)
            if gen.kind == "learner":
                _check_learner_target(gen, dataset_name, dataset)
            for epsilon in suite.epsilons:
                for seed in suite.seeds:
                    content = {
                        "harness": dpgym.__version__,
                        gen.kind: [gen.name, provided.spec.version, provided.package, params],
                        "dataset": [dataset.name, dataset.version, dataset.checksum],
                        "metrics": metric_keys,
                        "epsilon": repr(float(epsilon)),
                        "delta": repr(float(suite.delta)),
                        "seed": seed,
                    }
                    cell = Cell(gen, dataset_name, epsilon, suite.delta, seed, tuple(metric_names), cell_key(content),
                                tuple(sorted(options.items())))
                    if cell.key in first:
                        raise SpecError(f"{first[cell.key].generator.display!r} and {gen.display!r} configure the same "
                                        f"cell ({gen.name} with the same hyper-parameters once defaults are filled "
                                        f"in, on {dataset_name} at ε={epsilon:g}, seed {seed}); drop one")
                    first[cell.key] = cell
                    cells.append(cell)
    return cells


def _check_learner_target(learner: GeneratorConfig, name: str, dataset: DatasetSpec) -> None:
    """Learners are trained and audited on a two-class target: a dataset without one is refused with
    the grid, not cell by cell after a `via_synthetic` generator has trained. A dataset whose files
    are missing is left to fail its cells at load, saying how to provide them."""
    if dataset.missing():
        return
    try:
        dataset.schema().require_binary_target(f"learner {learner.display!r}")
    except ValueError as err:
        raise SpecError(f"{err}: drop dataset {name!r} from the suite, or the learner") from None


@cache
def _load_split(load: Callable[[], Split]) -> Split:
    """Each dataset is loaded once per process and shared by its cells (read-only)."""
    split = load()
    if split.train.empty:  # no generator can fit, nor any metric compare, on no rows
        raise ValueError("the training split has no rows")
    return split


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


class CellFailure(Exception):
    def __init__(self, stage: str, error: BaseException):
        super().__init__(f"{stage}: {type(error).__name__}: {error}")
        self.stage, self.error = stage, error


def cell_header(cell: Cell, registry: Registry) -> dict[str, Any]:
    """What result.json says about a cell before it runs (also used for cells killed by a limit)."""
    provided = registry.get(cell.generator.kind, cell.generator.name)
    dataset = registry.dataset(cell.dataset)
    return {
        "format": "dpgym-result/1",
        "task": "private_learning" if cell.generator.kind == "learner" else "synthetic_data",
        "cell": cell.describe(),
        "generator": {
            "name": cell.generator.name, "label": cell.generator.display, "version": provided.spec.version,
            "package": provided.package, "guarantee": str(provided.spec.guarantee),
            "params": {**provided.spec.defaults, **cell.generator.params},
        },
        "dataset": {"name": dataset.name, "version": dataset.version, "checksum": dataset.checksum},
        "budget": cell.budget.to_dict(),
        "seeds": seed_streams(cell.seed, cell.dataset),
        "device": "cpu",
        "timings": {},
        "warnings": [],
    }


def resolve_device(requested: str, spec: GeneratorSpec) -> str:
    """The device a cell runs on. A generator can use a GPU iff it takes a `device` hyper-parameter
    (docs/plugins.md); torch is imported only for such a generator."""
    if requested == "cpu" or "device" not in spec.defaults:
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if requested == "cuda":
        raise CellFailure("device", RuntimeError("device 'cuda' requested but torch.cuda.is_available() is False"))
    return "cpu"


def _deterministic_torch(device: str, spec: GeneratorSpec) -> None:
    """Deterministic kernels wherever torch is in use (a generator with a device hyper-parameter, or
    a plugin module that imported it); a torch-free cell never imports it."""
    if "device" not in spec.defaults and "torch" not in sys.modules:
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # needed by deterministic cuBLAS
    import torch

    torch.use_deterministic_algorithms(True)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()


def run_cell(cell: Cell, registry: Registry, device: str = "cpu",
             ) -> tuple[dict[str, Any], dict[str, Any] | None, pd.DataFrame | None]:
    """Run one cell; never raises for a plugin's fault. Returns (result, ledger, synthetic)."""
    provided = registry.get(cell.generator.kind, cell.generator.name)
    dataset = registry.dataset(cell.dataset)
    result = cell_header(cell, registry)
    ledger_json: dict[str, Any] | None = None
    synthetic: pd.DataFrame | None = None
    started = time.perf_counter()
    with PeakRss() as rss, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            # An explicit `device` hyper-parameter (suite or --set) wins over the run's --device.
            result["device"] = resolve_device(str(cell.generator.params.get("device", device)), provided.spec)
            _deterministic_torch(result["device"], provided.spec)
            if cell.generator.kind == "learner":
                from dpgym.learning import execute_learner

                ledger_json, synthetic = execute_learner(cell, provided, dataset, result), None
            else:
                metrics = [registry.metric(name) for name in cell.metrics]
                ledger_json, synthetic = _execute(cell, provided, dataset, metrics, result)
            result["status"] = "ok"
        except DatasetUnavailable as err:
            result.update(status="unavailable", error={"stage": "load", "type": type(err).__name__, "message": str(err)})
        except CellFailure as failure:
            ledger_json = result.pop("_ledger", None)
            result.update(status="failed", error=_error(failure.stage, failure.error))
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


def _error(stage: str, error: BaseException) -> dict[str, Any]:
    return {"stage": stage, "type": type(error).__name__, "message": str(error),
            "traceback": "".join(traceback.format_exception(error))}


def _check_recordable(cell: Cell, result: dict[str, Any], ledger_json: dict[str, Any] | None) -> None:
    """What a cell stores must be JSON. A plugin's output that is not (a dict keyed by tuples) fails
    its cell here, in the cell's own process and naming the plugin, rather than the driver's write.
    Each payload is serialised once; only a failing result is searched for the metric at fault."""
    plugin = f"{cell.generator.kind} {cell.generator.name!r}"
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
    failed.update(status="failed", error=_error("record", error))
    return failed


def _stage(name: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except DatasetUnavailable as err:
        if name == "load":
            raise
        raise CellFailure(name, err) from err  # a generator's or metric's failure, not a missing dataset
    except (Exception, SystemExit) as err:  # a plugin's fault (sys.exit too: serially, it would end the run)
        raise CellFailure(name, err) from err  # fails its cell, never the run


def _timed(result: dict[str, Any], name: str, stage: str, fn: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    value = _stage(stage, fn)
    result["timings"][name] = time.perf_counter() - start
    return value


def _execute(cell: Cell, provided: Provided, dataset: DatasetSpec, metrics: list[MetricSpec],
             result: dict[str, Any]) -> tuple[dict[str, Any], pd.DataFrame]:
    spec = provided.spec
    seeds = result["seeds"]
    split: Split = _timed(result, "load_seconds", "load", lambda: _load_split(dataset.load))
    schema = dataset.schema()
    params = dict(cell.generator.params)
    if "device" in spec.defaults:  # the generator can use a GPU: it gets the device resolved for it
        params["device"] = result["device"]
    generator = _stage("build", lambda: spec.build(params))
    train = split.train.copy()  # the generator gets its own copy: it cannot alter what metrics see
    ledger: Ledger = _timed(result, "fit_seconds", "fit", lambda: generator.fit(train, schema, cell.budget, seeds["fit"]))
    ledger_json = check_ledger(ledger, spec, cell, result)
    raw = _timed(result, "sample_seconds", "sample", lambda: generator.sample(len(split.train), seeds["sample"]))
    synthetic = _stage("validate", lambda: _conform_sample(raw, len(split.train), schema, spec.name))
    context = MetricContext(train=split.train, test=split.test, synthetic=synthetic, schema=schema,
                            seed=seeds["evaluate"], generator=generator)
    result["metrics"], result["metric_detail"] = {}, {}
    start = time.perf_counter()
    for metric in metrics:
        if metric.requires_target and schema.target is None:
            result["metric_detail"][metric.name] = {"skipped": f"dataset {dataset.name!r} has no target column"}
            continue
        options = cell.options_of(metric.name)
        metric_context = replace(context, options=metric.options if options is None else options)
        output = _stage("evaluate", lambda metric=metric, ctx=metric_context: metric.evaluate(ctx))
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


def check_ledger(ledger: Ledger, spec: Any, cell: Cell, result: dict[str, Any]) -> dict[str, Any]:
    """Re-account a fitted plugin's ledger and refuse the cell unless its claim holds and fits the budget."""
    if not isinstance(ledger, Ledger):
        raise CellFailure("fit", TypeError(f"{cell.generator.kind} {spec.name!r}: fit() returned "
                                           f"{type(ledger).__name__}, not a Ledger"))
    check = _stage("privacy", lambda: reaccount(ledger, cell.budget))
    ledger_json = _stage("privacy", lambda: {**ledger.to_dict(), "budget": cell.budget.to_dict(),
                                             "reaccounted": check.to_dict()})
    result["_ledger"] = ledger_json
    result["privacy"] = {"claimed_epsilon": ledger_json["epsilon"], "claimed_delta": ledger.delta,
                         "reaccounted": check.to_dict()}
    if ledger.guarantee is not spec.guarantee:
        raise CellFailure("privacy", PrivacyViolation(
            f"{cell.generator.kind} {spec.name!r} declares guarantee {spec.guarantee!s} but its ledger says {ledger.guarantee!s}"))
    _stage("privacy", lambda: ledger.check_within(cell.budget))
    if check.verdict != "ok":
        raise CellFailure("privacy", PrivacyViolation(
            f"{cell.generator.kind} {spec.name!r}: re-accounting verdict {check.verdict}: {check.detail}"))
    return ledger_json


@dataclass
class RunSummary:
    total: int
    skipped: int = 0  # already finished in an earlier run
    ok: int = 0
    failed: int = 0
    unavailable: int = 0
    messages: list[str] | None = None


def _notify(registry: Registry, hook: str, **kwargs: Any) -> None:
    try:
        getattr(registry.manager.hook, hook)(**kwargs)
    except Exception as err:  # an observer's fault must not fail the cell
        warnings.warn(f"observer hook {hook} raised {type(err).__name__}: {err}", stacklevel=2)


def outcome_result(cell: Cell, outcome: Outcome, registry: Registry) -> dict[str, Any]:
    """The result.json of a finished cell; a cell whose process was killed or crashed is failed."""
    if outcome.failure is None:
        result = outcome.result
        result["peak_rss_mb"] = max(result["peak_rss_mb"], outcome.peak_rss_mb)
        result["warnings"] = sorted({*result["warnings"], *outcome.notes})
        return result
    result = cell_header(cell, registry)
    failure = dict(outcome.failure)
    result.update(status="failed", peak_rss_mb=outcome.peak_rss_mb, warnings=outcome.notes,
                  error={"stage": "worker", **failure})
    result["timings"]["total_seconds"] = outcome.wall_seconds
    return result


def runs_again(finished: dict[str, Any] | None, retry_failed: bool) -> bool:
    """Whether a run (re)does a cell with this stored result: one not run yet, or with `retry_failed`
    one that failed or was unavailable."""
    return finished is None or (retry_failed and finished["status"] in ("failed", "unavailable"))


def run_suite(suite: Suite, store: RunStore, registry: Registry, retry_failed: bool = False,
              show_progress: bool = True, settings: Settings | None = None) -> RunSummary:
    """Run every cell of the suite not already finished in `store` (failed ones too with `retry_failed`).

    `settings` (from the CLI) take precedence over the suite's own [settings].
    """
    plan = Plan.resolve((settings or Settings()).over(suite.settings))
    cells = expand(suite, registry)
    summary = RunSummary(total=len(cells), messages=[])
    with store.locked():
        earlier = store.cells_outside({cell.key for cell in cells})
        if earlier:
            summary.messages.append(
                f"{len(earlier)} finished cell(s) in {store.root} are not part of this suite (an earlier suite's, or "
                "the same suite with other settings that change cells): they are kept, but the leaderboard and "
                "report now show this suite only; run the earlier suite into this directory again to show them")
        store.write_manifest(suite.to_dict(), execution=asdict(plan))
        todo = []
        finished_failed = 0
        for cell in cells:
            finished = store.finished(cell.key)
            if runs_again(finished, retry_failed):
                todo.append(cell)
            else:
                summary.skipped += 1
                finished_failed += finished["status"] != "ok"
                store.relabel(finished, cell.generator.display)  # the label is display, not part of the key
        if finished_failed:
            summary.messages.append(f"{finished_failed} of the cells already done had failed or were unavailable; "
                                    "re-run with --retry-failed to run them again")
        if plan.executor == "serial" and (plan.timeout or plan.max_memory):
            summary.messages.append("the serial executor applies no timeout or memory limit; "
                                    "use --executor processes to enforce them")
        with Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("ok {task.fields[ok]} · failed {task.fields[failed]} · {task.fields[running]}"),
            TimeRemainingColumn(), disable=not show_progress, transient=False,
        ) as progress, make_executor(plan, registry) as executor:
            task = progress.add_task(suite.name, total=len(cells), completed=summary.skipped, ok=0, failed=0,
                                     running=f"{min(plan.workers, len(todo))} running")
            for cell in todo:
                _notify(registry, "dpgym_cell_started", cell=cell.describe())
            for done, (cell, outcome) in enumerate(executor.run(todo), start=1):
                result = outcome_result(cell, outcome, registry)
                try:
                    store.write_cell(cell.key, result, outcome.ledger, outcome.synthetic)
                except Exception as err:  # e.g. a plugin's output the cell's own check missed: fail the cell only
                    result = unrecorded(cell, registry, result, err)
                    store.write_cell(cell.key, result, None, None)
                _notify(registry, "dpgym_cell_finished", cell=cell.describe(), result=result)
                _count(summary, cell, result)
                progress.update(task, advance=1, ok=summary.ok, failed=summary.failed + summary.unavailable,
                                running=f"{min(plan.workers, len(todo) - done)} running")
    summary.messages = list(dict.fromkeys(summary.messages))
    return summary


def _count(summary: RunSummary, cell: Cell, result: dict[str, Any]) -> None:
    status = result["status"]
    what = f"{cell.generator.display} × {cell.dataset} × ε={cell.epsilon:g} × seed {cell.seed}"
    if status == "ok":
        summary.ok += 1
    elif status == "unavailable":
        summary.unavailable += 1
        message = result["error"]["message"]
        summary.messages.append(message if message.startswith(cell.dataset) else f"{cell.dataset} unavailable: {message}")
    else:
        summary.failed += 1
        err = result["error"]
        summary.messages.append(f"failed {what} at {err['stage']}: {err['type']}: {err['message']}")
