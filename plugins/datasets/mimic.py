"""MIMIC-III binary ICD-9 matrix (DP-auto-GAN §4.1, App. D; docs/methods/dp-auto-gan.md#datasets),
and a synthetic sparse binary stand-in with correlated codes for tests and CI.

`mimic3`: PhysioNet credentialed data, which the project cannot ship. Build the patient × 3-digit
ICD-9 code matrix with medGAN's script (Choi et al.) and point ``DPGYM_MIMIC3`` at it: a CSV (or
.csv.gz / .parquet) with one header row of code names and one 0/1 row per patient, in the order
the split should follow. The split is the paper's 60/20/20 in file order; the harness trains on the
60% and evaluates on the next 20% (as the paper's code tests its evaluators on the validation split);
the last 20% is never read. Suites name datasets only, so the path comes from the environment.
The file is user-supplied, so no checksum is pinned: the cell key carries the file's sha256 (hashed
once per file state), so results follow the matrix's content, not where it lies.

`sparse_codes`: SYNTHETIC, not MIMIC. Each row (a "patient") has a few latent conditions, each
switching on a cluster of codes with high probability, over a long tail of rare independent codes:
high-dimensional, sparse (most codes under 1% prevalence, a few common ones), with strongly
co-occurring codes, so autoencoders and dimension-wise metrics have structure to find.
"""

from __future__ import annotations

import dataclasses
import os
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from dpgym import Column, ColumnKind, DatasetSpec, DatasetUnavailable, Schema, SchemaError, Split, hookimpl, sha256_of

ENV = "DPGYM_MIMIC3"
BINARY = ("0", "1")


def mimic_path() -> Path:
    raw = os.environ.get(ENV)
    if not raw:
        raise DatasetUnavailable(
            f"MIMIC-III is not bundled (PhysioNet credentialed access). Set {ENV} to a CSV or parquet file "
            "of the patient × ICD-9 code 0/1 matrix (header row = code names), built with medGAN's script")
    path = Path(raw).expanduser()
    if not path.is_file():
        raise DatasetUnavailable(f"{ENV}={raw}: no such file")
    return path


def mimic_availability() -> str:
    """Empty when DPGYM_MIMIC3 names a file, else the how-to line `mimic_path` raises; reads nothing."""
    try:
        mimic_path()
    except DatasetUnavailable as err:
        return str(err)
    return ""


def mimic_checksum() -> str:
    """The user's file's sha256, "unavailable" without one."""
    try:
        path = mimic_path()
    except DatasetUnavailable:
        return "unavailable"
    return _sha256(path.resolve(), path.stat().st_mtime_ns, path.stat().st_size)


@cache
def _sha256(path: Path, mtime_ns: int, size: int) -> str:
    """Hashed once per file state in a process: discovery builds the spec in every worker."""
    return sha256_of(path)


def _read_mimic(path: Path, header_only: bool = False) -> pd.DataFrame:
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
        return frame.iloc[:0] if header_only else frame
    return pd.read_csv(path, nrows=0 if header_only else None, dtype=str)


def binary_schema(name: str, codes: list[str]) -> Schema:
    return Schema(name, tuple(Column(str(c), ColumnKind.BINARY, BINARY) for c in codes))


def mimic_schema() -> Schema:
    """Code names are public (the ICD-9 vocabulary); they are read from the file's header only."""
    return binary_schema("mimic3", list(_read_mimic(mimic_path(), header_only=True).columns))


def split_60_20(frame: pd.DataFrame) -> Split:
    n_train, n_valid = int(0.6 * len(frame)), int(0.2 * len(frame))
    return Split(train=frame.iloc[:n_train].reset_index(drop=True),
                 test=frame.iloc[n_train:n_train + n_valid].reset_index(drop=True))


def load_mimic() -> Split:
    frame = _read_mimic(mimic_path()).astype(str)
    bad = sorted(set(np.unique(frame.to_numpy())) - set(BINARY))
    if bad:
        raise SchemaError(f"{ENV}={mimic_path()}: expected a 0/1 matrix, found values {bad[:5]}")
    return split_60_20(mimic_schema().conform(frame, "MIMIC-III matrix"))


# ---------------------------------------------------------------------------------------------
# Synthetic stand-in
# ---------------------------------------------------------------------------------------------

STANDIN_CODES, STANDIN_ROWS, STANDIN_CONDITIONS, STANDIN_SEED = 200, 6000, 12, 20_200


def sparse_codes_matrix(rows: int = STANDIN_ROWS, codes: int = STANDIN_CODES, conditions: int = STANDIN_CONDITIONS,
                        seed: int = STANDIN_SEED) -> np.ndarray:
    """0/1 matrix: per row, Poisson(1.2) conditions drawn with Zipf weights; a condition turns on
    each code of its cluster (6–15 codes) with probability 0.3–0.9; plus background codes at
    Zipf-distributed prevalences from 0.05% to 3%."""
    rng = np.random.default_rng(seed)
    clusters = [rng.choice(codes, size=rng.integers(6, 16), replace=False) for _ in range(conditions)]
    strengths = [rng.uniform(0.3, 0.9, size=len(c)) for c in clusters]
    weights = 1.0 / np.arange(1, conditions + 1)
    weights /= weights.sum()
    background = np.clip(0.03 / rng.permutation(np.arange(1, codes + 1)) ** 0.9, 5e-4, 0.03)
    x = rng.random((rows, codes)) < background
    counts = rng.poisson(1.2, size=rows)
    for i in range(rows):
        for k in rng.choice(conditions, size=counts[i], p=weights):
            x[i, clusters[k]] |= rng.random(len(clusters[k])) < strengths[k]
    return x.astype(np.int8)


@cache
def standin_schema(codes: int = STANDIN_CODES) -> Schema:
    return binary_schema("sparse_codes", [f"code{j:03d}" for j in range(codes)])


def load_standin(rows: int = STANDIN_ROWS, codes: int = STANDIN_CODES) -> Split:
    """The stand-in's split; smaller `rows`/`codes` give a smaller dataset of the same kind (tests)."""
    matrix = sparse_codes_matrix(rows=rows, codes=codes)
    schema = standin_schema(codes)
    frame = pd.DataFrame({c: pd.Categorical.from_codes(matrix[:, j], categories=list(BINARY))
                          for j, c in enumerate(schema.names)})
    return split_60_20(schema.conform(frame, "sparse_codes"))


MIMIC = DatasetSpec(
    name="mimic3",
    version="1",
    load=load_mimic,
    schema=mimic_schema,
    citation="Johnson, A. et al. (2016). MIMIC-III, a freely accessible critical care database. Sci. Data 3, 160035",
    license="PhysioNet Credentialed Health Data License 1.5.0 (user-supplied)",
    checksum="unavailable",  # the file's, filled in by the hook
    description=f"MIMIC-III patients × 3-digit ICD-9 codes (binary), user-supplied via ${ENV}; split 60/20 in file order",
    availability=mimic_availability,
)

STANDIN = DatasetSpec(
    name="sparse_codes",
    version="1",
    load=load_standin,
    schema=standin_schema,
    citation="synthetic stand-in for MIMIC-III (dpgym), seeded",
    license="CC0 (generated)",
    checksum=f"synthetic:seed={STANDIN_SEED},rows={STANDIN_ROWS},codes={STANDIN_CODES},conditions={STANDIN_CONDITIONS}",
    description="SYNTHETIC sparse binary codes with correlated clusters (a MIMIC-III stand-in, not real data); "
                f"{STANDIN_ROWS} rows × {STANDIN_CODES} codes, split 60/20",
)


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [dataclasses.replace(MIMIC, checksum=mimic_checksum()), STANDIN]
