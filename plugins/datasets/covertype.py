"""UCI Covertype: forest cover type (7 classes) from 54 cartographic variables, 581,012 cells.

The file is not vendored (too large to bring offline). The loader looks for ``covtype.data.gz`` in
``$DPGYM_DATA/covertype/`` (or the folder given as ``covertype:data_dir=PATH``). When it is absent
and the user allows it with ``DPGYM_ALLOW_DOWNLOAD=1``, it is fetched from UCI. Either way it must
match scikit-learn's pinned sha256 and the published shape and class counts before use; otherwise
loading raises `DatasetUnavailable` with one line saying how to provide the file.

Split: none is official (covtype.info's 11,340 / 3,780 / 565,892 split trains on 2%), so it is fixed
here like intrusion's: stratified, 100,000 test rows (SDGym's 481,012 / 100,000), seed 0.
"""

from __future__ import annotations

import http.client
import os
import shutil
import tempfile
import urllib.request
from functools import cache, partial
from pathlib import Path

import pandas as pd

from dpgym import (
    DatasetSpec, DatasetUnavailable, REPO_DATA, Schema, SpecLookup, Split, data_root, hookimpl, sha256_of, verified,
)
from dpgym.plugins.datasets.parametric import parse_options

ARCHIVE = "covtype.data.gz"
URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/covtype/covtype.data.gz"
SHA256 = "614360d0257557dd1792834a85a1cdebfadc3c4f30b011d56afee7ffb5b15771"  # sklearn/datasets/_covtype.py ARCHIVE
ROWS = 581_012
COLUMNS = 55
CLASS_COUNTS = {"1": 211840, "2": 283301, "3": 35754, "4": 2747, "5": 9493, "6": 17367, "7": 20510}
TEST_ROWS = 100_000
SPLIT_SEED = 0


@cache
def schema() -> Schema:
    return Schema.from_toml(REPO_DATA / "covertype" / "schema.toml")


def folder(data_dir: str | None = None) -> Path:
    """Absolute, so `verified` takes it as it is: a relative data_dir (or $DPGYM_DATA) is the user's,
    relative to the working directory, never to the data root."""
    return (Path(data_dir) if data_dir else data_root() / "covertype").absolute()


def how_to(path: Path) -> str:
    return (
        f"covertype unavailable: put {ARCHIVE} from {URL} at {path} "
        f"(or set DPGYM_DATA / name covertype:data_dir=FOLDER), or set DPGYM_ALLOW_DOWNLOAD=1 to fetch and verify it"
    )


def locate(data_dir: str | None = None) -> Path:
    """The verified archive, downloading it first only if it is absent and the user allows it."""
    path = folder(data_dir) / ARCHIVE
    if not path.is_file():
        if os.environ.get("DPGYM_ALLOW_DOWNLOAD") != "1":
            raise DatasetUnavailable(how_to(path))
        download(path)
    return verified(str(path), SHA256)


def availability(data_dir: str | None = None) -> str:
    path = folder(data_dir) / ARCHIVE
    if path.is_file() or os.environ.get("DPGYM_ALLOW_DOWNLOAD") == "1":
        return ""
    return how_to(path)


def download(path: Path) -> None:
    """Fetch the archive into a scratch folder beside `path`; move it there only if its sha256 matches."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as scratch:  # removed, with any partial file, on exit
            fetched = Path(scratch) / ARCHIVE
            with urllib.request.urlopen(URL, timeout=60) as response, fetched.open("wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
            actual = sha256_of(fetched)
            if actual != SHA256:
                raise DatasetUnavailable(
                    f"covertype: {URL} sent a file with sha256 {actual}, expected {SHA256}; not used. {how_to(path)}"
                )
            os.replace(fetched, path)
    except (OSError, http.client.HTTPException) as err:
        # offline, refused, timed out, disk full, read-only folder (URLError is an OSError), or the
        # connection cut mid-transfer (http.client.IncompleteRead, an HTTPException)
        raise DatasetUnavailable(f"covertype: download from {URL} failed ({err}); {how_to(path)}") from err


def _read(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path, header=None, engine="pyarrow")
    counts = frame.iloc[:, -1].astype(str).value_counts().to_dict() if frame.shape[1] == COLUMNS else {}
    if frame.shape != (ROWS, COLUMNS) or counts != CLASS_COUNTS:
        raise DatasetUnavailable(
            f"covertype: {path} has {frame.shape[0]} rows, {frame.shape[1]} columns and class counts {counts}; "
            f"expected {ROWS}, {COLUMNS} and {CLASS_COUNTS}"
        )
    frame.columns = schema().names
    return frame


def load(data_dir: str | None = None) -> Split:
    from sklearn.model_selection import train_test_split  # here, not at the top: `dpgym list` imports this module
    path = locate(data_dir)
    rows = schema().conform(_read(path), str(path))
    train, test = train_test_split(rows, test_size=TEST_ROWS, stratify=rows["Cover_Type"], random_state=SPLIT_SEED)
    return Split(train=train.reset_index(drop=True), test=test.reset_index(drop=True))


@cache  # one spec object per variant, so the runner's per-process load cache is hit
def spec(data_dir: str | None = None) -> DatasetSpec:
    fields = dict(
        version="1",
        load=partial(load, data_dir),
        schema=schema,
        citation="Blackard, J. (1998). Covertype. UCI Machine Learning Repository. https://doi.org/10.24432/C50K5N",
        license="CC BY 4.0",
        checksum=SHA256,
        description="UCI Covertype, 7 classes; stratified seeded split 481,012 / 100,000; file not vendored",
        availability=partial(availability, data_dir),
    )
    if data_dir:
        return DatasetSpec(name=f"covertype:data_dir={data_dir}", **fields)
    return DatasetSpec(name="covertype", resolve=_resolve, **fields)


def _resolve(argument: str, plugins: SpecLookup) -> DatasetSpec:
    return spec(parse_options(argument, {"data_dir": str}, "covertype").get("data_dir"))


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [spec()]
