"""The datasets vendored from R packages: pinned split sizes and label counts, schema conformity,
every source column either public or withheld with a reason, and the dataset conformance checks."""

from __future__ import annotations

import pytest

from dpgym.plugins.datasets import benefits, caravan, cps1988, diamonds, fertility, flights, nass_cds, rtables, wage
from dpgym.testing import conformance_checks

MODULES = {m.SPEC.name: m for m in (benefits, caravan, cps1988, diamonds, fertility, flights, nass_cds, wage)}

# (train rows, test rows, train label counts, test label counts) of the seeded stratified split.
SPLITS = {
    "benefits": (3_901, 976, {"yes": 2_668, "no": 1_233}, {"yes": 667, "no": 309}),
    "caravan": (4_657, 1_165, {"No": 4_379, "Yes": 278}, {"No": 1_095, "Yes": 70}),
    "cps1988": (22_524, 5_631, {"no": 20_505, "yes": 2_019}, {"no": 5_126, "yes": 505}),
    "diamonds": (43_152, 10_788, {"Ideal": 17_241, "Premium": 11_033, "Very Good": 9_665, "Good": 3_925, "Fair": 1_288},
                 {"Ideal": 4_310, "Premium": 2_758, "Very Good": 2_417, "Good": 981, "Fair": 322}),
    "fertility": (203_723, 50_931, {"no": 126_193, "yes": 77_530}, {"no": 31_549, "yes": 19_382}),
    "flights": (261_876, 65_470, {"on_time": 219_635, "late": 42_241}, {"on_time": 54_909, "late": 10_561}),
    "nass_cds": (20_973, 5_244, {"alive": 20_029, "dead": 944}, {"alive": 5_008, "dead": 236}),
    "wage": (2_400, 600, {"1. Yes": 1_666, "2. No": 734}, {"1. Yes": 417, "2. No": 183}),
}
# Columns the loader derives from the file's (the target) rather than reads.
DERIVED = {"flights": {"late"}}


@pytest.fixture(scope="module")
def splits():
    return {}


def split_of(name, splits):
    if name not in splits:
        splits[name] = MODULES[name].SPEC.load()
    return splits[name]


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_the_split_has_its_pinned_sizes_and_label_counts(name, splits):
    split = split_of(name, splits)
    n_train, n_test, train_labels, test_labels = SPLITS[name]
    target = MODULES[name].schema().target
    assert (len(split.train), len(split.test)) == (n_train, n_test)
    assert split.train[target].value_counts().to_dict() == train_labels
    assert split.test[target].value_counts().to_dict() == test_labels
    assert round(n_test / (n_train + n_test), 3) == rtables.TEST_SHARE


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_the_rows_match_the_schema_and_leave_out_the_withheld_columns(name, splits):
    split, schema = split_of(name, splits), MODULES[name].schema()
    for frame in (split.train, split.test):
        assert list(frame.columns) == schema.names
        assert schema.violations(frame) == []
        assert not {w.name for w in schema.withheld} & set(frame.columns)


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_every_column_of_the_file_is_public_or_withheld_with_a_reason(name):
    module = MODULES[name]
    schema = module.schema()
    in_file = set(rtables.read(module.DATA, module.SHA256).columns)
    declared = set(schema.names) - DERIVED.get(name, set()) | {w.name for w in schema.withheld}
    assert declared == in_file
    assert all(w.reason for w in schema.withheld)


def test_the_wide_table_is_wide_and_the_long_table_long(splits):
    assert len(caravan.schema().columns) == 86
    assert len(split_of("flights", splits).train) > 250_000


def test_nass_cds_keeps_the_missing_injury_codes_as_missing(splits):
    split = split_of("nass_cds", splits)
    assert split.train["injSeverity"].isna().sum() + split.test["injSeverity"].isna().sum() == 153
    assert nass_cds.schema()["injSeverity"].nullable


@pytest.mark.parametrize("check", [c for name in ("benefits", "wage", "caravan") for c in conformance_checks(name)], ids=str)
def test_small_tables_pass_the_dataset_conformance_checks(check):
    check()
