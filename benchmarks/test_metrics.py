"""Cost of a cell's default metrics (fidelity, utility with its six default classifiers, privacy)
against a yardstick fit, on Adult and Census, in one run.

The yardstick is one `HistGradientBoostingClassifier` fit (library defaults, one thread, as the
utility zoo runs it) on the dataset's real training split, encoded as the zoo encodes it. Each
metric scores `independent`'s synthetic rows (ε = 1, seed 0): the cheapest generator, so the
evaluation is all that is timed. The terminal summary prints each metric's time and its ratio to the
yardstick (target: the default metrics of a cell together ≤ 3×).

Run: make benchmarks (or PYTHONPATH=. python -m pytest benchmarks/test_metrics.py --benchmark-enable)
"""

from __future__ import annotations

import pytest
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_limits

from dpgym.privacy.budget import Budget
from dpgym.plugins.datasets import adult, census
from dpgym.plugins.generators.independent import SPEC as INDEPENDENT
from dpgym.plugins.metrics.fidelity import compute as fidelity
from dpgym.plugins.metrics.privacy import compute as privacy
from dpgym.plugins.metrics.utility import SPEC as UTILITY
from dpgym.plugins.metrics.utility import compute as utility
from dpgym.specs import MetricContext

DATASETS = {"adult": (adult.load, adult.schema), "census": (census.load, census.schema)}


@pytest.fixture(scope="module", params=sorted(DATASETS))
def context(request) -> tuple[str, MetricContext]:
    load, schema = DATASETS[request.param]
    split = load()
    generator = INDEPENDENT.build({})
    generator.fit(split.train.copy(), schema(), Budget(1.0, 1e-5), 0)
    synthetic = generator.sample(len(split.train), 0)
    return request.param, MetricContext(train=split.train, test=split.test, synthetic=synthetic, schema=schema(),
                                        seed=0, options={})


@pytest.fixture
def timed(benchmark, metric_seconds):
    """Benchmark `fn` and file its median under (dataset, name) for the summary's ratios."""
    def run(name: str, dataset: str, fn, rounds: int) -> object:
        result = benchmark.pedantic(fn, rounds=rounds, iterations=1)
        if benchmark.stats is not None:  # None under --benchmark-disable
            metric_seconds[(dataset, name)] = benchmark.stats.stats.median
        return result
    return run


def test_yardstick_one_hist_gradient_boosting_fit_on_the_real_rows(timed, context):
    dataset, ctx = context
    x, y = utility._labelled(ctx.train, ctx.schema)

    def fit() -> None:
        with threadpool_limits(limits=1):
            HistGradientBoostingClassifier(random_state=0).fit(x, y)

    timed("yardstick", dataset, fit, rounds=3)


def test_fidelity(timed, context):
    dataset, ctx = context
    result = timed("fidelity", dataset, lambda: fidelity.evaluate(ctx), rounds=1)
    assert 0 < result.values["marginal_tvd"] < 0.1


def test_utility_default_classifiers(timed, context):
    dataset, ctx = context
    ctx = MetricContext(**{**ctx.__dict__, "options": UTILITY.resolve_options({})})
    result = timed("utility", dataset, lambda: utility.evaluate(ctx), rounds=1)
    assert result.values["tstr_auroc"] > 0.8


def test_privacy(timed, context):
    dataset, ctx = context
    result = timed("privacy", dataset, lambda: privacy.evaluate(ctx), rounds=1)
    assert 0.4 < result.values["mia_auc"] < 0.6
