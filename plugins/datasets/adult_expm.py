"""UCI Adult as the ExpM+NF paper prepares it: both files pooled, '?' rows dropped (45,222 rows),
stratified 64/16/20 train/dev/test split with a fixed seed (Bridges et al.; docs/methods/expm-nf.md#adult).

The official adult split keeps '?' as a category; this variant is the one the private-learning track
reproduces. `load()` returns train = train+dev (80%, the paper's final fit) and test (20%);
`three_way()` gives the dev split separately for tuning. Both files and the split seed are public,
so the split itself costs no privacy.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import numpy as np
import pandas as pd

from dpgym import DatasetSpec, Schema, Split, hookimpl
from dpgym.plugins.datasets import adult

SPLIT_SEED = 0
FRACTIONS = (0.64, 0.16, 0.20)  # train / dev / test


# Categories no kept row can hold: '?' itself, and workclass "Never-worked", whose rows the CPS
# extraction always codes with occupation '?' (no occupation for someone who never worked).
# Dropping both gives the paper's 7 workclass levels and its 102 features.
UNREACHABLE = {"?", "Never-worked"}


@cache
def schema() -> Schema:
    """Adult's public schema without the categories the dropped rows carried."""
    columns = tuple(
        replace(c, categories=tuple(k for k in c.categories if k not in UNREACHABLE)) if c.categories else c
        for c in adult.schema().columns
    )
    return replace(adult.schema(), name="adult_expm", columns=columns)


@cache
def _pooled() -> pd.DataFrame:
    frames = [adult._read("adult/adult.data.xz", skiprows=0), adult._read("adult/adult.test.xz", skiprows=1)]
    pooled = pd.concat(frames, ignore_index=True)
    return pooled[~(pooled == "?").any(axis=1)].reset_index(drop=True)


def three_way() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Stratified train/dev/test (64/16/20) in schema form."""
    from sklearn.model_selection import train_test_split  # here, not at the top: `dpgym list` imports this module
    rows = schema().conform(_pooled(), "adult.data + adult.test without '?' rows")
    y = rows[schema().target].to_numpy()
    rest, test = train_test_split(np.arange(len(rows)), test_size=FRACTIONS[2], stratify=y, random_state=SPLIT_SEED)
    train, dev = train_test_split(rest, test_size=FRACTIONS[1] / (1 - FRACTIONS[2]), stratify=y[rest],
                                  random_state=SPLIT_SEED)
    pick = lambda idx: rows.iloc[np.sort(idx)].reset_index(drop=True)  # noqa: E731
    return pick(train), pick(dev), pick(test)


def load() -> Split:
    train, dev, test = three_way()
    return Split(train=pd.concat([train, dev], ignore_index=True), test=test)


SPEC = adult.paper_view(
    "adult_expm", load, schema, "Bridges, Tombs & Stanley, ExpM+NF (2023)", f"split-{SPLIT_SEED}-64/16/20",
    "Adult, both files, '?' rows dropped (45,222); stratified 64/16/20, train = train+dev")


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [SPEC]
