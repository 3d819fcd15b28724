"""Conformance checks a plugin must pass, runnable by its author: for generators, learners,
datasets and metrics.

Two ways to run them:

- from the command line, on any installed plugin (generator, learner, dataset or metric):
  ``pytest --dpgym-conformance=NAME[,NAME...] [--dpgym-params='{"epochs": 1}']``
  (this module is a pytest plugin, registered through the ``pytest11`` entry point);
- inside a test suite, like scikit-learn's ``parametrize_with_checks``::

      @pytest.mark.parametrize("check", conformance_checks("my_generator"), ids=str)
      def test_conformance(check):
          check()

Generator and learner checks fit on a small mixed-type table (`conformance_table`) under a finite
budget, with the spec's ``quick_params`` (cheap settings its author declares) and any overrides.
Metric checks score that table against two others drawn alike, with the metric's options (the
overrides, if given, are its options). Dataset checks load the dataset; they skip, saying why,
where its files are not here.
"""

from __future__ import annotations

import json
import math
import pickle
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpgym.privacy.budget import Budget
from dpgym.privacy.ledger import Ledger
from dpgym.privacy.reaccount import reaccount
from dpgym.engine.cell import ledger_contradiction
from dpgym.schema import Column, ColumnKind, Schema
from dpgym.specs import (
    Capability,
    DatasetSpec,
    GeneratorSpec,
    LearnerSpec,
    MetricContext,
    MetricResult,
    MetricSpec,
    SpecError,
    Split,
)

Spec = GeneratorSpec | LearnerSpec | DatasetSpec | MetricSpec

BUDGET = Budget(1.0, 1e-5)

CONFORMANCE_SCHEMA = Schema(
    name="conformance",
    target="label",
    columns=(
        Column("age", ColumnKind.INTEGER, min=18, max=90),
        Column("income", ColumnKind.CONTINUOUS, min=0.0, max=200_000.0),
        Column("colour", ColumnKind.CATEGORICAL, categories=("red", "green", "blue", "other")),
        Column("grade", ColumnKind.ORDINAL, categories=("low", "mid", "high")),
        Column("member", ColumnKind.BINARY, categories=("no", "yes")),
        Column("label", ColumnKind.BINARY, categories=("neg", "pos")),
    ),
)


def conformance_table(rows: int = 400, seed: int = 0) -> pd.DataFrame:
    """A small table in `CONFORMANCE_SCHEMA` form whose label depends on the other columns."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 91, rows)
    income = np.clip(rng.lognormal(10.5, 0.6, rows), 0, 200_000)
    grade = rng.integers(0, 3, rows)
    score = (age - 50) / 20 + np.log(income + 1) - 10.5 + grade - 1 + rng.normal(0, 0.5, rows)
    frame = pd.DataFrame({
        "age": age,
        "income": income,
        "colour": rng.choice(["red", "green", "blue", "other"], rows, p=[0.4, 0.3, 0.2, 0.1]),
        "grade": np.array(["low", "mid", "high"])[grade],
        "member": rng.choice(["no", "yes"], rows),
        "label": np.where(score > 0, "pos", "neg"),
    })
    return CONFORMANCE_SCHEMA.conform(frame, "conformance table")


@dataclass(frozen=True)
class Subject:
    """A plugin's spec with the hyper-parameters (a metric: the options) the checks use."""

    spec: Spec
    params: Mapping[str, Any] = field(default_factory=dict)

    def build(self, **extra: Any):
        return self.spec.build({**self.spec.quick_params, **self.params, **extra})

    def fitted(self, train: pd.DataFrame | None = None, seed: int = 0, **extra: Any):
        generator = self.build(**extra)
        ledger = generator.fit(conformance_table() if train is None else train, CONFORMANCE_SCHEMA, BUDGET, seed)
        return generator, ledger


def _valid_sample(generator: Any, n: int, seed: int, name: str) -> pd.DataFrame:
    frame = generator.sample(n, seed)
    assert len(frame) == n, f"{name}: sample({n}) returned {len(frame)} rows"
    return CONFORMANCE_SCHEMA.conform(frame, f"samples of {name}")


def check_ledger_within_budget(subject: Subject) -> None:
    """fit returns a ledger with the declared guarantee that re-accounts within the budget."""
    _, ledger = subject.fitted()
    name = subject.spec.name
    assert isinstance(ledger, Ledger), f"{name}: fit() returned {type(ledger).__name__}, not a Ledger"
    assert ledger.guarantee is subject.spec.guarantee, (
        f"{name}: declares guarantee {subject.spec.guarantee} but its ledger says {ledger.guarantee}")
    contradiction = ledger_contradiction(ledger, subject.spec)
    assert not contradiction, f"{name}: {contradiction}"
    ledger.check_within(BUDGET)
    check = reaccount(ledger, BUDGET)
    assert check.verdict == "ok", f"{name}: independent re-accounting says {check.verdict}: {check.detail}"


def check_ledger_does_not_depend_on_the_rows(subject: Subject) -> None:
    """Tables that differ in one row give the same ledger: it is published with the cell, so a value
    computed from the rows without a mechanism (a final training loss, a count) would leak. Two
    neighbours of each kind: one row replaced, and one row removed (the accountants' add/remove
    adjacency) compared with another row, unlike it in every discrete column, removed. The row count is public
    (docs/privacy.md), so the ledger may depend on it, and the two removals keep it equal."""
    table = conformance_table()
    replaced = table.copy()
    flipped = "neg" if table.loc[0, "label"] == "pos" else "pos"
    replaced.loc[0, ["income", "colour", "label"]] = [1_000.0, "other", flipped]
    discrete = ["colour", "grade", "member", "label"]
    other = int((table[discrete] != table.loc[0, discrete]).sum(axis=1).to_numpy().argmax())  # unlike row 0
    removed = [table.drop(index=row).reset_index(drop=True) for row in (0, other)]
    for kind, frames in (("changes", (table, replaced)), ("is removed", removed)):
        ledgers = [subject.fitted(train=CONFORMANCE_SCHEMA.conform(frame), seed=0)[1].to_dict() for frame in frames]
        assert ledgers[0] == ledgers[1], f"{subject.spec.name}: the ledger changes with which training row {kind}"


def check_reads_no_rows(subject: Subject) -> None:
    """A generator declaring `Capability.READS_NO_ROWS` gives the same samples after fitting on two
    unrelated tables: its empty ledger is then its whole spend."""
    if Capability.READS_NO_ROWS not in subject.spec.capabilities:
        pytest.skip(f"{subject.spec.name} does not declare that it reads no rows")
    tables = (conformance_table(seed=0), conformance_table(rows=150, seed=1))
    samples = [_valid_sample(subject.fitted(train=table, seed=0)[0], 200, 1, subject.spec.name) for table in tables]
    assert samples[0].equals(samples[1]), (
        f"{subject.spec.name}: declares that it reads no training rows, but its samples change with them")


def check_samples_match_schema(subject: Subject) -> None:
    """Samples have the schema's columns, kinds, categories and bounds."""
    generator, _ = subject.fitted()
    _valid_sample(generator, 300, 1, subject.spec.name)


def check_empty_sample(subject: Subject) -> None:
    """sample(0) is an empty frame in schema form: asking for no rows is not an error."""
    generator, _ = subject.fitted()
    _valid_sample(generator, 0, 1, subject.spec.name)


def check_deterministic_under_seed(subject: Subject) -> None:
    """The same seeds give the same rows."""
    first = _valid_sample(subject.fitted(seed=3)[0], 200, 4, subject.spec.name)
    second = _valid_sample(subject.fitted(seed=3)[0], 200, 4, subject.spec.name)
    pd.testing.assert_frame_equal(first, second, obj=f"{subject.spec.name} samples under one seed")


def check_seed_changes_samples(subject: Subject) -> None:
    """Different sampling seeds give different rows (a generator must not ignore its seed)."""
    generator, _ = subject.fitted()
    a, b = _valid_sample(generator, 200, 1, subject.spec.name), _valid_sample(generator, 200, 2, subject.spec.name)
    assert not a.equals(b), f"{subject.spec.name}: sample() ignores its seed"


def check_one_row_table(subject: Subject) -> None:
    """A one-row training table is handled (fit, then valid samples)."""
    generator, _ = subject.fitted(train=conformance_table().iloc[:1].reset_index(drop=True))
    _valid_sample(generator, 20, 1, subject.spec.name)


def check_constant_columns(subject: Subject) -> None:
    """Constant numeric and categorical columns are handled."""
    table = conformance_table().assign(income=50_000.0, colour="blue")
    generator, _ = subject.fitted(train=CONFORMANCE_SCHEMA.conform(table))
    _valid_sample(generator, 100, 1, subject.spec.name)


def check_unknown_hyper_parameter_refused(subject: Subject) -> None:
    """An unknown hyper-parameter is an error naming it."""
    with pytest.raises(SpecError, match="no_such_hyper_parameter"):
        subject.build(no_such_hyper_parameter=1)


def check_pickles(subject: Subject) -> None:
    """A fitted generator pickles and samples the same after unpickling (so it can cross processes)."""
    generator, _ = subject.fitted()
    clone = pickle.loads(pickle.dumps(generator))
    pd.testing.assert_frame_equal(_valid_sample(generator, 100, 5, subject.spec.name),
                                  _valid_sample(clone, 100, 5, subject.spec.name))


def check_device_flag(subject: Subject) -> None:
    """A generator that declares `Capability.DEVICE` runs with device="cpu"."""
    if Capability.DEVICE not in subject.spec.capabilities:
        pytest.skip(f"{subject.spec.name} does not declare the device capability")
    generator, _ = subject.fitted(device="cpu")
    _valid_sample(generator, 50, 1, subject.spec.name)


def check_log_prob(subject: Subject) -> None:
    """A generator that declares `Capability.LOG_PROB` gives one log-density per row, finite on
    its own samples, and the same values twice."""
    if Capability.LOG_PROB not in subject.spec.capabilities:
        pytest.skip(f"{subject.spec.name} does not declare the log_prob capability")
    generator, _ = subject.fitted()
    rows = _valid_sample(generator, 100, 1, subject.spec.name)
    first, second = (np.asarray(generator.log_prob(rows), dtype=float) for _ in range(2))
    assert first.shape == (len(rows),), f"{subject.spec.name}: log_prob gave shape {first.shape} for {len(rows)} rows"
    assert np.isfinite(first).all(), f"{subject.spec.name}: log_prob is not finite on the generator's own samples"
    np.testing.assert_array_equal(first, second, err_msg=f"{subject.spec.name}: log_prob differs between two calls")


def check_release_matches_ledger(subject: Subject) -> None:
    """A generator that declares `Capability.RELEASE` releases what its ledger pays for: its
    measurements' declared scales and sensitivities imply no more than the ε charged; each query
    moves by at most its declared sensitivity when one row is added; and the noise in the values
    (values − the query on the training rows) has the declared scale, within a factor of 1.5 (it
    checks a calibration error, such as σ a few times too small, not the noise's exact law)."""
    from dpgym.privacy.release import Release

    if Capability.RELEASE not in subject.spec.capabilities:
        pytest.skip(f"{subject.spec.name} does not declare the release capability")
    name, table = subject.spec.name, conformance_table()
    generator, ledger = subject.fitted(train=table)
    release = generator.release()
    assert isinstance(release, Release), f"{name}: release() returned {type(release).__name__}, not a dpgym.Release"
    assert release.measurements, f"{name}: release() holds no measurement after a fit at ε = {BUDGET.epsilon}"
    implied = release.epsilon(BUDGET.delta)
    assert implied <= ledger.epsilon * (1 + 1e-6), (
        f"{name}: its release's scales and sensitivities imply ε = {implied:.4g}, more than the {ledger.epsilon:.4g} "
        "its ledger charges")
    for m in release.measurements:
        exact = np.asarray(m.query(table), dtype=float)
        assert exact.shape == np.shape(m.values), f"{name}: {m.description}: the query's shape is not its values'"
        order = 2 if m.noise == "gaussian" else 1
        for row in range(5):
            added = CONFORMANCE_SCHEMA.conform(pd.concat([table, table.iloc[[row]]], ignore_index=True))
            moved = float(np.linalg.norm((np.asarray(m.query(added), dtype=float) - exact).ravel(), ord=order))
            assert moved <= m.sensitivity + 1e-9, (
                f"{name}: {m.description}: one added row moves the query by {moved:.4g} (L{order}), more than its "
                f"declared sensitivity {m.sensitivity:.4g}")
    residual = np.concatenate([(np.asarray(m.values, dtype=float) - np.asarray(m.query(table), dtype=float)).ravel()
                               / (m.scale if m.noise == "gaussian" else m.scale * math.sqrt(2))
                               for m in release.measurements])
    if len(residual) >= 30:
        spread = float(np.sqrt(np.mean(residual**2)))
        assert 1 / 1.5 <= spread <= 1.5, (
            f"{name}: the noise in its release is {spread:.3g} times the scale it declares; its ledger charges for "
            "the declared scale")


CHECKS: tuple[Callable[[Subject], None], ...] = (
    check_ledger_within_budget, check_ledger_does_not_depend_on_the_rows, check_reads_no_rows, check_samples_match_schema,
    check_empty_sample, check_deterministic_under_seed, check_seed_changes_samples, check_one_row_table, check_constant_columns,
    check_unknown_hyper_parameter_refused, check_pickles, check_device_flag, check_log_prob, check_release_matches_ledger,
)


# --- learners -----------------------------------------------------------------------------------


def _learner_scores(learner: Any, test: pd.DataFrame, name: str) -> np.ndarray:
    scores = np.asarray(learner.release().decision_function(test), dtype=float)
    assert scores.shape == (len(test),), f"{name}: release().decision_function gave shape {scores.shape} for {len(test)} rows"
    assert np.isfinite(scores).all(), f"{name}: release().decision_function gave non-finite scores"
    return scores


def check_learner_releases_a_model(subject: Subject) -> None:
    """The released model scores every test row with a finite number, and the evaluation draws
    are at least one model and at most the number asked for."""
    learner, _ = subject.fitted()
    test = conformance_table(200, seed=1)
    _learner_scores(learner, test, subject.spec.name)
    models = learner.evaluation_models(3, 0)
    assert 1 <= len(models) <= 3, f"{subject.spec.name}: evaluation_models(3, 0) returned {len(models)} models"
    for model in models:
        assert len(np.asarray(model.decision_function(test))) == len(test)


def check_learner_deterministic_under_seed(subject: Subject) -> None:
    """The same seed gives the same released model."""
    test = conformance_table(200, seed=1)
    first = _learner_scores(subject.fitted(seed=3)[0], test, subject.spec.name)
    second = _learner_scores(subject.fitted(seed=3)[0], test, subject.spec.name)
    np.testing.assert_array_equal(first, second, err_msg=f"{subject.spec.name}: released model under one seed")


LEARNER_CHECKS: tuple[Callable[[Subject], None], ...] = (
    check_ledger_within_budget, check_ledger_does_not_depend_on_the_rows, check_learner_releases_a_model, check_learner_deterministic_under_seed, check_unknown_hyper_parameter_refused,
)


# --- datasets -----------------------------------------------------------------------------------


def check_dataset_split_matches_schema(subject: Subject) -> None:
    """load() returns a Split whose train and test parts hold the schema's columns in schema form,
    with training rows; the target, if any, is one of the columns."""
    spec = subject.spec
    split, schema = spec.load(), spec.schema()
    assert isinstance(split, Split), f"dataset {spec.name!r}: load() returned {type(split).__name__}, not a Split"
    assert isinstance(schema, Schema), f"dataset {spec.name!r}: schema() returned {type(schema).__name__}"
    assert len(split.train) > 0, f"dataset {spec.name!r}: the training part has no rows"
    for part, frame in (("train", split.train), ("test", split.test)):
        assert list(frame.columns) == schema.names, (
            f"dataset {spec.name!r}: the {part} part's columns {list(frame.columns)} are not the schema's {schema.names}")
        schema.validate(frame, f"dataset {spec.name!r} ({part})")


def check_dataset_loads_the_same_rows(subject: Subject) -> None:
    """Two loads give the same split: a dataset is one table, the same in every cell."""
    first, second = subject.spec.load(), subject.spec.load()
    for part in ("train", "test"):
        a, b = getattr(first, part), getattr(second, part)
        same = a.shape == b.shape and list(a.columns) == list(b.columns) and (
            pd.util.hash_pandas_object(a).to_numpy() == pd.util.hash_pandas_object(b).to_numpy()).all()
        assert same, f"dataset {subject.spec.name!r}: two loads give different {part} rows"


DATASET_CHECKS: tuple[Callable[[Subject], None], ...] = (
    check_dataset_split_matches_schema, check_dataset_loads_the_same_rows,
)


# --- metrics ------------------------------------------------------------------------------------


def metric_context(spec: MetricSpec, options: Mapping[str, Any], seed: int = 0) -> MetricContext:
    """Real train and test rows and a synthetic table that differs from them, in the conformance schema."""
    return MetricContext(train=conformance_table(400, seed=0), test=conformance_table(200, seed=1),
                         synthetic=conformance_table(400, seed=2), schema=CONFORMANCE_SCHEMA, seed=seed,
                         options=spec.resolve_options(options))


def check_metric_values_declared(subject: Subject) -> None:
    """evaluate returns a MetricResult whose values are numbers, each with a declared direction,
    and whose detail can be written as JSON."""
    spec = subject.spec
    result = spec.evaluate(metric_context(spec, subject.params))
    assert isinstance(result, MetricResult), f"metric {spec.name!r}: evaluate returned {type(result).__name__}"
    undeclared = sorted(set(result.values) - set(spec.directions))
    assert not undeclared, f"metric {spec.name!r}: values {undeclared} have no declared direction"
    for name, value in result.values.items():
        assert isinstance(float(value), float), f"metric {spec.name!r}: value {name} is not a number"
    json.dumps(result.detail, allow_nan=True, default=_refuse)


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def check_metric_deterministic_under_seed(subject: Subject) -> None:
    """The same context and seed give the same values."""
    spec = subject.spec
    first = spec.evaluate(metric_context(spec, subject.params)).values
    second = spec.evaluate(metric_context(spec, subject.params)).values
    assert first.keys() == second.keys() and all(
        first[k] == second[k] or (np.isnan(first[k]) and np.isnan(second[k])) for k in first
    ), f"metric {spec.name!r}: two evaluations under one seed differ: {first} vs {second}"


def check_metric_unknown_option_refused(subject: Subject) -> None:
    """An unknown option is an error naming it."""
    with pytest.raises(SpecError, match="no_such_option"):
        subject.spec.resolve_options({"no_such_option": 1})


METRIC_CHECKS: tuple[Callable[[Subject], None], ...] = (
    check_metric_values_declared, check_metric_deterministic_under_seed, check_metric_unknown_option_refused,
)

CHECKS_BY_KIND = {GeneratorSpec: CHECKS, LearnerSpec: LEARNER_CHECKS, DatasetSpec: DATASET_CHECKS,
                  MetricSpec: METRIC_CHECKS}


@dataclass(frozen=True)
class BoundCheck:
    """One check bound to one plugin: call it to run it; str() names it."""

    check: Callable[[Subject], None]
    subject: Subject

    def __call__(self) -> None:
        spec = self.subject.spec
        missing = spec.missing() if isinstance(spec, (GeneratorSpec, DatasetSpec)) else ""
        if missing:
            pytest.skip(f"{self.subject.spec.name} is unavailable here: {missing}")
        self.check(self.subject)

    def __str__(self) -> str:
        return f"{self.subject.spec.name}-{self.check.__name__.removeprefix('check_')}"


def conformance_checks(plugin: str | Spec, params: Mapping[str, Any] | None = None) -> list[BoundCheck]:
    """Every check bound to `plugin`: an installed generator's, learner's, dataset's or metric's name,
    or a spec. `params` override the hyper-parameters (a metric: its options)."""
    spec = _installed(plugin) if isinstance(plugin, str) else plugin
    subject = Subject(spec, dict(params or {}))
    return [BoundCheck(check, subject) for check in CHECKS_BY_KIND[type(spec)]]


def _installed(name: str) -> Spec:
    from dpgym.registry import PluginError, Registry

    registry = Registry.discover()
    found = []
    for kind in registry.kinds:
        try:
            found.append(registry.get(kind, name).spec)
        except PluginError:
            continue
    if len(found) != 1:
        where = "is provided by no installed plugin" if not found else "names more than one kind of plugin"
        raise PluginError(f"conformance: {name!r} {where}")
    return found[0]


# --- pytest plugin --------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dpgym")
    group.addoption("--dpgym-conformance", default="", metavar="NAMES",
                    help="run dpgym's conformance checks on these installed plugins (generators, learners, "
                         "datasets or metrics; comma-separated)")
    group.addoption("--dpgym-params", default="{}", metavar="JSON",
                    help="hyper-parameter overrides for the conformance checks, as a JSON object")


class ConformanceItem(pytest.Item):
    def __init__(self, *, bound: BoundCheck, **kwargs: Any):
        super().__init__(**kwargs)
        self.bound = bound

    def runtest(self) -> None:
        self.bound()

    def reportinfo(self) -> tuple[Any, int, str]:
        return self.path, 0, f"dpgym conformance: {self.bound}"


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    names = [n.strip() for n in config.getoption("--dpgym-conformance").split(",") if n.strip()]
    if not names:
        return
    params = json.loads(config.getoption("--dpgym-params"))
    for name in names:
        try:
            checks = conformance_checks(name, params)
        except Exception as err:  # an unknown name, or a plugin that fails to load: one line, not a traceback
            raise pytest.UsageError(f"--dpgym-conformance: {err}") from None
        items.extend(ConformanceItem.from_parent(session, name=str(b), bound=b) for b in checks)


def iter_first_party(kind: str) -> Iterator[Spec]:
    """The generators, learners, datasets or metrics (`kind`) provided by the dpgym distribution
    itself: what our own CI checks."""
    from dpgym.registry import Registry

    for provided in Registry.discover().kinds[kind].values():
        if provided.package.startswith("dpgym "):
            yield provided.spec
