"""Shared fixtures: the vendored Adult split (loaded once) and a registry with test plugins."""

from __future__ import annotations

import pandas as pd
import pytest

from dpgym import Column, ColumnKind, Schema
from dpgym.plugins.datasets import adult


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


@pytest.fixture
def wide_table():
    """`wide_table(k)`: a schema of k 0/1 integer columns then one 20-level categorical column (whose
    one-hot block starts at offset k), and 20 conforming rows holding every category."""
    def build(numeric_columns: int) -> tuple[Schema, pd.DataFrame]:
        schema = Schema("wide", (*(Column(f"n{i}", ColumnKind.INTEGER, min=0, max=1) for i in range(numeric_columns)),
                                 Column("c", ColumnKind.CATEGORICAL, categories=tuple(f"k{j}" for j in range(20)))))
        rows = pd.DataFrame({**{f"n{i}": [0, 1] * 10 for i in range(numeric_columns)}, "c": [f"k{j}" for j in range(20)]})
        return schema, schema.conform(rows)
    return build
