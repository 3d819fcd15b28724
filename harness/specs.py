"""What a plugin hands the harness: specs describing generators, learners, datasets and metrics."""

from __future__ import annotations

import enum
import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd

from dpgym.privacy.budget import Budget, Guarantee
from dpgym.privacy.ledger import Ledger
from dpgym.schema import Schema


class SpecError(ValueError):
    """A plugin returned a malformed spec."""


@dataclass(frozen=True)
class Deferred:
    """A callable named by ``"module:attribute"`` and imported on its first call.

    A plugin's entry-point module is imported whenever plugins are discovered (`dpgym list`, a
    typo in a generator's name, `--dry-run`); a spec whose `factory` (or a metric's `compute`, a
    dataset's `load`) is a `Deferred` keeps its model code, and the torch or JAX that code imports,
    out of that module until a cell really builds the model.
    """

    reference: str

    def __post_init__(self) -> None:
        module, colon, attribute = self.reference.partition(":")
        if not (module and colon and attribute):
            raise SpecError(f"Deferred({self.reference!r}): expected 'package.module:attribute'")

    def resolve(self) -> Callable[..., Any]:
        module, _, attribute = self.reference.partition(":")
        target: Any = importlib.import_module(module)
        for part in attribute.split("."):
            target = getattr(target, part)
        return target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)


class Capability(enum.StrEnum):
    """What a generator or learner can do beyond the required protocol, declared in its spec so the
    harness never has to guess from attributes or hyper-parameter names."""

    # Its factory takes `device` ("cpu" or "cuda"): the harness resolves the run's --device (or the
    # suite's `device` hyper-parameter, listed with default "auto") and passes the result.
    DEVICE = "device"
    # The fitted generator is a `DensityModel`: metrics get it as `MetricContext.density`.
    LOG_PROB = "log_prob"
    # The fitted learner is an `AuditedLearner`: its findings join the harness's privacy audit.
    AUDIT_FINDINGS = "audit_findings"
    # Fit reads no training row (only the schema), so an empty ledger is its whole spend. Without
    # it, a `formal` or `pure` method whose ledger records no mechanism is refused: an empty ledger
    # would otherwise rank a method that trained on the rows at ε = 0. The conformance checks hold
    # the declaration to behaviour (two different training tables give the same samples).
    READS_NO_ROWS = "reads_no_rows"
    # The fitted generator is a `ReleasingGenerator`: it exposes what its mechanism released before
    # post-processing, which the white-box audit attacks (`dpgym audit --white-box`). The conformance
    # checks hold the release to the ledger (its scales imply no more than the ε charged; its noise
    # has the scale it declares).
    RELEASE = "release"


def _declared_capabilities(kind: str, name: str, capabilities: frozenset[Capability],
                           defaults: Mapping[str, Any]) -> tuple[frozenset[Capability], dict[str, Any]]:
    """Checked capabilities, and the defaults with `device` listed (default "auto") for a method that
    declares `Capability.DEVICE`: the device is set like any hyper-parameter, but the harness owns it."""
    capabilities = frozenset(Capability(c) for c in capabilities)
    defaults = dict(defaults)
    if Capability.DEVICE in capabilities:
        defaults.setdefault("device", "auto")
    elif "device" in defaults:
        raise SpecError(f"{kind} {name!r}: a 'device' hyper-parameter is the harness's to set; "
                        "declare capabilities={Capability.DEVICE} instead of listing it in the defaults")
    return capabilities, defaults


def _fits_default(value: Any, default: Any) -> bool:
    """A switch takes a boolean, a count an integer and a real number a number: `--set x.flag=False`
    arrives as the string "False", which is truthy, and `numeric_bins=2.5` would fail only at fit.
    Other defaults (strings, None, lists) leave the check to the plugin."""
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
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


class SpecLookup(Protocol):
    """What a `resolve` function may ask of the registry: the specs of other installed plugins."""

    def generator(self, name: str) -> GeneratorSpec: ...

    def learner(self, name: str) -> LearnerSpec: ...

    def dataset(self, name: str) -> DatasetSpec: ...

    def metric(self, name: str) -> MetricSpec: ...


class DensityModel(Protocol):
    """A fitted generator that evaluates its density (declared by `Capability.LOG_PROB`).

    `log_prob` returns one log-density per row of `frame` (schema form), -inf where the model puts
    no mass. It may also have `density_columns: list[str]`, the numeric columns its density is over
    when that is not all of them (a column it models as a probability mass is left out).
    """

    def log_prob(self, frame: pd.DataFrame) -> Any: ...


class ReleasingGenerator(Protocol):
    """A fitted generator that exposes its mechanism's release (declared by `Capability.RELEASE`).

    `release()` returns the `dpgym.Release` of the last fit: every noisy measurement it made on the
    training rows, before any post-processing (clipping, normalising, model fitting), with the query
    and the noise, so that the likelihood of the release under any table can be computed. Only
    what the fit released anyway: calling it runs no mechanism and reads no row.
    """

    def release(self) -> Any: ...


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


class AuditedLearner(Learner, Protocol):
    """A fitted learner that adds its own checks to the privacy audit (declared by
    `Capability.AUDIT_FINDINGS`): `audit_findings` gets the real split, the schema, the budget and
    the test AUCs of its evaluation models, and returns `dpgym.Finding`s."""

    def audit_findings(self, split: Split, schema: Schema, budget: Budget, real_aucs: Any) -> list[Any]: ...


@dataclass(frozen=True)
class Split:
    """A dataset's fixed train/test split, both in schema form."""

    train: pd.DataFrame
    test: pd.DataFrame


@dataclass(frozen=True)
class GeneratorSpec:
    """A synthetic-data generator: a factory taking its hyper-parameters as keywords, every one of
    them listed with its default in `defaults`, and the guarantee its ledger will state."""

    name: str
    version: str
    factory: Callable[..., Generator]  # called with the (validated) hyper-parameters as keywords
    guarantee: Guarantee
    defaults: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    quick_params: Mapping[str, Any] = field(default_factory=dict)  # cheap settings for conformance checks
    capabilities: frozenset[Capability] = frozenset()
    # As for datasets: returns "" when the generator can run here, else one line saying how to make
    # it runnable (e.g. the command creating its own environment, `dpgym.engine.isolation`). None: always.
    availability: Callable[[], str] | None = None

    def __post_init__(self) -> None:
        capabilities, defaults = _declared_capabilities("generator", self.name, self.capabilities, self.defaults)
        object.__setattr__(self, "capabilities", capabilities)
        object.__setattr__(self, "defaults", defaults)

    def missing(self) -> str:
        """"" when the generator can run here, else how to make it runnable."""
        return self.availability() if self.availability else ""

    def build(self, params: Mapping[str, Any]) -> Generator:
        return self.factory(**checked_params("generator", self.name, self.defaults, params))


@dataclass(frozen=True)
class LearnerSpec:
    """A private learner: like a `GeneratorSpec`, but its cells release a model, scored by test AUC.

    `resolve`, when given, builds the spec of a ``NAME:ARGUMENT`` variant, as for datasets
    (``via_synthetic:<generator>`` looks the generator up in the registry it is handed).
    """

    name: str
    version: str
    factory: Callable[..., Learner]
    guarantee: Guarantee
    defaults: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    quick_params: Mapping[str, Any] = field(default_factory=dict)  # cheap settings for conformance checks
    capabilities: frozenset[Capability] = frozenset()
    resolve: Callable[[str, SpecLookup], LearnerSpec] | None = None  # (argument, registry) -> the variant's spec

    def __post_init__(self) -> None:
        capabilities, defaults = _declared_capabilities("learner", self.name, self.capabilities, self.defaults)
        object.__setattr__(self, "capabilities", capabilities)
        object.__setattr__(self, "defaults", defaults)

    def build(self, params: Mapping[str, Any]) -> Learner:
        return self.factory(**checked_params("learner", self.name, self.defaults, params))


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    version: str
    load: Callable[[], Split]  # returns the official split; rows are validated against `schema`
    schema: Callable[[], Schema]
    citation: str = ""
    license: str = ""
    checksum: str = ""  # sha256 over the data files, part of every cell's key
    # What makes two specs one dataset wherever its files lie: the files' checksum and the options
    # that change the rows, never a path. Cell keys and seeds derive from it. Empty: the name.
    identity: str = ""
    description: str = ""
    # A cheap check for `dpgym list`: returns "" when the data can be loaded here, else one line
    # saying how to provide it. None: the files are vendored with the plugin.
    availability: Callable[[], str] | None = None
    # Builds the spec of ``NAME:ARGUMENT`` (e.g. ``lifesci:fold=3``, ``csv:data.csv``) from the
    # argument and the registry; raises ValueError, saying what is wrong, on an argument it cannot use.
    # The registry lists the spec under its plain name and asks it when it meets a name with a ``:``.
    resolve: Callable[[str, SpecLookup], DatasetSpec] | None = None

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
    # The fitted generator again, when its spec declares `Capability.LOG_PROB`; else None.
    density: DensityModel | None = None
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
    # Scores only generators that declare `Capability.LOG_PROB` (held-out likelihood): a run that
    # names no metrics leaves it out of the other generators' cells.
    requires_log_prob: bool = False
    # False for a metric whose values do not depend on the generator (e.g. a private baseline computed
    # from the real rows alone): a run that names no metrics leaves it out, since every generator's row
    # would repeat the same numbers; name it with --metrics or in the suite to run it.
    depends_on_generator: bool = True
    # Settings a suite may change under [metric_options.NAME] (e.g. a cheaper classifier zoo for a
    # CI grid); changed options enter the cell key. `validate_options` may refuse bad values.
    options: Mapping[str, Any] = field(default_factory=dict)
    validate_options: Callable[[Mapping[str, Any]], None] | None = None
    # Whether a run that names no metrics runs this one. Off unless the metric is cheap and answers
    # what every benchmark compares: dpgym's own default set is fidelity, utility and privacy.
    default: bool = False
    # The one value that stands for this metric's family in the overall ranking (docs/leaderboard.md):
    # every family with a ranked value weighs the same there, however many values it reports. None
    # keeps the metric's values beside the ranking, as columns, without ranking them.
    ranked_value: str | None = None

    def __post_init__(self) -> None:
        if self.ranked_value is not None and self.ranked_value not in self.directions:
            raise SpecError(f"metric {self.name!r}: ranked_value {self.ranked_value!r} is not one of its values "
                            f"({', '.join(sorted(self.directions))})")

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


@dataclass(frozen=True)
class CellInfo:
    """A cell as observer hooks see it: what runs (`kind` "generator" or "learner", `method` its
    label in the suite), on which dataset, at which budget and seed."""

    key: str
    kind: str
    method: str
    dataset: str
    epsilon: float
    delta: float
    seed: int

    def to_dict(self) -> dict[str, Any]:
        """As result.json records it (JSON has no infinity: ε = ∞ is written "inf")."""
        return {"key": self.key, "kind": self.kind, "method": self.method, "dataset": self.dataset,
                "epsilon": "inf" if math.isinf(self.epsilon) else self.epsilon, "delta": self.delta, "seed": self.seed}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CellInfo:
        return cls(raw.get("key", ""), raw.get("kind", "generator"), raw["method"], raw["dataset"],
                   float(raw["epsilon"]), float(raw["delta"]), int(raw["seed"]))


@dataclass(frozen=True)
class CellResult:
    """A finished cell as observer hooks see it. `status` is "ok", "failed" or "unavailable";
    `error` (stage, type, message) is set unless it is "ok"; `record` is the whole result.json."""

    status: str
    metrics: Mapping[str, float]
    timings: Mapping[str, float]
    peak_rss_mb: float
    error: Mapping[str, Any] | None
    record: Mapping[str, Any]

    @classmethod
    def of(cls, result: Mapping[str, Any]) -> CellResult:
        return cls(status=result["status"], metrics=result.get("metrics", {}), timings=result.get("timings", {}),
                   peak_rss_mb=result.get("peak_rss_mb", 0.0), error=result.get("error"), record=result)


SPEC_TYPES = {"generator": GeneratorSpec, "learner": LearnerSpec, "dataset": DatasetSpec, "metric": MetricSpec}
