"""Mixed-type encoding of a table into [0, 1]^n from its public schema, and the way back
(DP-auto-GAN §3 and App. E.1; docs/methods/dp-auto-gan.md#encoding).

- numeric columns: min-max by the schema's public bounds (never fitted on rows), one coordinate;
- two-level columns (binary, or a categorical with two categories): one 0/1 coordinate, 1 = the
  second category;
- other discrete columns: a one-hot block in the schema's category order;
- a nullable column: a discrete one counts its missing value as one more category, after its own; a
  numeric one gets a 0/1 coordinate after its value, 1 = missing (the value is then written as 0).

Decoding is post-processing: argmax per one-hot block, threshold 0.5 per binary coordinate,
inverse min-max clipped to the bounds (rounded for integers) — the reference code's rule — or,
with `mode="sample"`, a categorical / Bernoulli draw from the block's normalised output.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpgym import Column, ColumnKind, Schema, levels, missing_rows


@dataclass(frozen=True)
class Span:
    """Where one column lives in the encoded matrix, and how it is coded there."""

    column: Column
    start: int
    stop: int
    missing_flag: bool = False  # the missing-value coordinate of a nullable numeric column

    @property
    def coding(self) -> str:
        if self.missing_flag:
            return "missing"
        if self.column.is_numeric:
            return "numeric"
        return "binary" if levels(self.column) == 2 else "onehot"


class MixedEncoding:
    """Schema-only encoder: the same schema always gives the same layout and the same matrix."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.spans: list[Span] = []
        offset = 0
        for column in schema.columns:
            width = 1 if column.is_numeric or levels(column) <= 2 else levels(column)
            self.spans.append(Span(column, offset, offset + width))
            offset += width
            if column.is_numeric and column.nullable:
                self.spans.append(Span(column, offset, offset + 1, missing_flag=True))
                offset += 1
        self.width = offset

    def encode(self, frame: pd.DataFrame) -> np.ndarray:
        out = np.zeros((len(frame), self.width), dtype=np.float32)
        for span in self.spans:
            col = span.column
            absent = missing_rows(frame, col)
            if span.coding == "missing":
                out[:, span.start] = absent
                continue
            if span.coding == "numeric":
                values = frame[col.name].to_numpy(dtype=np.float64, na_value=np.nan)
                out[:, span.start] = np.where(absent, 0.0, (values - col.min) / (col.max - col.min))
                continue
            codes = pd.Categorical(frame[col.name], categories=list(col.categories)).codes.astype(np.int64)
            if ((codes < 0) & ~absent).any():
                raise ValueError(f"column {col.name!r} has values outside its public categories")
            codes[absent] = len(col.categories)
            if span.coding == "binary":
                out[:, span.start] = codes
            elif levels(col) == 1:
                out[:, span.start] = 1.0
            else:
                out[np.arange(len(frame)), span.start + codes.astype(np.intp)] = 1.0
        return out

    def decode(self, matrix: np.ndarray, mode: str = "argmax", rng: np.random.Generator | None = None) -> pd.DataFrame:
        """Map decoder output in [0, 1]^n back to schema form."""
        if mode not in ("argmax", "sample"):
            raise ValueError(f"decoding mode must be 'argmax' or 'sample', got {mode!r}")
        if mode == "sample" and rng is None:
            raise ValueError("decoding by sampling needs an rng")
        if matrix.ndim != 2 or matrix.shape[1] != self.width:
            raise ValueError(f"expected a matrix of width {self.width}, got shape {matrix.shape}")
        columns = {}
        for span in self.spans:
            col, part = span.column, np.asarray(matrix[:, span.start:span.stop], dtype=np.float64)
            if span.coding == "missing":
                p = np.clip(part[:, 0], 0.0, 1.0)
                columns[col.name] = columns[col.name].mask((rng.random(len(p)) < p) if mode == "sample" else (p > 0.5))
                continue
            if span.coding == "numeric":
                values = np.clip(col.min + part[:, 0] * (col.max - col.min), col.min, col.max)
                if col.kind is ColumnKind.INTEGER:
                    values = np.round(values).astype(np.int64)
                columns[col.name] = pd.Series(values, dtype=col.dtype)
                continue
            if span.coding == "binary":
                p = np.clip(part[:, 0], 0.0, 1.0)
                codes = (rng.random(len(p)) < p) if mode == "sample" else (p > 0.5)
                codes = codes.astype(np.int64)
            elif mode == "sample":
                codes = _sample_rows(np.clip(part, 0.0, None), rng)
            else:
                codes = part.argmax(axis=1)
            codes = np.where(codes == len(col.categories), -1, codes)  # the missing value's place (nullable)
            columns[col.name] = pd.Series(pd.Categorical.from_codes(codes, dtype=col.dtype))
        return pd.DataFrame(columns)


def _sample_rows(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One categorical draw per row with probabilities ∝ weights (uniform for an all-zero row)."""
    totals = weights.sum(axis=1, keepdims=True)
    probs = np.where(totals > 0, weights / np.where(totals > 0, totals, 1.0), 1.0 / weights.shape[1])
    cumulative = probs.cumsum(axis=1)
    draws = rng.random((len(weights), 1)) * cumulative[:, -1:]
    return np.minimum((cumulative < draws).sum(axis=1), weights.shape[1] - 1)
