"""Drafting a schema from a user's own table, for the user to review before any run.

A draft's kinds, categories and bounds are read off the rows, so they are not public: a bound is
an observed extreme, a category may name one person. The draft says so in its header and carries
``inferred_from_data = true, reviewed = false``; loading a dataset whose schema is still unreviewed
warns with `UnreviewedSchemaWarning` until the user replaces those values with public ones.
"""

from __future__ import annotations

import math
import re
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


class UnreadableTable(ValueError):
    """A user's data file cannot be read as a table; the message names the file and the place."""


def read_table(path: str | Path) -> pd.DataFrame:
    """A user's CSV (all fields as text, empty fields missing) or Parquet file, as the csv plugin reads it.

    A CSV header naming a column twice is refused: pandas would rename the second one (``a.1``), a
    column the file does not have. Every failure to read is an `UnreadableTable` (or, for an
    empty file or a repeated header name, a `SchemaError`) whose message starts with the file.
    """
    path = Path(path)
    try:
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
    except FileNotFoundError:
        raise UnreadableTable(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UnreadableTable(f"{path}: is a directory, not a data file") from None
    except PermissionError:
        raise UnreadableTable(f"{path}: not readable (permission denied)") from None
    except UnicodeDecodeError as err:
        raise UnreadableTable(f"{path}: not UTF-8 text ({_first_bad_byte(path, err)}); save it as UTF-8 "
                              "(a binary file or another encoding, e.g. latin-1, reads this way)") from None
    except pd.errors.ParserError as err:
        raise UnreadableTable(f"{path}: {_parser_fault(str(err))}") from None
    except (OSError, ValueError) as err:  # pyarrow's and the decompressors' faults are ValueErrors/OSErrors
        if isinstance(err, SchemaError):
            raise
        raise UnreadableTable(f"{path}: cannot be read as a {'Parquet' if path.suffix.lower() in PARQUET_SUFFIXES else 'CSV'} "
                              f"table: {type(err).__name__}: {err}") from None


def _first_bad_byte(path: Path, err: UnicodeDecodeError) -> str:
    """Where a plain file stops being UTF-8: the line (1 is the header) and the byte; for a
    compressed file, what the decoder said."""
    if path.suffix.lower() not in {".csv", ".tsv", ".txt"}:
        return f"{err.reason} at byte 0x{err.object[err.start]:02x}"
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exact:
        line = data.count(b"\n", 0, exact.start) + 1
        return f"line {line}: byte 0x{data[exact.start]:02x} at offset {exact.start}"
    return err.reason


def _parser_fault(message: str) -> str:
    """pandas' "Error tokenizing data. C error: Expected 3 fields in line 5, saw 4" as a sentence."""
    match = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", message)
    if match:
        expected, line, saw = match.groups()
        return f"line {line} has {saw} fields where the header has {expected} (a ragged row: a stray delimiter or unquoted comma)"
    return f"not a well-formed CSV: {message.strip()}"


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
