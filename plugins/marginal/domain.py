"""A table's discrete domain, built from its public schema alone, and the way back to values.

Each column becomes one attribute with a fixed number of cells:

- a categorical, ordinal or binary column: one cell per schema category;
- a numeric column: the bins of `independent` (`numeric_bins` even bins over the public bounds,
  evenly spaced in log1p for a `heavy_tailed` column, one bin per value for an integer column
  with at most `numeric_bins` values), so that both generators discretize a column alike;
- a column on a grid (integers, and continuous columns with a `step`) keeps only the bins that
  hold a grid value: a log-spaced bin narrower than one step would be a cell no row can reach;
- a nullable column: one more cell, the last, for a missing value.

Samples are decoded within their cell: a category is its own value; a grid column's value is
drawn uniformly among the grid values of its bin, so it is a valid integer (or min + k·step) that
encodes back into the same cell; a continuous column's value is drawn uniformly within its bin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpgym import Column, ColumnKind, Schema
from dpgym.plugins.generators.independent.model import Bins


@dataclass(frozen=True)
class Attribute:
    """One column as a discrete attribute of the model's domain."""

    column: Column
    bins: Bins
    # Index in `bins` of each value cell, in order (a missing value's cell comes after these).
    kept_bins: np.ndarray
    # Grid columns: the first grid index k (value min + k·step) of each value cell, and one past
    # the last grid index, so cell c holds the grid indices grid_starts[c] … grid_starts[c+1] − 1.
    grid_starts: np.ndarray | None

    @classmethod
    def of(cls, column: Column, numeric_bins: int) -> Attribute:
        bins = Bins.of(column, numeric_bins)
        value_bins = np.arange(bins.size - column.nullable)
        if not column.is_numeric or grid_step(column) is None:
            return cls(column, bins, value_bins, None)
        starts = first_grid_index(column, bins, value_bins)
        end = grid_last_index(column) + 1
        kept = np.flatnonzero(starts < np.append(starts[1:], end))
        return cls(column, bins, kept, np.append(starts[kept], end))

    @property
    def size(self) -> int:
        return len(self.kept_bins) + self.column.nullable

    @property
    def missing(self) -> int | None:
        return len(self.kept_bins) if self.column.nullable else None

    def encode(self, values: pd.Series) -> np.ndarray:
        """Each value's cell. A value off the column's grid that falls in a dropped bin counts in
        the cell below it (the first cell if none is below)."""
        cells = self.bins.cells(values)
        value_cell = np.maximum(np.searchsorted(self.kept_bins, cells, side="right") - 1, 0)
        absent = values.isna().to_numpy()
        return np.where(absent, self.missing if self.missing is not None else 0, value_cell)

    def decode(self, cells: np.ndarray, rng: np.random.Generator) -> pd.Series:
        """Values for `cells`, drawn uniformly within each cell."""
        column = self.column
        absent = cells == self.missing if self.missing is not None else np.zeros(len(cells), dtype=bool)
        value_cells = np.where(absent, 0, cells)
        if not column.is_numeric:
            return pd.Series(pd.Categorical.from_codes(np.where(absent, -1, cells), dtype=column.dtype))
        if self.grid_starts is not None:
            grid_index = rng.integers(self.grid_starts[value_cells], self.grid_starts[value_cells + 1])
            values = grid_value(column, grid_index)
        else:
            bins = self.kept_bins[value_cells]
            values = rng.uniform(self.bins.edges[bins], self.bins.edges[bins + 1])
        if absent.any():
            return pd.Series(np.where(absent, np.nan, values)).astype(column.dtype)
        return pd.Series(values).astype(column.dtype)


def grid_step(column: Column) -> float | None:
    """The spacing of the values a numeric column can take, when the schema fixes one."""
    return 1.0 if column.kind is ColumnKind.INTEGER else column.step


def grid_last_index(column: Column) -> int:
    """The largest k with min + k·step ≤ max."""
    return math.floor((column.max - column.min) / grid_step(column) + 1e-9)


def grid_value(column: Column, grid_index: np.ndarray) -> np.ndarray:
    if column.kind is ColumnKind.INTEGER:
        return np.int64(column.min) + grid_index.astype(np.int64)
    return column.min + grid_index * column.step


def first_grid_index(column: Column, bins: Bins, bin_index: np.ndarray) -> np.ndarray:
    """For each bin, the first grid index whose value the column's encoder puts in that bin or a
    later one. The division gives it to within one step of float error; checking the neighbouring
    grid values with the encoder itself makes the answer exact, so a decoded value always encodes
    back into its own cell."""
    step, last = grid_step(column), grid_last_index(column)

    def bin_of(grid_index: np.ndarray) -> np.ndarray:
        return bins.cells(pd.Series(grid_value(column, np.clip(grid_index, 0, last)), dtype=float))

    estimate = np.clip(np.ceil((bins.edges[bin_index] - column.min) / step), 0, last + 1).astype(np.int64)
    estimate[0] = 0
    too_late = (estimate > 0) & (bin_of(estimate - 1) >= bin_index)
    estimate = np.where(too_late, estimate - 1, estimate)
    too_early = (estimate <= last) & (bin_of(estimate) < bin_index)
    return np.where(too_early, estimate + 1, estimate)


class TableDomain:
    """Every column of a schema as an attribute; rows in and out of cell codes."""

    def __init__(self, schema: Schema, numeric_bins: int):
        self.schema = schema
        self.attributes = {column.name: Attribute.of(column, numeric_bins) for column in schema.columns}

    @property
    def sizes(self) -> dict[str, int]:
        return {name: attribute.size for name, attribute in self.attributes.items()}

    def encode(self, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        return {name: attribute.encode(frame[name]) for name, attribute in self.attributes.items()}

    def decode(self, cells: dict[str, np.ndarray], rng: np.random.Generator) -> pd.DataFrame:
        return pd.DataFrame({name: attribute.decode(np.asarray(cells[name], dtype=np.int64), rng)
                             for name, attribute in self.attributes.items()})
