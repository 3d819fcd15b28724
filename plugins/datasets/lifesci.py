"""Life Science (DP-EM / DP-NF): 26,733 rows, 10 principal components in the unit ball, 0/1 label.

The split is DP-NF's 10-fold protocol with dp-flows' own folds: dataset ``lifesci:fold=k`` holds
out test fold k (2,673 or 2,674 rows) and trains on the other nine; ``lifesci`` is fold 1. Report
the mean over the ten folds as the paper does.

The fold files carry the features but not the label, so each fold row is matched to its row of
DP-EM's lifesci.csv (features divided by the published max row norm; equal to 1e-15). Eight groups
of identical feature rows carry both labels; within such a group rows are paired in file order.
Licence: none stated by the original authors (see ``datasets/SOURCES.md``).
"""

from __future__ import annotations

from functools import cache, partial

import numpy as np
import pandas as pd

from dpgym import (
    DatasetSpec, REPO_DATA, Schema, SchemaError, SpecLookup, Split, combined_checksum, files_availability, hookimpl,
    verified,
)
from dpgym.plugins.datasets.parametric import fold_number, parse_options

FOLDS = 10
LIFESCI = "lifesci/lifesci.csv.xz"
FILES = {
    LIFESCI: "8ad0060fc41bedbaf62b98049a2ec52ce3f53bbe935032124da869a9397fee57",
    "lifesci/dpflows_test_folds/test_1.csv.xz": "acfe360a20710c19e99c6caa405c9a384243bffbd4222cbcc5fd525d25499ff6",
    "lifesci/dpflows_test_folds/test_2.csv.xz": "58e41e99d3821e0b41de1b3daf27a75a4fcb3e7f02f008af7c5408b207c88fe7",
    "lifesci/dpflows_test_folds/test_3.csv.xz": "f3ff9e85fa0ac95fc87e875196ca6b143efaeee77675843f0a2357682cbf56c0",
    "lifesci/dpflows_test_folds/test_4.csv.xz": "e2eb6e00919c40f232467d9f9646eb89d1f4502709badcb27c7db2f8690a2100",
    "lifesci/dpflows_test_folds/test_5.csv.xz": "766d1d50c85067708c254afef4aefb30d3e0be185c3aac80151e8c2a66a5d48b",
    "lifesci/dpflows_test_folds/test_6.csv.xz": "7a71dd4bf15f8cd9e99d2e561396c5fbb092d0260e805f107ec86a551dcaf5f5",
    "lifesci/dpflows_test_folds/test_7.csv.xz": "5418bc567c80921d438c3604285916f4430f3fc0bffbde4c25affc26d2a8ae14",
    "lifesci/dpflows_test_folds/test_8.csv.xz": "30f1ac14bea6bd853f7a281f11ac5082341d89f789791fa47db25e1de74ae9de",
    "lifesci/dpflows_test_folds/test_9.csv.xz": "2a74cfa402b665c280e0dd14d18d485e4c12819b11e6ddeb05217e7da5db309f",
    "lifesci/dpflows_test_folds/test_10.csv.xz": "fc017c11f4770f3b3a996e60868154d3cc31396f62dd7e396a1576277c22db74",
}
MAX_ROW_NORM = 16.24094504854936  # DP-EM's scale: the largest row L2 norm of lifesci.csv's features
MATCH_DECIMALS = 9  # fold rows equal lifesci.csv / MAX_ROW_NORM to 1e-15; 9 decimals separates all rows


@cache
def schema() -> Schema:
    return Schema.from_toml(REPO_DATA / "lifesci" / "schema.toml")


def _fold_path(k: int) -> str:
    return f"lifesci/dpflows_test_folds/test_{k}.csv.xz"


def _keyed(features: pd.DataFrame) -> pd.DataFrame:
    """Rounded features plus the occurrence number, so identical rows pair up one to one."""
    key = features.round(MATCH_DECIMALS)
    key["occurrence"] = key.groupby(list(features.columns)).cumcount()
    return key


@cache
def _labelled_folds() -> pd.DataFrame:
    """All 26,733 rows in schema form with a `fold` column (1..10)."""
    features = [c.name for c in schema().features]
    folds = pd.concat(
        [pd.read_csv(verified(_fold_path(k), FILES[_fold_path(k)]), header=None, names=features).assign(fold=k)
         for k in range(1, FOLDS + 1)],
        ignore_index=True,
    )
    original = pd.read_csv(verified(LIFESCI, FILES[LIFESCI]), header=None, names=[*features, "label"])
    scaled = original[features] / MAX_ROW_NORM
    labels = _keyed(scaled).assign(row=np.arange(len(original)))
    matched = _keyed(folds[features]).merge(labels, on=[*features, "occurrence"], how="left", validate="1:1")
    if matched["row"].isna().any():
        raise SchemaError(f"lifesci: {int(matched['row'].isna().sum())} fold rows have no row in {LIFESCI}")
    row = matched["row"].to_numpy(dtype=int)
    gap = float(np.abs(scaled.to_numpy()[row] - folds[features].to_numpy()).max())
    if gap > 1e-12:
        raise SchemaError(f"lifesci: fold rows differ from {LIFESCI} / {MAX_ROW_NORM} by up to {gap:g}")
    rows = folds[features].assign(label=original["label"].to_numpy()[row])
    return schema().conform(rows, "lifesci folds").assign(fold=folds["fold"])


def load_fold(k: int) -> Split:
    rows = _labelled_folds()
    held_out = rows["fold"] == k
    return Split(
        train=rows.loc[~held_out].drop(columns="fold").reset_index(drop=True),
        test=rows.loc[held_out].drop(columns="fold").reset_index(drop=True),
    )


@cache  # one spec object per variant, so the runner's per-process load cache is hit
def spec(fold: int = 1) -> DatasetSpec:
    fields = dict(
        version="1",
        load=lambda: load_fold(fold),
        schema=schema,
        citation=(
            "Park, M., Foulds, J., Chaudhuri, K. & Welling, M. (2017). DP-EM: Differentially Private Expectation "
            "Maximization. AISTATS. Folds: Waites, C. & Cummings, R. (2021). Differentially Private Normalizing "
            "Flows for Privacy-Preserving Density Estimation. arXiv:2103.14068 (code: DPFlows/dp-flows, MIT)"
        ),
        license="none stated; redistribution unclear (datasets/SOURCES.md)",
        checksum=combined_checksum(list(FILES.values())),
        availability=partial(files_availability, FILES),
    )
    if fold != 1:
        return DatasetSpec(name=f"lifesci:fold={fold}", description=f"Life Science, dp-flows fold {fold} held out", **fields)
    return DatasetSpec(
        name="lifesci", resolve=_resolve,
        description="Life Science (DP-EM scaling, unit ball); fold 1 of 10 held out; lifesci:fold=k for the others",
        **fields,
    )


def _resolve(argument: str, plugins: SpecLookup) -> DatasetSpec:
    options = parse_options(argument, {"fold": fold_number(FOLDS)}, "lifesci")
    return spec(options.get("fold", 1))


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [spec()]
