"""Fixtures for the private-learning tests: the logistic toy dataset and a registry holding the
learner plugins (registered directly: the editable install's entry points predate them)."""

from __future__ import annotations

import pytest

from harness.registry import Registry
from plugins.datasets import adult_expm
from plugins.learners import dpsgd_lr, expm_nf_lr, nonprivate_lr, via_synthetic
from tests.learners import toy_learning


@pytest.fixture(scope="session")
def toy_split():
    return toy_learning.load()


@pytest.fixture(scope="session")
def toy_schema():
    return toy_learning.schema()


@pytest.fixture(scope="session")
def learner_registry() -> Registry:
    plugins = {"toy_learning": toy_learning, "adult_expm": adult_expm, "nonprivate_lr": nonprivate_lr,
               "dpsgd_lr": dpsgd_lr, "expm_nf_lr": expm_nf_lr, "via_synthetic": via_synthetic}
    from importlib.metadata import entry_points

    installed = {ep.name for ep in entry_points(group="dpgym")}
    return Registry.discover(extra={k: v for k, v in plugins.items() if k not in installed})
