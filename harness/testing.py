"""Conformance checks a generator plugin must pass, runnable by its author.

Two ways to run them:

- from the command line, on any installed generator:
  ``pytest --dpgym-conformance=NAME[,NAME...] [--dpgym-params='{"epochs": 1}']``
  (this module is a pytest plugin, registered through the ``pytest11`` entry point);
- inside a test suite, like scikit-learn's ``parametrize_with_checks``::

      @pytest.mark.parametrize("check", conformance_checks("my_generator"), ids=str)
      def test_conformance(check):
          check()

Each check fits the generator on a small mixed-type table (`conformance_table`) under a finite
budget, with the spec's ``quick_params`` (cheap settings its author declares) and any overrides.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpgym.privacy import Budget, Ledger, reaccount
from dpgym.schema import Column, ColumnKind, Schema
from dpgym.specs import GeneratorSpec, SpecError

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
    """A generator spec with the hyper-parameters the checks build it with."""

    spec: GeneratorSpec
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
    ledger.check_within(BUDGET)
    check = reaccount(ledger, BUDGET)
    assert check.verdict == "ok", f"{name}: independent re-accounting says {check.verdict}: {check.detail}"


def check_ledger_does_not_depend_on_the_rows(subject: Subject) -> None:
    """Tables that differ in one row give the same ledger: it is published with the cell, so a value
    computed from the rows without a mechanism (a final training loss, a count) would leak."""
    table = conformance_table()
    neighbour = table.copy()
    flipped = "neg" if table.loc[0, "label"] == "pos" else "pos"
    neighbour.loc[0, ["income", "colour", "label"]] = [1_000.0, "other", flipped]
    ledgers = [subject.fitted(train=CONFORMANCE_SCHEMA.conform(frame), seed=0)[1].to_dict()
               for frame in (table, neighbour)]
    assert ledgers[0] == ledgers[1], f"{subject.spec.name}: the ledger changes when one training row changes"


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
    """A generator with a `device` hyper-parameter runs with device="cpu"."""
    if "device" not in subject.spec.defaults:
        pytest.skip(f"{subject.spec.name} has no device hyper-parameter")
    generator, _ = subject.fitted(device="cpu")
    _valid_sample(generator, 50, 1, subject.spec.name)


CHECKS: tuple[Callable[[Subject], None], ...] = (
    check_ledger_within_budget, check_ledger_does_not_depend_on_the_rows, check_samples_match_schema,
    check_empty_sample, check_deterministic_under_seed, check_seed_changes_samples, check_one_row_table, check_constant_columns,
    check_unknown_hyper_parameter_refused, check_pickles, check_device_flag,
)


@dataclass(frozen=True)
class BoundCheck:
    """One check bound to one generator: call it to run it; str() names it."""

    check: Callable[[Subject], None]
    subject: Subject

    def __call__(self) -> None:
        missing = self.subject.spec.missing()
        if missing:
            pytest.skip(f"{self.subject.spec.name} is unavailable here: {missing}")
        self.check(self.subject)

    def __str__(self) -> str:
        return f"{self.subject.spec.name}-{self.check.__name__.removeprefix('check_')}"


def conformance_checks(generator: str | GeneratorSpec, params: Mapping[str, Any] | None = None) -> list[BoundCheck]:
    """Every check bound to `generator` (an installed generator's name, or a spec)."""
    if isinstance(generator, str):
        from dpgym.registry import Registry

        generator = Registry.discover().generator(generator)
    subject = Subject(generator, dict(params or {}))
    return [BoundCheck(check, subject) for check in CHECKS]


# --- pytest plugin --------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dpgym")
    group.addoption("--dpgym-conformance", default="", metavar="NAMES",
                    help="run dpgym's conformance checks on these installed generators (comma-separated)")
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
        items.extend(ConformanceItem.from_parent(session, name=str(b), bound=b)
                     for b in conformance_checks(name, params))


def iter_first_party_generators() -> Iterator[GeneratorSpec]:
    """Generators provided by the dpgym distribution itself (what our own CI checks)."""
    from dpgym.registry import Registry

    for provided in Registry.discover().kinds["generator"].values():
        if provided.package.startswith("dpgym "):
            yield provided.spec
