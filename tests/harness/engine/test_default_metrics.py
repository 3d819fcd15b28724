"""A run that names no metrics runs, per cell, the metrics relevant to its method and dataset, and
says once which it left out and why."""

from __future__ import annotations

import pytest

from dpgym.commands import left_out_metrics
from dpgym.registry import Registry
from dpgym.engine.grid import default_metrics, expand
from dpgym.engine.suite import MethodConfig, Suite


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.discover()


def adhoc(*generators: str, metrics=None, datasets=("adult",)) -> Suite:
    return Suite("adhoc", tuple(MethodConfig(g) for g in generators), datasets, (1.0,), (0,), metrics=metrics)


def test_a_run_naming_no_metrics_runs_fidelity_utility_and_privacy(registry):
    cells = {cell.method.name: set(cell.metrics) for cell in expand(adhoc("uniform", "dp_nf"), registry)}
    assert cells == {"uniform": {"fidelity", "utility", "privacy"}, "dp_nf": {"fidelity", "utility", "privacy"}}


def test_utility_runs_six_fast_classifiers_unless_a_suite_names_the_zoo(registry):
    from dpgym.plugins.metrics.utility import CLASSIFIER_NAMES

    utility = registry.get("metric", "utility").spec
    assert utility.resolve_options({})["classifiers"] == [
        "logistic_regression", "decision_tree", "gaussian_nb", "bernoulli_nb", "lda", "xgboost"]
    assert len(CLASSIFIER_NAMES) == 10
    assert utility.resolve_options({"classifiers": list(CLASSIFIER_NAMES)})["classifiers"] == list(CLASSIFIER_NAMES)


def test_a_dataset_without_a_target_gets_no_target_metric(registry):
    spec = registry.get("generator", "uniform").spec
    toy = registry.dataset("half_moons")
    assert toy.schema().target is None
    chosen, left_out = default_metrics(registry, spec, toy)
    assert chosen == ("fidelity", "privacy") and left_out["utility"] == "needs a target column"
    assert left_out["dp_ad"] == left_out["density"] == "not run by default"


def test_named_metrics_run_everywhere_as_named(registry):
    cells = expand(adhoc("uniform", "dp_nf", metrics=("fidelity", "dp_ad")), registry)
    assert {cell.metrics for cell in cells} == {("fidelity", "dp_ad")}


def test_what_is_left_out_is_said_once_per_metric_and_reason(registry):
    lines = left_out_metrics(adhoc("uniform", "independent", datasets=("adult", "half_moons")), registry)
    assert lines[0] == ("metrics not run by default: density, dimension_wise_prediction, dimension_wise_probability, "
                        "diversity, dp_ad, knn_regression, rf_label_accuracy (name them with --metrics)")
    assert "metric utility left out (uniform on half_moons, independent on half_moons): needs a target column" in lines
    assert len(lines) == 2


def test_a_ranked_value_must_be_one_of_the_metrics_values():
    from dpgym import Deferred, Direction, MetricSpec
    from dpgym.specs import SpecError

    with pytest.raises(SpecError, match="ranked_value 'auc' is not one of its values"):
        MetricSpec("m", "1", Deferred("x.y:z"), {"tvd": Direction.LOWER}, ranked_value="auc")
