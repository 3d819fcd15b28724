"""A small real run (with a failing generator) and its report, shared by the report tests."""

from __future__ import annotations

import numpy as np
import pytest

from harness import hookimpl
from harness.leaderboard import write_leaderboard
from harness.registry import Registry
from harness.report import write_report
from harness.runner import run_suite
from harness.specs import Direction, MetricContext, MetricResult, MetricSpec
from harness.store import RunStore
from harness.suite import GeneratorConfig, Suite
from tests.fake_plugins import FaultyGenerators


def _target_rate_gap(ctx: MetricContext) -> MetricResult:
    """|share of the target's first class, real − synthetic|: cheap, and it separates the smoke generators."""
    target = ctx.schema.target
    first = ctx.schema[target].categories[0]
    real = float((ctx.train[target].astype(str) == first).mean())
    synthetic = float((ctx.synthetic[target].astype(str) == first).mean())
    return MetricResult({"target_rate_gap": abs(real - synthetic)})


def _numeric_mean_gap(ctx: MetricContext) -> MetricResult:
    gaps = [abs(ctx.train[c.name].astype(float).mean() - ctx.synthetic[c.name].astype(float).mean()) / (c.max - c.min)
            for c in ctx.schema.columns if c.is_numeric]
    return MetricResult({"numeric_mean_gap": float(np.mean(gaps))})


class QuickMetrics:
    """Two fast metrics standing in for the fidelity/utility plugins, so the report has numbers to plot."""

    @hookimpl
    def dpgym_metrics(self) -> list[MetricSpec]:
        return [MetricSpec("target_gap", "1", _target_rate_gap, {"target_rate_gap": Direction.LOWER}),
                MetricSpec("mean_gap", "1", _numeric_mean_gap, {"numeric_mean_gap": Direction.LOWER})]


@pytest.fixture(scope="session")
def report_registry() -> Registry:
    return Registry.discover(extra={"faulty": FaultyGenerators(), "quick": QuickMetrics()})


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory, report_registry):
    """uniform, independent, real and a crashing generator on Adult, 2 seeds: the smoke suite plus a failure."""
    out = tmp_path_factory.mktemp("smoke-run")
    suite = Suite("smoke-with-failure", tuple(GeneratorConfig(g) for g in ("uniform", "independent", "real", "crasher")),
                  ("adult",), (1.0,), (0, 1), 1e-5, metrics=("target_gap", "mean_gap"))
    run_suite(suite, RunStore(out), report_registry, show_progress=False)
    return out


@pytest.fixture(scope="session")
def smoke_report(smoke_run, report_registry):
    """What `dpgym run` leaves behind: the leaderboard files and the report."""
    directions = {name: d for p in report_registry.kinds["metric"].values() for name, d in p.spec.directions.items()}
    write_leaderboard(smoke_run, directions)
    return write_report(smoke_run, report_registry)
