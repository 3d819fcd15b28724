"""Suites: the grid a run covers ((generators + learners) × datasets × ε × seeds), from TOML or the CLI.

A suite file (``leaderboard/suites/NAME.toml``)::

    name = "smoke"
    datasets = ["adult"]
    epsilons = [1.0]          # `inf` for a non-private run of a private method
    delta = 1e-5
    seeds = 2                 # a count (seeds 0..n-1) or an explicit list
    metrics = ["fidelity", "utility"]   # optional: default is, per cell, the metrics relevant to it
    headline = ["tstr_auroc", "marginal_tvd"]   # optional: the values the terminal summary shows
    references = ["dp-hflow"]   # optional: published figures `dpgym compare` checks the run against
                                # (leaderboard/references/NAME.toml)

    [metric_options.utility]  # optional: a metric's options (part of the cell key when given)
    classifiers = ["logistic_regression", "hist_gradient_boosting", "xgboost"]

    [[generators]]
    name = "independent"
    label = "independent-laplace"       # optional: tells two configurations apart
    params = { mechanism = "laplace" }

    [[generators]]
    name = "dp_hflow"
    epsilons = [1.0]          # optional: a part of the suite's grid (datasets, epsilons, seeds),
    datasets = ["adult"]      # for a method whose cells the run's budget cannot afford everywhere

    learners = ["nonprivate_lr", "dpsgd_lr"]   # optional: private learners (names or tables
                                               # like [[generators]]), run in the same grid

    [settings]                # optional: how the cells run; never part of a cell's key
    executor = "processes"    # serial | processes | dask
    workers = 2               # default: the number of cores
    timeout = "2h"            # wall clock per cell: seconds, or "90s", "30m", "2h"
    max_memory = "8GB"        # resident memory per cell (kB, MB, GB, KiB, MiB, GiB)
    device = "auto"           # auto | cpu | cuda
    scheduler = "tcp://host:8786"       # dask only: an existing cluster
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from dpgym.data.datafiles import CHECKOUT
from dpgym.engine.threads import cpu_count

SUITES_DIR = CHECKOUT / "leaderboard" / "suites"


class SuiteError(ValueError):
    """A suite file or CLI grid is malformed; the message names the field."""


@dataclass(frozen=True)
class MethodConfig:
    """One configured method of the grid: a generator, or a learner (`kind` = "learner")."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    kind: str = "generator"
    # The part of the suite's grid the method runs on, where not all of it (None: the suite's own
    # list). Not part of a cell's key: a cell is the same cell whichever part of a grid asked for it.
    datasets: tuple[str, ...] | None = None
    epsilons: tuple[float, ...] | None = None
    seeds: tuple[int, ...] | None = None

    @property
    def display(self) -> str:
        return self.label or self.name

    def part_of(self, suite: Suite) -> tuple[tuple[str, ...], tuple[float, ...], tuple[int, ...]]:
        """The suite's datasets, epsilons and seeds this method runs on, in the suite's order."""
        return tuple(tuple(v for v in getattr(suite, axis) if getattr(self, axis) is None or v in getattr(self, axis))
                     for axis in AXES)  # type: ignore[return-value]

    def restriction_dict(self) -> dict[str, list[Any]]:
        """The restricted axes as a suite file writes them (`inf` as "inf")."""
        raw = {axis: list(getattr(self, axis)) for axis in AXES if getattr(self, axis) is not None}
        if "epsilons" in raw:
            raw["epsilons"] = [e if math.isfinite(e) else "inf" for e in raw["epsilons"]]
        return raw

    def within(self, suite: Suite) -> MethodConfig:
        """This method with its restriction cut to what `suite`'s grid holds (a narrowed run)."""
        return replace(self, **{axis: tuple(v for v in getattr(self, axis) if v in getattr(suite, axis))
                                for axis in AXES if getattr(self, axis) is not None})


AXES = ("datasets", "epsilons", "seeds")


EXECUTORS = ("serial", "processes", "dask")
DEVICES = ("auto", "cpu", "cuda")
_MEMORY_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
                 "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_TIME_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Settings:
    """How a run executes (not what it computes): unset fields fall back to the defaults."""

    executor: str | None = None
    workers: int | None = None
    timeout: float | None = None  # seconds of wall clock per cell
    max_memory: int | None = None  # bytes of resident memory per cell
    device: str | None = None
    scheduler: str | None = None  # dask scheduler address

    def __post_init__(self) -> None:
        if self.executor is not None and self.executor not in EXECUTORS:
            raise SuiteError(f"executor must be one of {', '.join(EXECUTORS)}, got {self.executor!r}")
        if self.device is not None and self.device not in DEVICES:
            raise SuiteError(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.workers is not None and self.workers < 1:
            raise SuiteError(f"workers must be ≥ 1, got {self.workers}")
        if self.timeout is not None and not self.timeout > 0:
            raise SuiteError(f"timeout must be positive, got {self.timeout}")
        if self.max_memory is not None and not self.max_memory > 0:
            raise SuiteError(f"max_memory must be positive, got {self.max_memory}")

    def over(self, base: Settings) -> Settings:
        """These settings, falling back to `base` where unset (CLI over suite)."""
        return Settings(**{f.name: getattr(self, f.name) if getattr(self, f.name) is not None else getattr(base, f.name)
                           for f in fields(self)})

    def to_dict(self) -> dict[str, Any]:
        """As a suite file's [settings] (reads back with `settings_from_dict`): memory in bytes, "…B"."""
        raw = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        if "max_memory" in raw:
            raw["max_memory"] = f"{raw['max_memory']}B"
        return raw


DEFAULTS = Settings(executor="processes", device="auto")


@dataclass(frozen=True)
class Plan:
    """Resolved execution settings: what the run manifest records."""

    executor: str
    workers: int
    threads: int  # per worker
    timeout: float | None
    max_memory: int | None
    device: str
    scheduler: str | None

    @classmethod
    def resolve(cls, settings: Settings) -> Plan:
        s = settings.over(DEFAULTS)
        workers = s.workers or (1 if s.executor == "serial" else cpu_count())
        if s.scheduler and s.executor != "dask":
            raise SuiteError(f"a scheduler address is only used by the dask executor, not {s.executor!r}")
        return cls(s.executor, workers, max(1, cpu_count() // workers), s.timeout, s.max_memory, s.device,
                   s.scheduler)


def parse_memory(value: Any, where: str) -> int:
    """'8GB', '512MiB' (a unit is required: a bare number is ambiguous between bytes and MB)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]+)\s*", str(value))
    if not match or match.group(2).lower() not in _MEMORY_UNITS:
        raise SuiteError(f"{where}: max_memory {value!r} needs a unit, e.g. '8GB' or '512MiB'")
    return int(float(match.group(1)) * _MEMORY_UNITS[match.group(2).lower()])


def parse_timeout(value: Any, where: str) -> float:
    """Seconds as a number, or '90s', '30m', '2h', '1d'."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smhd]?)\s*", str(value))
    if not match or isinstance(value, bool):
        raise SuiteError(f"{where}: timeout {value!r} is not a duration (seconds, or e.g. '30m', '2h')")
    return float(match.group(1)) * _TIME_UNITS[match.group(2)]


def settings_from_dict(raw: dict[str, Any], where: str) -> Settings:
    allowed = {f.name for f in fields(Settings)}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise SuiteError(f"{where}: unknown keys {unknown} in [settings] (allowed: {', '.join(sorted(allowed))})")
    workers = raw.get("workers")
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool)):
        raise SuiteError(f"{where}: workers must be an integer, got {workers!r}")
    try:
        return Settings(
            executor=raw.get("executor"),
            workers=workers,
            timeout=parse_timeout(raw["timeout"], where) if "timeout" in raw else None,
            max_memory=parse_memory(raw["max_memory"], where) if "max_memory" in raw else None,
            device=raw.get("device"),
            scheduler=raw.get("scheduler"),
        )
    except SuiteError as err:
        if str(err).startswith(where):
            raise
        raise SuiteError(f"{where}: {err}") from None


@dataclass(frozen=True)
class Suite:
    name: str
    generators: tuple[MethodConfig, ...]
    datasets: tuple[str, ...]
    epsilons: tuple[float, ...]
    seeds: tuple[int, ...]
    delta: float = 1e-5
    metrics: tuple[str, ...] | None = None  # None: every installed metric
    settings: Settings = Settings()
    learners: tuple[MethodConfig, ...] = ()
    metric_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    headline: tuple[str, ...] | None = None  # metrics the terminal summary shows; None: dpgym's default few
    references: tuple[str, ...] = ()  # reference files (published figures) `dpgym compare` uses by default

    def __post_init__(self) -> None:
        for what in ("datasets", "epsilons", "seeds"):
            if not getattr(self, what):
                raise SuiteError(f"suite {self.name!r}: '{what}' is empty")
        if not self.generators and not self.learners:
            raise SuiteError(f"suite {self.name!r}: 'generators' is empty (and no 'learners')")
        labels = [g.display for g in (*self.generators, *self.learners)]
        dupes = sorted({x for x in labels if labels.count(x) > 1})
        if dupes:
            raise SuiteError(f"suite {self.name!r}: generators {dupes} appear twice; give each a distinct 'label'")
        for what in ("datasets", "epsilons", "seeds"):
            values = getattr(self, what)
            repeated = sorted({v for v in values if values.count(v) > 1}, key=str)
            if repeated:
                raise SuiteError(f"suite {self.name!r}: '{what}' lists {repeated} more than once")
        bad = [e for e in self.epsilons if not (e > 0)]
        if bad:
            raise SuiteError(f"suite {self.name!r}: epsilons must be positive (or inf), got {bad}")
        if not 0 <= self.delta < 1:
            raise SuiteError(f"suite {self.name!r}: delta must lie in [0, 1), got {self.delta}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "generators": [_config_dict(g) for g in self.generators],
            "datasets": list(self.datasets),
            "epsilons": [e if math.isfinite(e) else "inf" for e in self.epsilons],
            "delta": self.delta,
            "seeds": list(self.seeds),
            "metrics": list(self.metrics) if self.metrics is not None else None,
            "settings": self.settings.to_dict(),
            **({"metric_options": {k: dict(v) for k, v in self.metric_options.items()}} if self.metric_options else {}),
            **({"headline": list(self.headline)} if self.headline else {}),
            **({"references": list(self.references)} if self.references else {}),
            **({"learners": [_config_dict(g) for g in self.learners]} if self.learners else {}),
        }

    @property
    def configs(self) -> tuple[MethodConfig, ...]:
        """Every configured plugin of the grid: generators, then learners."""
        return (*self.generators, *self.learners)

    @property
    def size(self) -> int:
        """How many cells the grid holds: `dpgym.engine.grid.expand` makes one per method and dataset, ε and
        seed of its part of the grid."""
        return sum(math.prod(len(axis) for axis in method.part_of(self)) for method in self.configs)

    def narrowed(self, **axes: tuple[Any, ...]) -> Suite:
        """The suite on fewer datasets, epsilons or seeds (a run's command-line narrowing): each method's
        restriction cut to match, and a method left with no cell dropped."""
        suite = replace(self, **axes)
        kept = [m.within(suite) for m in self.configs]
        kept = [m for m in kept if all(m.part_of(suite))]
        return replace(suite, generators=tuple(m for m in kept if m.kind == "generator"),
                       learners=tuple(m for m in kept if m.kind == "learner"))

    def check_restrictions(self, where: str) -> None:
        """A method's part of the grid must lie in the suite's grid: a dataset or ε listed for a method
        alone would be a cell the suite does not name."""
        for method in self.configs:
            for axis in AXES:
                restriction = getattr(method, axis)
                if restriction is None:
                    continue
                outside = [v for v in restriction if v not in getattr(self, axis)]
                if outside or not restriction:
                    raise SuiteError(f"{where}: {method.kind} {method.display!r} lists {axis} {outside or '[]'}, "
                                     f"which must be a non-empty part of the suite's {axis} "
                                     f"{list(getattr(self, axis))}")

    def same_grid(self, other: dict[str, Any]) -> bool:
        """Whether `other` (a suite as `to_dict` writes it) asks for the same cells: the execution
        settings aside, which change where cells run, not what they compute."""
        return {**self.to_dict(), "settings": None} == {**other, "settings": None}


def _config_dict(method: MethodConfig) -> dict[str, Any]:
    return {"name": method.name, "label": method.label, "params": method.params, **method.restriction_dict()}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_seeds(value: Any, where: str) -> tuple[int, ...]:
    if _is_int(value):
        if value < 1:
            raise SuiteError(f"{where}: 'seeds' must be ≥ 1, got {value}")
        return tuple(range(value))
    if isinstance(value, list) and all(_is_int(s) and s >= 0 for s in value):
        return tuple(value)
    raise SuiteError(f"{where}: 'seeds' must be a count or a list of integers ≥ 0, got {value!r}")


def parse_epsilon(value: Any, where: str) -> float:
    if not isinstance(value, bool):
        try:
            return float(value)  # float("inf") reads "inf"
        except (TypeError, ValueError):
            pass
    raise SuiteError(f"{where}: {value!r} is not an epsilon (a positive number or inf)")


def _names(raw: dict[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    """A list of names (datasets, metrics); a bare string would otherwise split into letters."""
    value = raw.get(key)
    if value is None:
        return None
    if not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
        raise SuiteError(f"{where}: '{key}' must be a list of names, got {value!r}")
    return tuple(value)


def _list(raw: dict[str, Any], key: str, where: str) -> list[Any]:
    value = raw.get(key, [])
    if not isinstance(value, list):
        raise SuiteError(f"{where}: '{key}' must be a list, got {value!r}")
    return value


def suite_from_dict(raw: dict[str, Any], where: str) -> Suite:
    allowed = {"name", "description", "generators", "learners", "datasets", "epsilons", "delta", "seeds", "metrics",
               "settings", "metric_options", "headline", "references"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise SuiteError(f"{where}: unknown keys {unknown} (allowed: {', '.join(sorted(allowed))})")
    metrics = _names(raw, "metrics", where)
    delta = raw.get("delta", 1e-5)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)):
        raise SuiteError(f"{where}: 'delta' must be a number, got {delta!r}")
    if not isinstance(raw.get("settings", {}), dict):
        raise SuiteError(f"{where}: 'settings' must be a table [settings], got {raw['settings']!r}")
    suite = Suite(
        name=str(raw.get("name", where)),
        generators=_configs(raw, "generators", where),
        learners=_configs(raw, "learners", where),
        datasets=_names(raw, "datasets", where) or (),
        epsilons=tuple(parse_epsilon(e, where) for e in _list(raw, "epsilons", where)),
        seeds=parse_seeds(raw.get("seeds", 1), where),
        delta=float(delta),
        metrics=metrics,
        settings=settings_from_dict(raw.get("settings", {}), where),
        metric_options=_metric_options(raw.get("metric_options", {}), list(metrics) if metrics is not None else None,
                                       where),
        headline=_names(raw, "headline", where),
        references=_names(raw, "references", where) or (),
    )
    suite.check_restrictions(where)
    return suite


def _metric_options(raw: Any, metrics: list[str] | None, where: str) -> dict[str, dict[str, Any]]:
    """`[metric_options.NAME]` tables; each must name a metric the suite runs."""
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise SuiteError(f"{where}: 'metric_options' must be tables [metric_options.NAME] of option = value")
    if metrics is not None:
        stray = sorted(set(raw) - set(metrics))
        if stray:
            raise SuiteError(f"{where}: metric_options for {stray}, which the suite's metrics {metrics} do not include")
    return {name: dict(options) for name, options in raw.items()}


def _configs(raw: dict[str, Any], what: str, where: str) -> tuple[MethodConfig, ...]:
    """`[[generators]]` / `[[learners]]` tables; learners may also be plain names."""
    configs = []
    for i, g in enumerate(_list(raw, what, where)):
        if what == "learners" and isinstance(g, str):
            g = {"name": g}
        if not isinstance(g, dict) or not isinstance(g.get("name"), str) or not g["name"]:
            raise SuiteError(f"{where}: {what}[{i}] needs a 'name' (a string)")
        extra = sorted(set(g) - {"name", "label", "params", *AXES})
        if extra:
            raise SuiteError(f"{where}: {what}[{i}] ({g['name']}) has unknown keys {extra}")
        if not isinstance(g.get("params", {}), dict) or not isinstance(g.get("label", ""), str):
            raise SuiteError(f"{where}: {what}[{i}] ({g['name']}): 'params' must be a table and 'label' a string")
        here = f"{where}: {what}[{i}] ({g['name']})"
        configs.append(MethodConfig(
            g["name"], dict(g.get("params", {})), g.get("label", ""), kind="learner" if what == "learners" else "generator",
            datasets=_names(g, "datasets", here),
            epsilons=tuple(parse_epsilon(e, here) for e in _list(g, "epsilons", here)) if "epsilons" in g else None,
            seeds=parse_seeds(g["seeds"], here) if "seeds" in g else None))
    return tuple(configs)


def load_suite(name_or_path: str) -> Suite:
    """A suite by name (``leaderboard/suites/NAME.toml``) or by file path."""
    path = Path(name_or_path)
    if not path.is_file():
        path = SUITES_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in SUITES_DIR.glob("*.toml"))
        raise SuiteError(f"no suite file {name_or_path!r} (known suites: {', '.join(known)})")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise SuiteError(f"{path}: {err}") from None
    if raw.get("metrics") == []:  # a run would score nothing; refused here, not in run.json's copy of a suite
        raise SuiteError(f"{path}: 'metrics' is empty; list the metrics to run, or leave it out to run every "
                         "installed one")
    return suite_from_dict(raw, str(path))


def apply_overrides(suite: Suite, overrides: list[str]) -> Suite:
    """Apply ``generator.param=value`` overrides (value parsed as TOML, else a string); learners too."""
    generators = list(suite.configs)
    for item in overrides:
        key, sep, text = item.partition("=")
        target, dot, param = key.partition(".")
        if not (sep and dot and param):
            raise SuiteError(f"--set {item!r}: expected generator.param=value")
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text
        hits = [i for i, g in enumerate(generators) if target in (g.name, g.display)]
        if not hits:
            raise SuiteError(f"--set {item!r}: no generator {target!r} in the suite")
        for i in hits:
            g = generators[i]
            generators[i] = replace(g, params={**g.params, param: value})
    return replace(suite, generators=tuple(generators[:len(suite.generators)]),
                   learners=tuple(generators[len(suite.generators):]))
