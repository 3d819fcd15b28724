"""The grid: a suite expanded into cells (method × dataset × ε × seed, over each method's part of the
suite's grid), each with a content key and its own random streams.

A cell's key hashes everything that decides its numbers (the method's name, version, package and
hyper-parameters with defaults filled in; the dataset's name, version and checksum; the metrics
and their options; ε, δ and the seed), so a run directory can be resumed, and a changed setting
runs again instead of reusing a stale result.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

import dpgym
from dpgym.privacy.budget import Budget
from dpgym.registry import Registry
from dpgym.engine.suite import DEVICES, MethodConfig, Suite
from dpgym.specs import Capability, CellInfo, DatasetSpec, SpecError, checked_params

STREAMS = ("fit", "sample", "evaluate")


@dataclass(frozen=True)
class Cell:
    method: MethodConfig  # the generator or learner this cell runs
    dataset: str
    epsilon: float
    delta: float
    seed: int
    metrics: tuple[str, ...]
    key: str
    # (metric, JSON of its resolved options) for the metrics whose options the suite sets
    metric_options: tuple[tuple[str, str], ...] = ()
    dataset_identity: str = ""  # the dataset's identity (content, not path); empty: its name

    @property
    def seeds(self) -> dict[str, int]:
        """The cell's random streams: from its seed and its dataset's identity, not where the file lies."""
        return seed_streams(self.seed, self.dataset_identity or self.dataset)

    def options_of(self, metric: str) -> dict[str, Any] | None:
        return next((json.loads(o) for name, o in self.metric_options if name == metric), None)

    @property
    def budget(self) -> Budget:
        return Budget(self.epsilon, self.delta)

    @property
    def title(self) -> str:
        """One line naming the cell, for messages."""
        return f"{self.method.display} × {self.dataset} × ε={self.epsilon:g} × seed {self.seed}"

    def info(self) -> CellInfo:
        """The cell as observer hooks see it and result.json records it."""
        return CellInfo(key=self.key, kind=self.method.kind, method=self.method.display, dataset=self.dataset,
                        epsilon=self.epsilon, delta=self.delta, seed=self.seed)


def seed_streams(seed: int, dataset: str) -> dict[str, int]:
    """Independent integer seeds for each random stream of a cell.

    The root depends on the seed and the dataset only, so every method at the same seed sees the
    same sampling and evaluation randomness (common random numbers make comparisons sharper).
    """
    root = np.random.SeedSequence(entropy=seed, spawn_key=(zlib.crc32(dataset.encode()),))
    return {name: int(child.generate_state(1, dtype=np.uint32)[0]) for name, child in zip(STREAMS, root.spawn(len(STREAMS)))}


def cell_key(content: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


NOT_DEFAULT = "not run by default"


def default_metrics(registry: Registry, method: Any, dataset: DatasetSpec) -> tuple[tuple[str, ...], dict[str, str]]:
    """The installed metrics a cell runs when its suite names none, and why each other one is left out:
    a metric that does not run by default, one that does not depend on the generator, one that needs a
    log-likelihood the method does not declare, one that needs a target the dataset's schema lacks."""
    chosen, left_out = [], {}
    for name, provided in sorted(registry.kinds["metric"].items()):
        spec = provided.spec
        if not spec.default:
            left_out[name] = NOT_DEFAULT
        elif not spec.depends_on_generator:
            left_out[name] = "does not depend on the generator (name it with --metrics to run it)"
        elif spec.requires_log_prob and Capability.LOG_PROB not in method.capabilities:
            left_out[name] = "needs a generator with log_prob"
        elif spec.requires_target and not _has_target(dataset):
            left_out[name] = "needs a target column"
        else:
            chosen.append(name)
    return tuple(chosen), left_out


def _has_target(dataset: DatasetSpec) -> bool:
    """Whether the dataset's schema names a target; True when the schema cannot be read here (the run's
    dataset checks report that, and the cell skips a target metric then)."""
    try:
        return dataset.schema().target is not None
    except Exception:
        return True


def expand(suite: Suite, registry: Registry) -> list[Cell]:
    """All cells of the suite; unknown plugin names, unknown hyper-parameters and values of the wrong
    type fail here, before any work, without importing any plugin's model code (`check_builds` does
    that for the cells a run will run). A suite that names no metrics gives each cell
    `default_metrics` for its method and dataset."""
    options = {name: json.dumps(registry.metric(name).resolve_options(given), sort_keys=True)
               for name, given in suite.metric_options.items()}

    def keyed(metric_names: tuple[str, ...]) -> list[tuple[str, ...]]:
        metrics = [registry.get("metric", m) for m in metric_names]
        return sorted((m.spec.name, m.spec.version, *([options[m.spec.name]] if m.spec.name in options else []))
                      for m in metrics)

    if suite.metrics is not None:
        metric_keys = keyed(suite.metrics)
    cells: list[Cell] = []
    first: dict[str, Cell] = {}  # cell key → the first cell that has it
    for method in suite.configs:
        provided = registry.get(method.kind, method.name)
        params = {**provided.spec.defaults, **method.params}
        _check_names_and_types(method, provided.spec)
        datasets, epsilons, seeds = method.part_of(suite)
        for dataset_name in datasets:
            dataset = registry.dataset(dataset_name)
            identity = dataset.identity or dataset.name
            if method.kind == "learner":
                _check_learner_target(method, dataset_name, dataset)
            metric_names = suite.metrics
            if metric_names is None:
                metric_names = default_metrics(registry, provided.spec, dataset)[0]
                metric_keys = keyed(metric_names)
            for epsilon in epsilons:
                for seed in seeds:
                    content = {
                        "harness": dpgym.__version__,
                        method.kind: [method.name, provided.spec.version, provided.package, params],
                        "dataset": [identity, dataset.version, dataset.checksum],
                        "metrics": metric_keys,
                        "epsilon": repr(float(epsilon)),
                        "delta": repr(float(suite.delta)),
                        "seed": seed,
                    }
                    cell = Cell(method, dataset_name, epsilon, suite.delta, seed, tuple(metric_names), cell_key(content),
                                tuple(sorted(options.items())), identity)
                    if cell.key in first:
                        raise SpecError(f"{first[cell.key].method.display!r} and {method.display!r} configure the same "
                                        f"cell ({method.name} with the same hyper-parameters once defaults are filled "
                                        f"in, on {dataset_name} at ε={epsilon:g}, seed {seed}); drop one")
                    first[cell.key] = cell
                    cells.append(cell)
    return cells


def _check_names_and_types(method: MethodConfig, spec: Any) -> None:
    device = method.params.get("device")
    if device is not None and device not in DEVICES:  # the harness resolves it, not the plugin
        raise SpecError(f"{method.kind} {method.name!r}: device must be one of {', '.join(DEVICES)}, got {device!r}")
    checked_params(method.kind, spec.name, spec.defaults, method.params)


def check_builds(cells: Iterable[Cell], registry: Registry) -> None:
    """Build each method of `cells` once, so that the plugin's own checks of its hyper-parameter values
    are a user error before any cell runs. This imports the plugins' model code: a run calls it for the
    cells it is about to run, not a dry run or a resumed run with nothing left."""
    seen: set[str] = set()
    for cell in cells:
        identity = json.dumps([cell.method.kind, cell.method.name, cell.method.params], sort_keys=True, default=str)
        if identity not in seen:
            seen.add(identity)
            _build(cell.method, registry.get(cell.method.kind, cell.method.name).spec)


def _build(method: MethodConfig, spec: Any) -> None:
    try:
        spec.build(method.params)
    except SpecError:
        raise
    except Exception as err:  # the plugin's own check of a value, or a value of the wrong type
        raise SpecError(f"{method.kind} {method.name!r}: invalid hyper-parameters {method.params}: "
                        f"{type(err).__name__}: {err}") from err


def _check_learner_target(learner: MethodConfig, name: str, dataset: DatasetSpec) -> None:
    """Learners are trained and audited on a two-class target: a dataset without one is refused with
    the grid, not cell by cell after a `via_synthetic` generator has trained. A dataset whose files
    are missing is left to fail its cells at load, saying how to provide them."""
    if dataset.missing():
        return
    try:
        dataset.schema().require_binary_target(f"learner {learner.display!r}")
    except ValueError as err:
        raise SpecError(f"{err}: drop dataset {name!r} from the suite, or the learner") from None
