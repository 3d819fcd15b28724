"""A small real run (with a failing generator) and its report, shared by the report tests."""

from __future__ import annotations

import pytest

from dpgym.registry import Registry
from tests.harness.report.fakerun import write_leaderboard
from dpgym.results.store import RunStore
from dpgym.engine.runner import run_suite
from dpgym.engine.suite import MethodConfig, Suite
from tests.fake_plugins import FaultyGenerators, QuickMetrics
from tests.harness.report.fakerun import report_of


@pytest.fixture(scope="session")
def report_registry() -> Registry:
    return Registry.discover(extra={"faulty": FaultyGenerators(), "quick": QuickMetrics()})


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory, report_registry):
    """uniform, independent, real and a crashing generator on Adult, 2 seeds: the smoke suite plus a failure."""
    out = tmp_path_factory.mktemp("smoke-run")
    suite = Suite("smoke-with-failure", tuple(MethodConfig(g) for g in ("uniform", "independent", "real", "crasher")),
                  ("adult",), (1.0,), (0, 1), 1e-5, metrics=("target_gap", "mean_gap"))
    run_suite(suite, RunStore(out), report_registry, show_progress=False)
    return out


@pytest.fixture(scope="session")
def smoke_report(smoke_run, report_registry):
    """What `dpgym run` leaves behind: the leaderboard files and the report."""
    directions = {name: d for p in report_registry.kinds["metric"].values() for name, d in p.spec.directions.items()}
    write_leaderboard(smoke_run, directions)
    return report_of(smoke_run, report_registry)
