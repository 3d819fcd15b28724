"""A generated dataset with its public schema: two Gaussian blobs, a colour and a label."""

from __future__ import annotations

from functools import cache

import numpy as np
import pandas as pd

from dpgym import Column, ColumnKind, Schema, Split


@cache
def blobs_schema() -> Schema:
    return Schema(
        name="example_blobs",
        target="label",
        columns=(
            Column("x", ColumnKind.CONTINUOUS, min=-6.0, max=6.0),
            Column("y", ColumnKind.CONTINUOUS, min=-6.0, max=6.0),
            Column("colour", ColumnKind.CATEGORICAL, categories=("red", "green", "blue")),
            Column("label", ColumnKind.BINARY, categories=("a", "b")),
        ),
    )


def load_blobs() -> Split:
    rng = np.random.default_rng(0)
    label = rng.integers(0, 2, 4000)
    centre = np.where(label[:, None] == 1, 1.5, -1.5)
    xy = np.clip(centre + rng.normal(0, 1, (4000, 2)), -6, 6)
    colour = np.where(label == 1, rng.choice(["red", "green"], 4000), rng.choice(["green", "blue"], 4000))
    frame = pd.DataFrame({"x": xy[:, 0], "y": xy[:, 1], "colour": colour, "label": np.array(["a", "b"])[label]})
    rows = blobs_schema().conform(frame)
    return Split(train=rows.iloc[:3000].reset_index(drop=True), test=rows.iloc[3000:].reset_index(drop=True))
