"""Shared fixtures: the vendored Adult split (loaded once) and a registry with test plugins."""

from __future__ import annotations

import pandas as pd
import pytest

from harness import Column, ColumnKind, Schema
from plugins.datasets import adult


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """Caches (the audit's random-direction AUCs) go to a folder of this session, not the user's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DPGYM_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="session")
def adult_split():
    return adult.load()


@pytest.fixture(scope="session")
def adult_schema():
    return adult.schema()


@pytest.fixture
def small_schema() -> Schema:
    return Schema(
        name="small",
        target="label",
        columns=(
            Column("age", ColumnKind.INTEGER, min=0, max=100),
            Column("score", ColumnKind.CONTINUOUS, min=-1.0, max=1.0),
            Column("colour", ColumnKind.CATEGORICAL, categories=("red", "green", "blue")),
            Column("size", ColumnKind.ORDINAL, categories=("S", "M", "L")),
            Column("label", ColumnKind.BINARY, categories=("no", "yes")),
        ),
    )


@pytest.fixture
def small_frame() -> pd.DataFrame:
    return pd.DataFrame({
        "age": [10, 20, 30, 40],
        "score": [-0.5, 0.0, 0.25, 1.0],
        "colour": ["red", "green", "blue", "red"],
        "size": ["S", "M", "L", "M"],
        "label": ["no", "yes", "no", "yes"],
    })
