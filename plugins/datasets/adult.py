"""UCI Adult (Census Income 1994): predict whether income exceeds $50K from 14 attributes.

Official split: adult.data (32,561 rows) for training, adult.test (16,281 rows) for testing.
Missing values ("?") are kept as an explicit category (see ``datasets/adult/schema.toml``).
``adult:undersample=0.4,test=0.1`` is DP-MERF's preparation (`dpgym.plugins.datasets.parametric.rebalance`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial

import pandas as pd

from dpgym import DatasetSpec, REPO_DATA, Schema, Split, combined_checksum, files_availability, hookimpl, verified
from dpgym.plugins.datasets.parametric import rebalanceable

FILES = {
    "adult/adult.data.xz": "03c5722d4eaeaa2962f81284344def3c5150dadc6ddf841fcbb57f233371445c",
    "adult/adult.test.xz": "45248f451a46bace9a234ece542aeadb66ea52e3c078f136d4b2c069cb38b1cd",
}


@cache
def schema() -> Schema:
    return Schema.from_toml(REPO_DATA / "adult" / "schema.toml")


def _read(relative: str, skiprows: int) -> pd.DataFrame:
    frame = pd.read_csv(
        verified(relative, FILES[relative]),
        header=None,
        names=schema().names,
        sep=",",
        skipinitialspace=True,
        skiprows=skiprows,
        dtype=str,
        keep_default_na=False,
    )
    # adult.test writes its labels with a trailing dot (">50K.")
    frame["income"] = frame["income"].str.rstrip(".")
    return frame


def load() -> Split:
    # adult.test opens with the line "|1x3 Cross validator"
    train = schema().conform(_read("adult/adult.data.xz", skiprows=0), "adult.data")
    test = schema().conform(_read("adult/adult.test.xz", skiprows=1), "adult.test")
    return Split(train=train, test=test)


SPEC = rebalanceable(DatasetSpec(
    name="adult",
    version="1",
    load=load,
    schema=schema,
    citation="Becker, B. & Kohavi, R. (1996). Adult. UCI Machine Learning Repository. https://doi.org/10.24432/C5XW20",
    license="CC BY 4.0",
    checksum=combined_checksum(list(FILES.values())),
    description="UCI Adult, income >50K; official split 32,561 / 16,281; '?' kept as a category; "
                "adult:undersample=r[,test=f] rebalances",
    availability=partial(files_availability, FILES),
))


def paper_view(name: str, load: Callable[[], Split], schema: Callable[[], Schema], preparation: str, key: str,
               description: str) -> DatasetSpec:
    """A paper's preparation of the Adult files: their citation, licence and availability, and a
    checksum of the files plus `key`, which names the preparation so its cells key apart."""
    return DatasetSpec(name=name, version="1", load=load, schema=schema,
                       citation=f"{SPEC.citation}; preprocessing of {preparation}", license=SPEC.license,
                       checksum=combined_checksum(list(FILES.values()) + [key]), description=description,
                       availability=partial(files_availability, FILES))


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [SPEC]
