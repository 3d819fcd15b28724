"""RAND Health Insurance Experiment (Cameron & Trivedi's person-year file): a public tuning dataset.

No benchmark suite scores it: it is where generator defaults are chosen when neither the paper nor
other public data fixes them, so that a default never comes from rows a leaderboard reports
(docs/privacy.md, "Where defaults come from"; `tuning-*` suites run it, tests/leaderboard/test_suites.py keeps it
out of every other suite). 20,190 person-years of 5,908 persons, 33 columns of mixed type; the
target is self-rated health in four levels.

Split: 20 % of the persons (not person-years) held out, seed 0, so no person is on both sides.

``randhie:steps=none`` is the same rows under the schema without its public `step` grids, so that a
generator models those columns as continuous: the tuning-dp-hflow-dequantization suite sets the two
side by side. It is tuning data too, under its own name (its cells and random streams are its own).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache, partial

import numpy as np
import pandas as pd

from dpgym import DatasetSpec, REPO_DATA, Schema, SpecLookup, Split, files_availability, hookimpl, verified
from dpgym.plugins.datasets.parametric import parse_options

DATA = "randhie/randhie.csv.xz"
SHA256 = "1e4d53456dfb9b2aa96bb69d95831a2868c64ba65aeb86b42b7eab19c51b5c75"
TEST_SHARE = 0.2
SPLIT_SEED = 0


STEPS = ("declared", "none")


@cache
def schema(steps: str = "declared") -> Schema:
    """The public schema; with `steps` "none", its continuous columns carry no `step` grid."""
    declared = Schema.from_toml(REPO_DATA / "randhie" / "schema.toml")
    if steps == "declared":
        return declared
    return replace(declared, columns=tuple(replace(c, step=None) for c in declared.columns))


def steps_option(value: str) -> str:
    if value not in STEPS:
        raise ValueError(f"takes {' or '.join(STEPS)}")
    return value


def _health(frame: pd.DataFrame) -> pd.Series:
    """The file's dummies (excellent omitted) as one four-level column."""
    levels = np.select(
        [frame["hlthp"] == 1, frame["hlthf"] == 1, frame["hlthg"] == 1], ["poor", "fair", "good"], "excellent"
    )
    return pd.Series(levels, index=frame.index)


def person_split(persons: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Row positions of the training and test persons."""
    from sklearn.model_selection import GroupShuffleSplit  # here, not at the top: `dpgym list` imports this module
    splitter = GroupShuffleSplit(n_splits=1, test_size=TEST_SHARE, random_state=SPLIT_SEED)
    return next(splitter.split(persons, groups=persons))


def read() -> pd.DataFrame:
    """The file as published, every column."""
    return pd.read_csv(verified(DATA, SHA256))


def load() -> Split:
    raw = read()
    rows = schema().conform(raw.assign(health=_health(raw))[schema().names], DATA)
    train, test = person_split(raw["zper"])
    return Split(train=rows.iloc[train].reset_index(drop=True), test=rows.iloc[test].reset_index(drop=True))


@cache  # one spec object per variant, so the runner's per-process load cache is hit
def spec(steps: str = "declared") -> DatasetSpec:
    fields = dict(
        version="2",  # 2: steps declared on ghindx, mdeoff and pioff
        load=load,
        schema=partial(schema, steps),
        citation=(
            "Cameron, A. C. & Trivedi, P. K. (2005). Microeconometrics: Methods and Applications. Cambridge "
            "University Press. RAND Health Insurance Experiment data, as distributed with statsmodels"
        ),
        license="public domain (statsmodels' randhie notice)",
        checksum=SHA256,
        availability=partial(files_availability, [DATA]),
    )
    description = ("RAND HIE person-years, self-rated health; tuning data, scored by no benchmark suite; "
                   "persons split 80/20, seed 0")
    if steps != "declared":
        return DatasetSpec(name=f"randhie:steps={steps}", description=f"{description}; schema without step grids",
                           **fields)
    return DatasetSpec(name="randhie", resolve=_resolve, description=f"{description}; randhie:steps=none drops "
                       "the schema's step grids", **fields)


def _resolve(argument: str, plugins: SpecLookup) -> DatasetSpec:
    return spec(parse_options(argument, {"steps": steps_option}, "randhie").get("steps", "declared"))


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [spec()]
