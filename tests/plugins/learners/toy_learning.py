"""A small logistic dataset for the private-learning tests: 3 numeric features, one categorical
and a binary label drawn from a known logistic model (so a good learner's AUC is predictable)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpgym import Column, ColumnKind, DatasetSpec, Schema, Split, hookimpl

N_TRAIN, N_TEST = 3000, 1500


def schema() -> Schema:
    return Schema(name="toy_learning", target="label", columns=(
        Column("a", ColumnKind.CONTINUOUS, min=-4.0, max=4.0),
        Column("b", ColumnKind.CONTINUOUS, min=-4.0, max=4.0),
        Column("c", ColumnKind.CONTINUOUS, min=-4.0, max=4.0),
        Column("group", ColumnKind.CATEGORICAL, categories=("x", "y", "z")),
        Column("label", ColumnKind.BINARY, categories=("no", "yes")),
    ))


def frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = np.clip(rng.normal(size=(n, 3)), -4, 4)
    group = rng.choice(["x", "y", "z"], size=n)
    logit = 3 * x[:, 0] - 2 * x[:, 1] + (group == "z") * 1.5 - 0.5
    label = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    return schema().conform(pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "group": group, "label": label}))


def load() -> Split:
    return Split(train=frame(N_TRAIN, 0), test=frame(N_TEST, 1))


SPEC = DatasetSpec(name="toy_learning", version="1", load=load, schema=schema, checksum="toy-learning-1",
                   description="logistic toy data for the private-learning tests")


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [SPEC]
