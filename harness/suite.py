"""Suites: the grid a run covers (generators × datasets × ε × seeds), read from TOML or the CLI.

A suite file (``leaderboard/suites/NAME.toml``)::

    name = "smoke"
    datasets = ["adult"]
    epsilons = [1.0]          # `inf` for a non-private run of a private method
    delta = 1e-5
    seeds = 2                 # a count (seeds 0..n-1) or an explicit list
    metrics = ["fidelity", "utility"]   # optional: default is every installed metric

    [[generators]]
    name = "independent"
    label = "independent-laplace"       # optional: tells two configurations apart
    params = { mechanism = "laplace" }
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUITES_DIR = Path(__file__).resolve().parent.parent / "leaderboard" / "suites"


class SuiteError(ValueError):
    """A suite file or CLI grid is malformed; the message names the field."""


@dataclass(frozen=True)
class GeneratorConfig:
    name: str
    params: dict[str, Any] = field(default_factory=dict)
    label: str = ""

    @property
    def display(self) -> str:
        return self.label or self.name


@dataclass(frozen=True)
class Suite:
    name: str
    generators: tuple[GeneratorConfig, ...]
    datasets: tuple[str, ...]
    epsilons: tuple[float, ...]
    seeds: tuple[int, ...]
    delta: float = 1e-5
    metrics: tuple[str, ...] | None = None  # None: every installed metric

    def __post_init__(self) -> None:
        for what in ("generators", "datasets", "epsilons", "seeds"):
            if not getattr(self, what):
                raise SuiteError(f"suite {self.name!r}: '{what}' is empty")
        labels = [g.display for g in self.generators]
        dupes = sorted({x for x in labels if labels.count(x) > 1})
        if dupes:
            raise SuiteError(f"suite {self.name!r}: generators {dupes} appear twice; give each a distinct 'label'")
        bad = [e for e in self.epsilons if not (e > 0)]
        if bad:
            raise SuiteError(f"suite {self.name!r}: epsilons must be positive (or inf), got {bad}")
        if not 0 <= self.delta < 1:
            raise SuiteError(f"suite {self.name!r}: delta must lie in [0, 1), got {self.delta}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "generators": [{"name": g.name, "label": g.label, "params": g.params} for g in self.generators],
            "datasets": list(self.datasets),
            "epsilons": [e if math.isfinite(e) else "inf" for e in self.epsilons],
            "delta": self.delta,
            "seeds": list(self.seeds),
            "metrics": list(self.metrics) if self.metrics is not None else None,
        }


def parse_seeds(value: Any, where: str) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise SuiteError(f"{where}: 'seeds' must be ≥ 1, got {value}")
        return tuple(range(value))
    if isinstance(value, list) and all(isinstance(s, int) for s in value):
        return tuple(value)
    raise SuiteError(f"{where}: 'seeds' must be a count or a list of integers, got {value!r}")


def parse_epsilon(value: Any, where: str) -> float:
    try:
        return float(value)  # float("inf") reads "inf"
    except (TypeError, ValueError):
        raise SuiteError(f"{where}: {value!r} is not an epsilon (a positive number or inf)") from None


def suite_from_dict(raw: dict[str, Any], where: str) -> Suite:
    allowed = {"name", "description", "generators", "datasets", "epsilons", "delta", "seeds", "metrics"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise SuiteError(f"{where}: unknown keys {unknown} (allowed: {', '.join(sorted(allowed))})")
    generators = []
    for i, g in enumerate(raw.get("generators", [])):
        if not isinstance(g, dict) or "name" not in g:
            raise SuiteError(f"{where}: generators[{i}] needs a 'name'")
        extra = sorted(set(g) - {"name", "label", "params"})
        if extra:
            raise SuiteError(f"{where}: generators[{i}] ({g['name']}) has unknown keys {extra}")
        generators.append(GeneratorConfig(g["name"], dict(g.get("params", {})), g.get("label", "")))
    metrics = raw.get("metrics")
    return Suite(
        name=str(raw.get("name", where)),
        generators=tuple(generators),
        datasets=tuple(raw.get("datasets", [])),
        epsilons=tuple(parse_epsilon(e, where) for e in raw.get("epsilons", [])),
        seeds=parse_seeds(raw.get("seeds", 1), where),
        delta=float(raw.get("delta", 1e-5)),
        metrics=tuple(metrics) if metrics is not None else None,
    )


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
    return suite_from_dict(raw, str(path))


def apply_overrides(suite: Suite, overrides: list[str]) -> Suite:
    """Apply ``generator.param=value`` overrides (value parsed as TOML, else a string)."""
    generators = list(suite.generators)
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
            generators[i] = GeneratorConfig(g.name, {**g.params, param: value}, g.label)
    return Suite(suite.name, tuple(generators), suite.datasets, suite.epsilons, suite.seeds, suite.delta, suite.metrics)
