"""What a plugin hands the harness: specs describing generators, learners, datasets and metrics."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd

from dpgym.privacy import Budget, Guarantee, Ledger
from dpgym.schema import ColumnKind, Schema


class SpecError(ValueError):
    """A plugin returned a malformed spec."""


def _fits_default(value: Any, default: Any) -> bool:
    """A switch takes a boolean and a number a number: `--set x.flag=False` arrives as the string
    "False", which is truthy. Other defaults (strings, None, lists) leave the check to the plugin."""
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True


def checked_params(kind: str, name: str, defaults: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults overridden by `params`, refusing unknown names and values of the wrong type."""
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise SpecError(f"{kind} {name!r}: unknown hyper-parameters {unknown} "
                        f"(it takes: {', '.join(sorted(defaults)) or 'none'})")
    wrong = [f"{key}={value!r} (the default is {defaults[key]!r})"
             for key, value in params.items() if not _fits_default(value, defaults[key])]
    if wrong:
        raise SpecError(f"{kind} {name!r}: hyper-parameters of the wrong type: {', '.join(wrong)}")
    return {**defaults, **params}


class Generator(Protocol):
    """A fitted-then-sampled synthetic data generator.

    `fit` sees the private training rows and must record every mechanism it runs on them in the
    returned ledger; `sample` is post-processing and must not touch the private rows again.
    Seeds are integers from the runner, one independent stream per call.
    """

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger: ...

    def sample(self, n: int, seed: int) -> pd.DataFrame: ...


class Model(Protocol):
    """A released model: real-valued scores for rows in schema form (higher = positive class)."""

    def decision_function(self, frame: pd.DataFrame) -> Any: ...


class Learner(Protocol):
    """A private learner: trains on the private training rows and releases ONE model.

    `fit` records every mechanism it runs on the rows in the returned ledger, as a generator does.
    `release` is the model that counts as the release. `evaluation_models(k, seed)` are extra
    models drawn from the same fitted mechanism for evaluation only (ExpM+NF: k flow draws;
    a learner with one model returns [release()]): publishing them would spend k·ε.
    """

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger: ...

    def release(self) -> Model: ...

    def evaluation_models(self, k: int, seed: int) -> list[Model]: ...


@dataclass(frozen=True)
class Split:
    """A dataset's fixed train/test split, both in schema form."""

    train: pd.DataFrame
    test: pd.DataFrame


@dataclass(frozen=True)
class GeneratorSpec:
    name: str
    version: str
    factory: Callable[..., Generator]  # called with the (validated) hyper-parameters as keywords
    guarantee: Guarantee
    defaults: Mapping[str, Any] = field(default_factory=dict)
    supports: frozenset[ColumnKind] = frozenset(ColumnKind)
    description: str = ""
    quick_params: Mapping[str, Any] = field(default_factory=dict)  # cheap settings for conformance checks
    # As for datasets: returns "" when the generator can run here, else one line saying how to make
    # it runnable (e.g. the command creating its own environment, `dpgym.isolation`). None: always.
    availability: Callable[[], str] | None = None

    def missing(self) -> str:
        """"" when the generator can run here, else how to make it runnable."""
        return self.availability() if self.availability else ""

    def build(self, params: Mapping[str, Any]) -> Generator:
        return self.factory(**checked_params("generator", self.name, self.defaults, params))


@dataclass(frozen=True)
class LearnerSpec:
    """A private learner: like a `GeneratorSpec`, but its cells release a model, scored by test AUC.

    A spec may offer `resolve(argument)` for ``name:argument`` variants (``via_synthetic:<generator>``).
    """

    name: str
    version: str
    factory: Callable[..., Learner]
    guarantee: Guarantee
    defaults: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    resolver: Callable[[str, Any], LearnerSpec] | None = None  # (argument, registry) -> variant

    def build(self, params: Mapping[str, Any], device: str | None = None) -> Learner:
        return self.factory(**checked_params("learner", self.name, self.defaults, params))

    @property
    def devices(self) -> frozenset[str]:
        return frozenset({"cpu"})

    def resolve(self, argument: str, registry: Any) -> LearnerSpec:
        if self.resolver is None:
            raise ValueError(f"learner {self.name!r} takes no ':' argument")
        return self.resolver(argument, registry)


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    version: str
    load: Callable[[], Split]  # returns the official split; rows are validated against `schema`
    schema: Callable[[], Schema]
    citation: str = ""
    license: str = ""
    checksum: str = ""  # sha256 over the data files, part of every cell's key
    description: str = ""
    # A cheap check for `dpgym list`: returns "" when the data can be loaded here, else one line
    # saying how to provide it. None: the files are vendored with the plugin.
    availability: Callable[[], str] | None = None

    def missing(self) -> str:
        """"" when the data can be loaded here, else how to provide them."""
        return self.availability() if self.availability else ""


class Direction(enum.StrEnum):
    HIGHER = "higher"
    LOWER = "lower"


@dataclass(frozen=True)
class MetricContext:
    """Everything a metric may look at; `synthetic` has as many rows as `train`."""

    train: pd.DataFrame
    test: pd.DataFrame
    synthetic: pd.DataFrame
    schema: Schema
    seed: int
    generator: Generator | None = None
    options: Mapping[str, Any] = field(default_factory=dict)  # the metric's options, defaults filled in


@dataclass(frozen=True)
class MetricResult:
    values: dict[str, float]
    detail: dict[str, Any] = field(default_factory=dict)  # e.g. per-classifier scores


@dataclass(frozen=True)
class MetricSpec:
    """One evaluator producing one or more named values, each with a direction."""

    name: str
    version: str
    evaluate: Callable[[MetricContext], MetricResult]
    directions: Mapping[str, Direction]  # value name -> which way is better
    description: str = ""
    requires_target: bool = False
    # Settings a suite may change under [metric_options.NAME] (e.g. a cheaper classifier zoo for a
    # CI grid); changed options enter the cell key. `validate_options` may refuse bad values.
    options: Mapping[str, Any] = field(default_factory=dict)
    validate_options: Callable[[Mapping[str, Any]], None] | None = None

    def resolve_options(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The defaults overridden by `given`; unknown names or refused values are a SpecError."""
        unknown = sorted(set(given) - set(self.options))
        if unknown:
            raise SpecError(f"metric {self.name!r}: unknown options {unknown} "
                            f"(it takes: {', '.join(sorted(self.options)) or 'none'})")
        resolved = {**self.options, **given}
        if self.validate_options:
            try:
                self.validate_options(resolved)
            except ValueError as err:
                raise SpecError(f"metric {self.name!r}: {err}") from None
        return resolved


SPEC_TYPES = {"generator": GeneratorSpec, "learner": LearnerSpec, "dataset": DatasetSpec, "metric": MetricSpec}
