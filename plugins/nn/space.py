"""The public working space of a density model: a schema-derived affine map of a table's numeric
columns, its log-Jacobian, and data-independent values for the columns the model does not cover.

Everything here comes from the public schema (or a public constant the user passes), never from
rows, so it costs no privacy. A model's density p_U in the working space u = (x − centre) / scale
is a density of the data by the change of variables log p_X(x) = log p_U(u) − Σ_j log scale_j
(docs/methods/dp-nf.md#working-space), so held-out log-likelihoods stay in the dataset's own scale.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpgym import Column, ColumnKind, Schema

SCALINGS = ("box", "ball")


class DensitySpace:
    """u = (x − centre) / scale for the schema's numeric columns.

    scaling:
    - "box": centre and half-width of each column's public bounds, so u ∈ [−1, 1]^D;
    - "ball": centre of the bounds and one common scale, the half-diagonal of the bounding box,
      so every row lies in the unit ball (DP-EM's sensitivities need ‖u‖₂ ≤ 1);
    - a number r > 0: a public row-norm bound around the origin (DP-EM's own preprocessing: Life
      Science is published divided by its max row norm, so r = 1 is the identity map).
    """

    def __init__(self, schema: Schema, scaling: str | float):
        self.columns: list[Column] = [c for c in schema.columns if c.is_numeric]
        schema.require_complete("a density model", self.columns)  # the other columns are not modelled
        if not self.columns:
            raise ValueError(f"schema {schema.name!r} has no numeric column to model a density on")
        self.others: list[Column] = [c for c in schema.columns if not c.is_numeric]
        self.schema = schema
        low = np.array([c.min for c in self.columns], dtype=float)
        high = np.array([c.max for c in self.columns], dtype=float)
        half = (high - low) / 2
        if isinstance(scaling, str):
            if scaling not in SCALINGS:
                raise ValueError(f"scaling must be one of {SCALINGS} or a positive row-norm bound, got {scaling!r}")
            self.centre = (low + high) / 2
            self.scale = half if scaling == "box" else np.full(len(half), float(np.linalg.norm(half)))
        else:
            if not (float(scaling) > 0 and math.isfinite(float(scaling))):
                raise ValueError(f"a row-norm bound must be positive and finite, got {scaling!r}")
            self.centre = np.zeros(len(half))
            self.scale = np.full(len(half), float(scaling))
        self.low, self.high = low, high

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def dim(self) -> int:
        return len(self.columns)

    @property
    def log_jacobian(self) -> float:
        """log |du/dx| = −Σ log scale_j: add it to log p_U(u) to get log p_X(x)."""
        return float(-np.log(self.scale).sum())

    def encoded_bounds(self) -> np.ndarray:
        """(2, D): the public bounds of each column in the working space."""
        return np.stack([(self.low - self.centre) / self.scale, (self.high - self.centre) / self.scale])

    def encode(self, frame: pd.DataFrame) -> np.ndarray:
        x = frame[self.names].to_numpy(dtype=float)
        return (x - self.centre) / self.scale

    def decode(self, u: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
        """Rows in schema form: numeric columns mapped back and clipped to their public bounds
        (post-processing), the other columns drawn uniformly from their public categories."""
        x = np.clip(u * self.scale + self.centre, self.low, self.high)
        columns: dict[str, pd.Series] = {}
        for j, col in enumerate(self.columns):
            values = x[:, j]
            if col.kind is ColumnKind.INTEGER:
                values = np.round(values).astype(np.int64)
            columns[col.name] = pd.Series(values, dtype=col.dtype)
        for col in self.others:
            codes = rng.integers(len(col.categories), size=len(u))
            columns[col.name] = pd.Series(pd.Categorical.from_codes(codes, dtype=col.dtype))
        return pd.DataFrame({c.name: columns[c.name] for c in self.schema.columns})


def project_to_unit_ball(u: np.ndarray) -> np.ndarray:
    """Rows with ‖u‖₂ > 1 scaled back onto the sphere: a per-row map, so the sensitivities that
    assume ‖u‖₂ ≤ 1 hold whatever the rows are."""
    norms = np.linalg.norm(u, axis=1, keepdims=True)
    return u / np.maximum(norms, 1.0)
