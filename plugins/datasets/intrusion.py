"""KDD Cup 1999, 10% subset ("Intrusion"): classify network connections as normal or an attack.

Two datasets share the features and the split: ``intrusion`` (target ``attack_category``, the five
classes normal/dos/probe/r2l/u2r used by SDGym and DP-MERF) and ``intrusion23`` (target ``attack``,
the 23 labels of the file). The file has no official test part, so the split is fixed here:
stratified on the 23 labels, 100,000 test rows, seed 0 -- the 394,021 / 100,000 sizes of the
SDGym/CTGAN benchmark version that the DP-HFlow spec (section 5.1) points to; stratifying keeps the
rare attacks in both parts (DP-MERF's 70/30 re-split is that method's own choice). The 10% file repeats many rows (145,586 distinct of 494,021), so
train and test share identical rows, as in every published use of it.
``intrusion:undersample=0.3,test=0.3`` is DP-MERF's preparation (dos, the majority category, undersampled
to 30 %, then re-split 70/30; `dpgym.plugins.datasets.parametric.rebalance`).
"""

from __future__ import annotations

from functools import cache, partial

import pandas as pd

from dpgym import (
    Column, ColumnKind, DatasetSpec, REPO_DATA, Schema, SchemaError, Split, files_availability, hookimpl, verified,
)
from dpgym.plugins.datasets.parametric import rebalanceable

DATA = "intrusion/kddcup.data_10_percent.gz"
SHA256 = "8045aca0d84e70e622d1148d7df782496f6333bf6eb979a1b0837c42a9fd9561"  # = sklearn's ARCHIVE_10_PERCENT
TEST_ROWS = 100_000
SPLIT_SEED = 0

# KDD Cup 99 attack taxonomy (training_attack_types of the task description).
CATEGORY = {
    "normal": "normal",
    **dict.fromkeys(["back", "land", "neptune", "pod", "smurf", "teardrop"], "dos"),
    **dict.fromkeys(["ipsweep", "nmap", "portsweep", "satan"], "probe"),
    **dict.fromkeys(
        ["ftp_write", "guess_passwd", "imap", "multihop", "phf", "spy", "warezclient", "warezmaster"], "r2l"
    ),
    **dict.fromkeys(["buffer_overflow", "loadmodule", "perl", "rootkit"], "u2r"),
}
CATEGORIES = ("normal", "dos", "probe", "r2l", "u2r")


@cache
def schema23() -> Schema:
    return Schema.from_toml(REPO_DATA / "intrusion" / "schema.toml")


@cache
def schema5() -> Schema:
    """The 23-class schema with `attack` replaced by its five-way grouping."""
    base = schema23()
    ungrouped = set(base["attack"].categories) - set(CATEGORY)
    if ungrouped:
        raise SchemaError(f"intrusion: attack labels without a category: {sorted(ungrouped)}")
    target = Column(
        "attack_category", ColumnKind.CATEGORICAL, CATEGORIES,
        description="KDD Cup 99 attack category of `attack` (training_attack_types)",
    )
    return Schema(name="intrusion", columns=(*base.features, target), target=target.name)


def _read() -> pd.DataFrame:
    names = schema23().names
    categorical = [c.name for c in schema23().columns if not c.is_numeric]
    frame = pd.read_csv(
        verified(DATA, SHA256), header=None, names=names, engine="pyarrow",
        # dictionary-encoded on read: ~494k short strings per column would otherwise dominate RSS
        dtype={name: "category" for name in categorical},
    )
    frame["attack"] = frame["attack"].cat.rename_categories(lambda label: label.rstrip("."))
    return frame


def _split(frame: pd.DataFrame) -> Split:
    from sklearn.model_selection import train_test_split  # here, not at the top: `dpgym list` imports this module
    train, test = train_test_split(
        frame, test_size=TEST_ROWS, stratify=frame["attack"], random_state=SPLIT_SEED
    )
    return Split(train=train.reset_index(drop=True), test=test.reset_index(drop=True))


def load23() -> Split:
    return _split(schema23().conform(_read(), DATA))


def load5() -> Split:
    split = load23()
    return Split(train=_grouped(split.train), test=_grouped(split.test))


def _grouped(frame: pd.DataFrame) -> pd.DataFrame:
    """Replace `attack` by its category; total because schema5() checks every label has one."""
    frame = frame.rename(columns={"attack": "attack_category"})
    frame["attack_category"] = frame["attack_category"].map(CATEGORY).astype(schema5()["attack_category"].dtype)
    return frame


_COMMON = dict(
    version="1",
    citation=(
        "Stolfo, S., Fan, W., Lee, W., Prodromidis, A. & Chan, P. (1999). KDD Cup 1999 Data. "
        "UCI Machine Learning Repository. https://doi.org/10.24432/C51C7N"
    ),
    license="CC BY 4.0",
    checksum=SHA256,
    availability=partial(files_availability, [DATA]),
)

SPECS = [
    rebalanceable(DatasetSpec(
        name="intrusion", load=load5, schema=schema5, **_COMMON,
        description="KDD Cup 99 10%, 5 attack categories; stratified seeded split 394,021 / 100,000; "
                    "intrusion:undersample=r[,test=f] rebalances",
    )),
    rebalanceable(DatasetSpec(
        name="intrusion23", load=load23, schema=schema23, **_COMMON,
        description="KDD Cup 99 10%, 23 attack labels; same split as intrusion",
    )),
]


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return SPECS
