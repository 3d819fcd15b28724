"""Fixtures for the dataset plugins: a registry that holds them and the big vendored splits, loaded once."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from dpgym.registry import Registry
from dpgym.plugins.datasets import census, covertype, intrusion, lifesci, toy2d, user_csv

PLUGINS = {
    "intrusion": intrusion, "census": census, "lifesci": lifesci,
    "covertype": covertype, "toy2d": toy2d, "csv": user_csv,
}


@pytest.fixture(scope="session")
def registry() -> Registry:
    """Installed entry points plus whichever of these plugins the installed metadata does not list yet."""
    installed = {ep.name for ep in entry_points(group="dpgym")}
    return Registry.discover(extra={name: m for name, m in PLUGINS.items() if name not in installed})


@pytest.fixture(scope="session")
def intrusion23_split():
    return intrusion.load23()


@pytest.fixture(scope="session")
def intrusion5_split():
    return intrusion.load5()


@pytest.fixture(scope="session")
def census_split():
    return census.load()
