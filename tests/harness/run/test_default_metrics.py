"""A run that names no metrics runs, per cell, the metrics relevant to its method and dataset, and
says once which it left out and why."""

from __future__ import annotations

import pytest

from dpgym.commands import left_out_metrics
from dpgym.registry import Registry
from dpgym.run.grid import default_metrics, expand
from dpgym.run.suite import MethodConfig, Suite


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.discover()


def adhoc(*generators: str, metrics=None) -> Suite:
    return Suite("adhoc", tuple(MethodConfig(g) for g in generators), ("adult",), (1.0,), (0,), metrics=metrics)


def test_likelihood_metrics_go_to_generators_with_log_prob_and_generator_free_metrics_to_none(registry):
    cells = {cell.method.name: set(cell.metrics) for cell in expand(adhoc("uniform", "dp_nf"), registry)}
    assert "density" in cells["dp_nf"] and "density" not in cells["uniform"]
    assert "dp_ad" not in cells["dp_nf"] | cells["uniform"]
    assert {"fidelity", "utility"} <= cells["uniform"] & cells["dp_nf"]


def test_a_dataset_without_a_target_gets_no_target_metric(registry):
    spec = registry.get("generator", "uniform").spec
    toy = registry.dataset("half_moons")
    assert toy.schema().target is None
    chosen, left_out = default_metrics(registry, spec, toy)
    assert "fidelity" in chosen and left_out["utility"] == "needs a target column"
    assert left_out["dp_ad"].startswith("does not depend on the generator")


def test_named_metrics_run_everywhere_as_named(registry):
    cells = expand(adhoc("uniform", "dp_nf", metrics=("fidelity", "dp_ad")), registry)
    assert {cell.metrics for cell in cells} == {("fidelity", "dp_ad")}


def test_what_is_left_out_is_said_once_per_metric_and_reason(registry):
    lines = left_out_metrics(adhoc("uniform", "independent", "dp_nf"), registry)
    assert "metric density left out (uniform on adult, independent on adult): needs a generator with log_prob" in lines
    assert sum(line.startswith("metric dp_ad left out:") for line in lines) == 1
