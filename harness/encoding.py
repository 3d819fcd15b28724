"""Schema-driven, data-independent encoders: nothing is fitted on rows, so encoding costs no privacy.

Discrete columns become one-hot blocks or integer codes (category order from the schema);
numeric columns are min-max scaled by the schema's public bounds. `decode` is the exact inverse
on encoded rows and maps arbitrary model output back into the schema's domain (argmax for one-hot,
rounding and clipping for codes and integers, clipping to bounds for numbers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from harness.schema import Column, ColumnKind, Schema


@dataclass(frozen=True)
class Block:
    """Where one column lives in the encoded matrix."""

    column: Column
    start: int
    stop: int

    @property
    def width(self) -> int:
        return self.stop - self.start


class TableEncoder:
    """Encode frames in schema form to float matrices and back."""

    def __init__(
        self,
        schema: Schema,
        discrete: Literal["onehot", "ordinal"] = "onehot",
        numeric_range: tuple[float, float] = (0.0, 1.0),
        columns: list[str] | None = None,
    ):
        self.schema = schema
        self.discrete = discrete
        self.low, self.high = numeric_range
        chosen = [schema[name] for name in columns] if columns is not None else list(schema.columns)
        nullable_numeric = [c.name for c in chosen if c.is_numeric and c.nullable]
        if nullable_numeric:
            raise ValueError(f"TableEncoder cannot encode nullable numeric columns {nullable_numeric}")
        self.blocks: list[Block] = []
        offset = 0
        for column in chosen:
            width = len(column.categories) if (not column.is_numeric and discrete == "onehot") else 1
            self.blocks.append(Block(column, offset, offset + width))
            offset += width
        self.width = offset

    def block(self, name: str) -> Block:
        return next(b for b in self.blocks if b.column.name == name)

    def encode(self, frame: pd.DataFrame) -> np.ndarray:
        out = np.zeros((len(frame), self.width), dtype=np.float64)
        for b in self.blocks:
            col = b.column
            if col.is_numeric:
                values = frame[col.name].to_numpy(dtype=np.float64)
                out[:, b.start] = self.low + (values - col.min) / (col.max - col.min) * (self.high - self.low)
                continue
            codes = pd.Categorical(frame[col.name], categories=list(col.categories)).codes
            if (codes < 0).any():
                row = int(np.flatnonzero(codes < 0)[0])
                raise ValueError(f"column {col.name!r}: value {frame[col.name].iloc[row]!r} at row {row} is not in the schema")
            if self.discrete == "onehot":
                out[np.arange(len(frame)), b.start + codes.astype(np.intp)] = 1.0
            else:
                out[:, b.start] = codes
        return out

    def decode(self, matrix: np.ndarray) -> pd.DataFrame:
        if matrix.ndim != 2 or matrix.shape[1] != self.width:
            raise ValueError(f"expected a matrix of width {self.width}, got shape {matrix.shape}")
        columns = {}
        for b in self.blocks:
            col = b.column
            part = matrix[:, b.start : b.stop]
            if col.is_numeric:
                values = col.min + (part[:, 0] - self.low) / (self.high - self.low) * (col.max - col.min)
                values = np.clip(values, col.min, col.max)
                if col.kind is ColumnKind.INTEGER:
                    values = np.round(values).astype(np.int64)
                columns[col.name] = pd.Series(values, dtype=col.dtype)
                continue
            if self.discrete == "onehot":
                codes = part.argmax(axis=1)
            else:
                codes = np.clip(np.round(part[:, 0]), 0, len(col.categories) - 1).astype(np.int64)
            columns[col.name] = pd.Series(pd.Categorical.from_codes(codes, dtype=col.dtype))
        return pd.DataFrame(columns)
