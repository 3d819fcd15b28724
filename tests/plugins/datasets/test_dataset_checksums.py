"""A vendored file that does not match its sha256 makes the dataset unavailable, naming the file."""

from __future__ import annotations

import pytest

from dpgym.data.datafiles import REPO_DATA, DatasetUnavailable, data_root, verified
from dpgym.plugins.datasets import adult, benefits, caravan, census, cps1988, diamonds, fertility, flights, intrusion, lifesci, nass_cds, randhie, wage

FILES = {
    "census": (census.load, census.FILES),
    "intrusion": (intrusion.load23, {intrusion.DATA: intrusion.SHA256}),
    "lifesci": (lambda: lifesci.load_fold(1), lifesci.FILES),
    "randhie": (randhie.read, {randhie.DATA: randhie.SHA256}),
    **{m.SPEC.name: (m.SPEC.load, {m.DATA: m.SHA256})
       for m in (benefits, caravan, cps1988, diamonds, fertility, flights, nass_cds, wage)},
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_checksum_mismatch_is_unavailable_naming_the_file(name, tmp_path, monkeypatch):
    load, files = FILES[name]
    for relative in files:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_bytes(b"not the published file\n")
    monkeypatch.setenv("DPGYM_DATA", str(tmp_path))
    lifesci._labelled_folds.cache_clear()
    try:
        with pytest.raises(DatasetUnavailable, match=r"has sha256 .*expected") as caught:
            load()
    finally:
        lifesci._labelled_folds.cache_clear()
    assert str(tmp_path) in str(caught.value)


def test_a_missing_file_is_unavailable_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("DPGYM_DATA", str(tmp_path))
    with pytest.raises(DatasetUnavailable, match="census-income.data.xz is missing"):
        census.load()


def test_an_empty_dpgym_data_counts_as_unset(monkeypatch):
    monkeypatch.setenv("DPGYM_DATA", "")
    assert data_root() == REPO_DATA
    assert verified("adult/adult.data.xz", adult.FILES["adult/adult.data.xz"]) == REPO_DATA / "adult" / "adult.data.xz"


@pytest.mark.parametrize("name", ["adult", "adult_expm", "adult_autogan", "census", "intrusion", "intrusion23", "lifesci",
                                  "lifesci:fold=3", "adult:undersample=0.4", "benefits", "caravan", "cps1988",
                                  "diamonds", "fertility", "flights", "nass_cds", "wage"])
def test_a_vendored_dataset_is_available_only_while_its_files_are_there(name, registry, tmp_path, monkeypatch):
    assert registry.dataset(name).availability() == ""
    monkeypatch.setenv("DPGYM_DATA", str(tmp_path))
    assert f"data file {tmp_path}" in registry.dataset(name).availability()
