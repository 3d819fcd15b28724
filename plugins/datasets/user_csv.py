"""User datasets: a CSV or Parquet file plus a schema TOML, named ``csv:PATH[,key=value...]``.

The schema defaults to the data file's name with ``.schema.toml`` in place of its suffixes
(``data/people.csv`` -> ``data/people.schema.toml``); ``schema=PATH`` names another. Relative paths
are relative to the working directory. The train/test split is, in this order of precedence:

- ``test=PATH``: a second file with the test rows (same schema);
- ``split_column=NAME``: a column of the file holding ``train`` or ``test`` (not in the schema);
- otherwise a seeded random split, ``test_fraction=0.2`` and ``seed=0`` unless given.

Rows breaking the schema are an error naming the file, the column and the first offending rows
(rows numbered from 1 after the header). A schema drafted by ``dpgym schema infer`` and not yet
reviewed loads with an `UnreviewedSchemaWarning`. Optional top-level ``citation`` and ``license``
keys of the schema file are reported as the dataset's provenance.
"""

from __future__ import annotations

import tomllib
import warnings
from functools import cache, partial
from pathlib import Path
from typing import NoReturn

import pandas as pd

from dpgym import (
    DatasetSpec, DatasetUnavailable, PARQUET_SUFFIXES, Schema, SchemaError, SpecLookup, Split,
    UnreviewedSchemaWarning, combined_checksum, hookimpl, read_table, sha256_of, split_rows,
)
from dpgym.plugins.datasets.parametric import DatasetArgumentError, parse_options

DATA_SUFFIXES = {".csv", ".tsv", ".txt", ".gz", ".bz2", ".xz", ".zst", ".zip", *PARQUET_SUFFIXES}
def _fraction(value: str) -> float:
    fraction = float(value)
    if not 0 < fraction < 1:
        raise ValueError("a fraction of the rows lies strictly between 0 and 1")
    return fraction


OPTIONS = {"schema": Path, "test": Path, "split_column": str, "test_fraction": _fraction, "seed": int}
SPLIT_VALUES = ("train", "test")
USAGE = "name a user dataset csv:PATH (schema beside it as NAME.schema.toml, or csv:PATH,schema=FILE)"


def default_schema_path(data: Path) -> Path:
    stem = data
    while stem.suffix.lower() in DATA_SUFFIXES:
        stem = stem.with_suffix("")
    return stem.with_name(stem.name + ".schema.toml")


def schema(path: Path) -> Schema:
    """The user's schema; warns on every call while it is an unreviewed draft (the runner asks once
    per cell, so each cell's result records the warning)."""
    table = Schema.from_toml(path)
    if not table.reviewed:
        warnings.warn(
            f"schema {path} was inferred from the data and is not reviewed: its bounds and categories come "
            "from private rows and are not public. Replace them with public values and set reviewed = true.",
            UnreviewedSchemaWarning,
            stacklevel=2,
        )
    return table


def _rows(path: Path) -> tuple[pd.DataFrame, str]:
    """The file's rows, numbered from 1 so schema errors point into the file. They are records, not
    lines: the CSV reader skips blank lines, and a quoted field may span lines."""
    frame = read_table(path)
    what = f"{path} (rows numbered from 1 after the header)"
    if frame.empty:
        raise SchemaError(f"{path}: no data rows")
    frame.index = pd.RangeIndex(1, len(frame) + 1)
    return frame, what


def load(data: Path, options: dict) -> Split:
    schema_path = options.get("schema") or default_schema_path(data)
    table = schema(schema_path)
    frame, what = _rows(data)
    if "test" in options:
        test, test_what = _rows(options["test"])
        return Split(train=table.conform(frame, what), test=table.conform(test, test_what))
    if "split_column" in options:
        return _split_by_column(frame, what, table, options["split_column"])
    return split_rows(table.conform(frame, what), options.get("test_fraction", 0.2), options.get("seed", 0),
                      what=f"{data} (a seeded split; test=FILE or split_column=NAME choose the test rows instead)")


def _split_by_column(frame: pd.DataFrame, what: str, table: Schema, column: str) -> Split:
    if column not in frame.columns:
        raise SchemaError(f"{what}: no split column {column!r}")
    which = frame.pop(column).astype(str).str.strip().str.lower()
    bad = ~which.isin(SPLIT_VALUES)
    if bad.any():
        shown = ", ".join(f"{i}={v!r}" for i, v in which[bad].head(5).items())
        raise SchemaError(f"{what}: split column {column!r} must hold train or test: {int(bad.sum())} rows (first: {shown})")
    rows = table.conform(frame, what)
    is_test = (which == "test").to_numpy()
    return Split(train=rows[~is_test].reset_index(drop=True), test=rows[is_test].reset_index(drop=True))


def _provenance(schema_path: Path) -> dict[str, str]:
    try:
        raw = tomllib.loads(schema_path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return {}  # reported by schema() when the dataset is used
    return {key: str(raw[key]) for key in ("citation", "license") if key in raw}


def _parse(argument: str) -> tuple[Path, dict, Path]:
    path_text, _, rest = argument.partition(",")
    if not path_text:
        raise DatasetArgumentError(f"csv: no file given; {USAGE}")
    data = Path(path_text)
    options = parse_options(rest, OPTIONS, f"csv:{path_text}")
    return data, options, options.get("schema") or default_schema_path(data)


def _state(path: Path, what: str) -> tuple[int, int]:
    """The file's modification time and size; a missing file is a mistyped name, refused here."""
    if path.is_dir():
        raise DatasetArgumentError(f"{what} {path} is a directory, not a file ({USAGE})")
    if not path.is_file():
        raise DatasetArgumentError(f"{what} {path} does not exist ({USAGE})")
    return path.stat().st_mtime_ns, path.stat().st_size


def spec(argument: str) -> DatasetSpec:
    """The spec of ``csv:argument``: one object per argument and file state, so the runner's
    per-process load cache holds each file once, and an edited file is a new dataset."""
    data, options, schema_path = _parse(argument)
    files = {"data file": data, "test file": options.get("test"), "schema file": schema_path}
    return _spec(argument, tuple(_state(path, what) for what, path in files.items() if path is not None))


@cache
def _spec(argument: str, state: tuple) -> DatasetSpec:
    data, options, schema_path = _parse(argument)
    files = [p for p in (data, options.get("test"), schema_path) if p is not None]
    provenance = _provenance(schema_path)
    checksum = combined_checksum([sha256_of(p) for p in files])
    return DatasetSpec(
        name=f"csv:{argument}",
        version="user",
        load=partial(load, data, options),
        schema=partial(schema, schema_path),
        citation=provenance.get("citation", f"user-provided file {data}"),
        license=provenance.get("license", "user-provided (not stated)"),
        # data and schema file contents: a changed file or schema is a different dataset
        checksum=checksum,
        identity=_identity(checksum, options),
        description=f"user dataset {data} with schema {schema_path}",
    )


def _identity(checksum: str, options: dict) -> str:
    """The files' contents and the options that choose the split; where the files lie (data, test
    and schema paths) is not part of it."""
    split = ",".join(f"{key}={options[key]}" for key in ("split_column", "test_fraction", "seed") if key in options)
    return f"csv:sha256={checksum}" + (f",{split}" if split else "")


def _no_file() -> NoReturn:
    """Load and schema of plain ``csv``: it only exists with a file named after the colon."""
    raise DatasetUnavailable(f"csv: {USAGE}")


SPEC = DatasetSpec(
    name="csv",
    version="user",
    load=_no_file,
    schema=_no_file,
    citation="user-provided",
    license="user-provided",
    checksum="",
    description="your own CSV/Parquet file plus schema TOML: csv:PATH[,schema=FILE][,test=FILE|,split_column=COL|,test_fraction=F,seed=N]",
    resolve=lambda argument, plugins: spec(argument),
    availability=lambda: f"name a file: {USAGE}",
)


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [SPEC]
