"""Drafting a schema from a user's own table, for the user to review before any run.

A draft's kinds, categories and bounds are read off the rows, so they are not public: a bound is
an observed extreme, a category may name one person. The draft says so in its header and carries
``inferred_from_data = true, reviewed = false``; loading a dataset whose schema is still unreviewed
warns with `UnreviewedSchemaWarning` until the user replaces those values with public ones.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from dpgym.schema import MAX_EXACT_INTEGER, Column, ColumnKind, Schema, SchemaError

PARQUET_SUFFIXES = {".parquet", ".pq"}

DRAFT_HEADER = """\
# DRAFT SCHEMA derived from the private rows of {source} by `dpgym schema infer`.
# Every category list and numeric bound below was read off those rows: they are NOT public, and a
# generator that learns its domain from them leaks information about individual rows (the largest
# value, a rare category). Before using this schema:
#   - replace each min/max by a public bound (documentation, a physical or legal limit, a round
#     number chosen without looking at the rows), widened and rounded;
#   - replace each category list by the documented domain of the column;
#   - check every kind, mark nullable columns, set `target` if there is one;
#   - then set `reviewed = true`. Until then every load of this dataset warns that it is unreviewed.
"""


class UnreviewedSchemaWarning(UserWarning):
    """A dataset is loaded with a schema drafted from its own rows that nobody has reviewed."""


def read_table(path: str | Path) -> pd.DataFrame:
    """A user's CSV (all fields as text, empty fields missing) or Parquet file, as the csv plugin reads it.

    A CSV header naming a column twice is refused: pandas would rename the second one (``a.1``), a
    column the file does not have.
    """
    path = Path(path)
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return pd.read_parquet(path)
    try:
        header = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False).iloc[0].tolist()
    except pd.errors.EmptyDataError:
        raise SchemaError(f"{path}: the file is empty; it needs a header line naming the columns") from None
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        raise SchemaError(f"{path}: the header names columns {duplicates} more than once")
    return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])


def infer_schema(frame: pd.DataFrame, name: str, target: str | None = None) -> Schema:
    """A draft schema whose kinds, categories and bounds come from `frame` itself (see module doc)."""
    if frame.empty:
        raise SchemaError(f"no rows to draft schema {name!r} from (the file has {len(frame.columns)} columns, 0 rows)")
    columns = tuple(_infer_column(str(label), frame[label]) for label in frame.columns)
    return Schema(name=name, columns=columns, target=target, inferred_from_data=True, reviewed=False)


def draft_toml(schema: Schema, source: str) -> str:
    """The draft as TOML, under a header saying where it came from and what to review."""
    return DRAFT_HEADER.format(source=source) + schema.to_toml()


def _infer_column(name: str, values: pd.Series) -> Column:
    if pd.api.types.is_datetime64_any_dtype(values) or pd.api.types.is_timedelta64_dtype(values):
        raise SchemaError(f"column {name!r} holds dates or times, which no column kind models: convert it to a "
                          "number (e.g. days since a public reference date) or to text categories first")
    present = values.dropna()
    nullable = bool(values.isna().any())
    text = present.astype(str)
    # Booleans, nullable ones included (object or "boolean" dtype), are categories, not 0/1 numbers
    boolean = len(present) > 0 and bool(present.map(lambda v: isinstance(v, (bool, np.bool_))).all())
    numbers = pd.to_numeric(present, errors="coerce") if not boolean else None
    if numbers is not None and len(present) and not numbers.isna().any() and set(text) != {"0", "1"}:
        low, high = float(numbers.min()), float(numbers.max())
        whole = bool(np.all(np.isfinite(numbers)) and np.all(numbers == np.round(numbers))
                     and max(-low, high) <= MAX_EXACT_INTEGER)
        kind = ColumnKind.INTEGER if whole else ColumnKind.CONTINUOUS
        if whole:
            low, high = math.floor(low), math.ceil(high)
        if not low < high:  # a constant column: Column needs min < max
            high = low + 1
        return Column(name, kind, min=low, max=high, nullable=nullable)
    categories = tuple(sorted(set(text))) or ("",)
    kind = ColumnKind.BINARY if len(categories) == 2 else ColumnKind.CATEGORICAL
    return Column(name, kind, categories=categories, nullable=nullable)
