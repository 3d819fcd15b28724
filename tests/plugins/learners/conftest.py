"""Fixtures for the private-learning tests: the logistic toy dataset and a registry of exactly the
plugins these tests use, built from modules (not the installed entry points, which name whatever
the editable install last registered)."""

from __future__ import annotations

import pluggy
import pytest

from dpgym import hookspecs
from dpgym.registry import Registry
from dpgym.plugins.datasets import adult_expm, intrusion
from dpgym.plugins.generators import independent, uniform
from dpgym.plugins.learners import dpsgd_lr, expm_nf_lr, nonprivate_lr, via_synthetic
from tests.plugins.learners import faulty_learners, toy_learning


@pytest.fixture(scope="session")
def toy_split():
    return toy_learning.load()


@pytest.fixture(scope="session")
def toy_schema():
    return toy_learning.schema()


@pytest.fixture(scope="session")
def learner_registry() -> Registry:
    plugins = {"toy_learning": toy_learning, "adult_expm": adult_expm, "intrusion": intrusion,
               "uniform": uniform, "independent": independent,
               "nonprivate_lr": nonprivate_lr, "dpsgd_lr": dpsgd_lr, "expm_nf_lr": expm_nf_lr,
               "via_synthetic": via_synthetic, "faulty_learners": faulty_learners}
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    packages: dict[str, str] = {}
    for name, module in plugins.items():
        Registry._register(manager, module, name, "tests", packages)
    return Registry(manager, packages)
