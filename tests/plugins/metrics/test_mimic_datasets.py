"""The MIMIC-III plugin reads only a user-supplied file; the stand-in is seeded, sparse, correlated."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpgym.data.datafiles import DatasetUnavailable
from dpgym.plugins.datasets import mimic
from dpgym.schema import SchemaError


def test_missing_mimic_file_is_a_clear_unavailable_error(monkeypatch, tmp_path):
    monkeypatch.delenv(mimic.ENV, raising=False)
    with pytest.raises(DatasetUnavailable, match=mimic.ENV):
        mimic.load_mimic()
    monkeypatch.setenv(mimic.ENV, str(tmp_path / "absent.csv"))
    with pytest.raises(DatasetUnavailable, match="no such file"):
        mimic.mimic_schema()


def test_mimic_is_available_only_with_a_file(monkeypatch, tmp_path):
    monkeypatch.delenv(mimic.ENV, raising=False)
    assert mimic.ENV in mimic.MIMIC.availability()
    monkeypatch.setenv(mimic.ENV, str(tmp_path / "absent.csv"))
    assert "no such file" in mimic.MIMIC.availability()
    (tmp_path / "codes.csv").write_text("401,428\n0,1\n")
    monkeypatch.setenv(mimic.ENV, str(tmp_path / "codes.csv"))
    assert mimic.MIMIC.availability() == ""


def test_a_user_matrix_is_split_60_20_in_file_order(monkeypatch, tmp_path):
    rows = np.random.default_rng(0).integers(0, 2, size=(50, 4))
    path = tmp_path / "codes.csv"
    pd.DataFrame(rows, columns=["401", "428", "V45", "E87"]).to_csv(path, index=False)
    monkeypatch.setenv(mimic.ENV, str(path))
    split = mimic.load_mimic()
    assert mimic.mimic_schema().names == ["401", "428", "V45", "E87"]
    assert (len(split.train), len(split.test)) == (30, 10)
    assert split.test["401"].astype(int).tolist() == rows[30:40, 0].tolist()


def test_a_non_binary_matrix_is_refused(monkeypatch, tmp_path):
    path = tmp_path / "codes.csv"
    pd.DataFrame({"401": [0, 2]}).to_csv(path, index=False)
    monkeypatch.setenv(mimic.ENV, str(path))
    with pytest.raises(SchemaError, match="codes.csv: expected a 0/1 matrix"):
        mimic.load_mimic()


def test_the_cell_key_follows_the_matrix_not_its_path(monkeypatch, tmp_path):
    from dpgym.registry import Registry
    from dpgym.engine.grid import expand
    from dpgym.engine.suite import MethodConfig, Suite

    def keys(path):
        monkeypatch.setenv(mimic.ENV, str(path))
        suite = Suite("s", (MethodConfig("uniform"),), ("mimic3",), (1.0,), (0,), metrics=("fidelity",))
        return [(cell.key, cell.seeds) for cell in expand(suite, Registry.discover())]

    pd.DataFrame({"401": [0, 1] * 10, "428": [1, 1] * 10}).to_csv(tmp_path / "a.csv", index=False)
    (tmp_path / "moved").mkdir()
    (tmp_path / "moved" / "b.csv").write_bytes((tmp_path / "a.csv").read_bytes())
    assert keys(tmp_path / "a.csv") == keys(tmp_path / "moved" / "b.csv")
    (tmp_path / "moved" / "b.csv").write_text("401,428\n1,0\n0,1\n")
    assert keys(tmp_path / "a.csv") != keys(tmp_path / "moved" / "b.csv")


def test_standin_is_seeded_sparse_and_correlated():
    a, b = mimic.sparse_codes_matrix(rows=800), mimic.sparse_codes_matrix(rows=800)
    assert np.array_equal(a, b)
    prevalence = a.mean(axis=0)
    assert a.mean() < 0.06 and (prevalence < 0.01).sum() > 40
    corr = np.nan_to_num(np.corrcoef(a.T.astype(float)))
    np.fill_diagonal(corr, 0)
    assert corr.max() > 0.5
    assert "SYNTHETIC" in mimic.STANDIN.description
