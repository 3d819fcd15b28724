"""Schema-driven, data-independent encoders: nothing is fitted on rows, so encoding costs no privacy.

Discrete columns become one-hot blocks or integer codes (category order from the schema);
numeric columns are min-max scaled by the schema's public bounds. `decode` is the exact inverse
on encoded rows and maps arbitrary model output back into the schema's domain (argmax for one-hot,
rounding and clipping for codes and integers, clipping to bounds for numbers).

A column the schema declares nullable gets a place for its missing value, so a generator models
how often and with what a value is missing: a discrete column one more category after its own
(slot or code), a numeric column a two-slot one-hot flag block [present, missing] after its value,
which is then written as the low end of the range. Both follow from the schema alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from dpgym.schema import Column, ColumnKind, Schema


@dataclass(frozen=True)
class Block:
    """Where one column lives in the encoded matrix."""

    column: Column
    start: int
    stop: int
    missing_flag: bool = False  # the [present, missing] block of a nullable numeric column

    @property
    def width(self) -> int:
        return self.stop - self.start

    @property
    def is_numeric(self) -> bool:
        """A block holding a scaled number (one slot); every other block holds codes or a one-hot row."""
        return self.column.is_numeric and not self.missing_flag


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
        if nullable_numeric and discrete != "onehot":
            raise ValueError(f"ordinal TableEncoder cannot encode nullable numeric columns {nullable_numeric}")
        self.blocks: list[Block] = []
        offset = 0
        for column in chosen:
            width = levels(column) if (not column.is_numeric and discrete == "onehot") else 1
            self.blocks.append(Block(column, offset, offset + width))
            offset += width
            if column.is_numeric and column.nullable:
                self.blocks.append(Block(column, offset, offset + 2, missing_flag=True))
                offset += 2
        self.width = offset

    def block(self, name: str) -> Block:
        """The block holding the column's value (or codes), not its missing flag."""
        return next(b for b in self.blocks if b.column.name == name and not b.missing_flag)

    def encode(self, frame: pd.DataFrame) -> np.ndarray:
        out = np.zeros((len(frame), self.width), dtype=np.float64)
        for b in self.blocks:
            col = b.column
            absent = missing_rows(frame, col)
            if b.missing_flag:
                out[np.arange(len(frame)), b.start + absent] = 1.0
                continue
            if col.is_numeric:
                values = frame[col.name].to_numpy(dtype=np.float64, na_value=np.nan)
                scaled = self.low + (values - col.min) / (col.max - col.min) * (self.high - self.low)
                out[:, b.start] = np.where(absent, self.low, scaled)
                continue
            codes = pd.Categorical(frame[col.name], categories=list(col.categories)).codes.astype(np.int64)
            unknown = (codes < 0) & ~absent
            if unknown.any():
                row = int(np.flatnonzero(unknown)[0])
                raise ValueError(f"column {col.name!r}: value {frame[col.name].iloc[row]!r} at row {row} is not in the schema")
            codes[absent] = len(col.categories)
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
            if b.missing_flag:
                columns[col.name] = columns[col.name].mask(part.argmax(axis=1) == 1)
                continue
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
                codes = np.clip(np.round(part[:, 0]), 0, levels(col) - 1).astype(np.int64)
            codes = np.where(codes == len(col.categories), -1, codes)  # the missing value's place (nullable)
            columns[col.name] = pd.Series(pd.Categorical.from_codes(codes, dtype=col.dtype))
        return pd.DataFrame(columns)


def missing_rows(frame: pd.DataFrame, column: Column) -> np.ndarray:
    """Where the column's value is missing; a ValueError naming the first such row unless the
    schema declares the column nullable."""
    absent = frame[column.name].isna().to_numpy()
    if absent.any() and not column.nullable:
        raise ValueError(f"column {column.name!r}: missing value at row {int(np.flatnonzero(absent)[0])}, "
                         "and the schema does not declare it nullable")
    return absent


def levels(column: Column) -> int:
    """How many values a discrete column takes in an encoding: its categories, and missing if nullable."""
    return len(column.categories) + column.nullable


def unit_space(frame: pd.DataFrame, encoder: TableEncoder) -> np.ndarray:
    """Rows as points scaled from the public schema alone, for distances between rows (the empirical
    audits' attacks): discrete columns one-hot, numeric columns to [0, 1] by their bounds (`encode`),
    heavy-tailed ones by log1p(x − min) over log1p(max − min)."""
    matrix = encoder.encode(frame)
    for block in encoder.blocks:
        column = block.column
        if block.is_numeric and column.heavy_tailed:
            values = frame[column.name].to_numpy(dtype=float, na_value=column.min)
            matrix[:, block.start] = np.log1p(values - column.min) / math.log1p(column.max - column.min)
    return matrix
