"""NAME:undersample=r[,test=f]: DP-MERF's preparation as a dataset variant (dpgym.plugins.datasets.parametric)."""

from __future__ import annotations

import pandas as pd
import pytest

from dpgym.commands import _dataset_names
from dpgym.registry import PluginError
from dpgym.plugins.datasets import adult, census


def _counts(frame: pd.DataFrame, target: str) -> dict[str, int]:
    return frame[target].value_counts().to_dict()


@pytest.mark.slow
def test_undersampling_keeps_every_minority_row_and_the_asked_share_of_the_majority(registry):
    variant = registry.dataset("adult:undersample=0.4")
    split, base = variant.load(), adult.load()
    before, after = _counts(base.train, "income"), _counts(split.train, "income")
    assert after == {"<=50K": int(before["<=50K"] * 0.4), ">50K": before[">50K"]}
    assert split.test.equals(base.test)  # without test=, the official test part stays
    kept = split.train.merge(base.train.drop_duplicates(), how="left", indicator=True)
    assert (kept["_merge"] == "both").all()  # rows are taken, never altered


def test_a_resplit_pools_the_kept_rows_and_holds_out_a_stratified_share(registry):
    split = registry.dataset("adult:undersample=0.4,test=0.1").load()
    pooled = registry.dataset("adult:undersample=0.4").load().train
    assert len(split.train) + len(split.test) == len(pooled)
    assert len(split.test) == pytest.approx(0.1 * len(pooled), abs=1)
    share = lambda frame: (frame["income"] == ">50K").mean()  # noqa: E731
    assert share(split.test) == pytest.approx(share(pooled), abs=1e-3)
    assert pd.concat([split.train, split.test]).sort_values(list(pooled.columns)).reset_index(drop=True).equals(
        pooled.sort_values(list(pooled.columns)).reset_index(drop=True))


def test_a_variant_is_one_fixed_dataset_with_its_own_name_and_key(registry):
    a = registry.dataset("adult:undersample=0.4,test=0.1")
    assert a is registry.dataset("adult:test=0.1,undersample=0.4")
    assert a.name == "adult:undersample=0.4,test=0.1"
    first, second = a.load(), a.load()
    assert first.train.equals(second.train) and first.test.equals(second.test)
    keys = {a.checksum, adult.SPEC.checksum, registry.dataset("adult:undersample=0.4").checksum,
            registry.dataset("adult:undersample=0.5,test=0.1").checksum}
    assert len(keys) == 4
    assert a.schema() == adult.schema()


def test_shares_equal_to_six_digits_are_two_variants(registry):
    a, b = registry.dataset("adult:undersample=0.4000404"), registry.dataset("adult:undersample=0.40004049")
    assert (a.name, b.name) == ("adult:undersample=0.4000404", "adult:undersample=0.40004049")
    assert a.checksum != b.checksum


@pytest.mark.slow
def test_census_as_dp_merf_prepares_it(registry, census_split):
    split = registry.dataset("census:undersample=0.4,test=0.2").load()
    both = pd.concat([split.train, split.test])
    before = _counts(census_split.train, "income")
    assert _counts(both, "income") == {"- 50000": int(before["- 50000"] * 0.4), "50000+": before["50000+"]}
    assert census.schema().violations(split.train) == []


@pytest.mark.parametrize("name, message", [
    ("adult:test=0.2", "needs undersample=r"),
    ("adult:undersample=1", "strictly between 0 and 1"),
    ("adult:undersample=0.4,fold=2", r"cannot use 'fold=2' \(takes undersample=..., test=...\)"),
])
def test_bad_variant_arguments_name_the_dataset_and_the_fault(registry, name, message):
    with pytest.raises(PluginError, match=message):
        registry.dataset(name)


def test_the_command_line_keeps_a_variants_commas():
    assert _dataset_names("adult,census:undersample=0.4,test=0.2, intrusion") == [
        "adult", "census:undersample=0.4,test=0.2", "intrusion"]
    assert _dataset_names("lifesci:fold=2,csv:data.csv") == ["lifesci:fold=2", "csv:data.csv"]
