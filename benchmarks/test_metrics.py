"""Run time of the fidelity and utility metrics on Adult (32,561 train / 16,281 test rows).

Run with `make benchmarks`; the real training rows stand in for the synthetic rows.
"""

from __future__ import annotations

import pytest

from dpgym.specs import MetricContext
from dpgym.plugins.datasets import adult
from dpgym.plugins.metrics import fidelity, utility


@pytest.fixture(scope="module")
def adult_context() -> MetricContext:
    split = adult.load()
    return MetricContext(train=split.train, test=split.test, synthetic=split.train, schema=adult.schema(), seed=0)


def test_fidelity_on_adult(benchmark, adult_context):
    result = benchmark.pedantic(fidelity.evaluate, args=(adult_context,), rounds=3, iterations=1)
    assert result.values["kendall_rmse"] == 0.0


def test_utility_zoo_on_adult(benchmark, adult_context):
    result = benchmark.pedantic(utility.evaluate, args=(adult_context,), rounds=1, iterations=1)
    assert result.values["tstr_auroc"] > 0.85
