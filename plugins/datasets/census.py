"""UCI Census-Income (KDD): predict whether total person income exceeds $50,000 (6.2% positive).

Official split: census-income.data (199,523 rows) for training, census-income.test (99,762 rows)
for testing. The sampling weight `instance weight` is dropped on read (UCI: not a feature);
"?" is kept as a category (see ``datasets/census/schema.toml``).
``census:undersample=0.4,test=0.2`` is DP-MERF's preparation (negatives undersampled to 40 %, then
re-split 80/20; `dpgym.plugins.datasets.parametric.rebalance`).
"""

from __future__ import annotations

from functools import cache, partial

import pandas as pd

from dpgym import DatasetSpec, REPO_DATA, Schema, Split, combined_checksum, files_availability, hookimpl, verified
from dpgym.plugins.datasets.parametric import rebalanceable

FILES = {
    "census/census-income.data.xz": "bc284126b98d723b6a678b9362a0d33203fb8c38caa7eafa0fb2aba02360b67d",
    "census/census-income.test.xz": "3d58fd4a63597007a5624789479625f49383472036ed5094d39c0bbbe24ca5a0",
}
WEIGHT_FIELD = 24  # 0-based position of `instance weight` in the 42 fields of a row


@cache
def schema() -> Schema:
    return Schema.from_toml(REPO_DATA / "census" / "schema.toml")


def _read(relative: str) -> pd.DataFrame:
    names = schema().names
    categorical = [c.name for c in schema().columns if not c.is_numeric]
    frame = pd.read_csv(
        verified(relative, FILES[relative]), header=None, engine="pyarrow",
        names=[*names[:WEIGHT_FIELD], "instance weight", *names[WEIGHT_FIELD:]],
        keep_default_na=False, na_values=[],  # "NA" is a category of hispanic origin, not a missing value
        dtype=dict.fromkeys(categorical, "category"),
    ).drop(columns="instance weight")
    # Fields are separated by ", " and a few values end in a blank; codes parse as numbers; the label
    # ends in ".". Categories are kept as Python strings (object dtype): schema.conform's casts to
    # str then cost about a third less CPU than from pyarrow strings.
    for name in categorical:
        fixed = [str(value).strip().rstrip(".") if name == "income" else str(value).strip()
                 for value in frame[name].cat.categories]
        frame[name] = frame[name].cat.rename_categories(pd.Index(fixed, dtype=object))
    return frame


def load() -> Split:
    train = schema().conform(_read("census/census-income.data.xz"), "census-income.data")
    test = schema().conform(_read("census/census-income.test.xz"), "census-income.test")
    return Split(train=train, test=test)


SPEC = rebalanceable(DatasetSpec(
    name="census",
    version="1",
    load=load,
    schema=schema,
    citation="Census-Income (KDD) (2000). UCI Machine Learning Repository. https://doi.org/10.24432/C5N30T",
    license="CC BY 4.0",
    checksum=combined_checksum(list(FILES.values())),
    description="UCI Census-Income (KDD), income 50000+; official split 199,523 / 99,762; instance weight dropped; "
                "census:undersample=r[,test=f] rebalances",
    availability=partial(files_availability, FILES),
))


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [SPEC]
