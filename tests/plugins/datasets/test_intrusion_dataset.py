"""intrusion / intrusion23: published counts, schema conformity and the fixed stratified split."""

from __future__ import annotations

import pandas as pd
import pytest

from dpgym.plugins.datasets import intrusion

# Published label counts of the KDD Cup 99 10% file (datasets/SOURCES.md).
LABELS = {
    "smurf": 280790, "neptune": 107201, "normal": 97278, "back": 2203, "satan": 1589, "ipsweep": 1247,
    "portsweep": 1040, "warezclient": 1020, "teardrop": 979, "pod": 264, "nmap": 231, "guess_passwd": 53,
    "buffer_overflow": 30, "land": 21, "warezmaster": 20, "imap": 12, "rootkit": 10, "loadmodule": 9,
    "ftp_write": 8, "multihop": 7, "phf": 4, "perl": 3, "spy": 2,
}
CATEGORIES = {"dos": 391458, "normal": 97278, "probe": 4107, "r2l": 1126, "u2r": 52}


def _counts(split, column):
    both = pd.concat([split.train[column], split.test[column]])
    return {k: v for k, v in both.value_counts().to_dict().items() if v}


@pytest.mark.slow
def test_intrusion23_has_the_published_rows_and_labels(intrusion23_split):
    assert len(intrusion23_split.train) == 394_021 and len(intrusion23_split.test) == 100_000
    assert _counts(intrusion23_split, "attack") == LABELS


@pytest.mark.slow
def test_intrusion_groups_labels_into_the_five_kdd_categories(intrusion5_split):
    assert _counts(intrusion5_split, "attack_category") == CATEGORIES
    assert intrusion5_split.train.columns[-1] == "attack_category"


def test_both_forms_pass_their_schema(intrusion23_split, intrusion5_split):
    for split, schema in ((intrusion23_split, intrusion.schema23()), (intrusion5_split, intrusion.schema5())):
        for frame in (split.train, split.test):
            assert schema.violations(frame) == []
            assert list(frame.columns) == schema.names
    assert len(intrusion.schema23().features) == 41


def test_both_forms_share_one_stratified_split(intrusion23_split, intrusion5_split):
    features = intrusion.schema23().names[:-1]
    assert intrusion23_split.test[features].equals(intrusion5_split.test[features])
    share = intrusion23_split.test["attack"].value_counts() / pd.Series(LABELS)
    assert share[["smurf", "neptune", "normal", "back"]].between(0.20, 0.21).all()


def test_every_label_of_the_names_file_has_a_category():
    assert set(intrusion.schema23()["attack"].categories) == set(intrusion.CATEGORY)
