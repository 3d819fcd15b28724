"""covertype: found, downloaded only when allowed and verified, or unavailable with one how-to line.

The real file is 11 MB and offline machines do not have it, so these tests use a small file in the
same format (no header, 54 integer features, class 1..7) and patch the expected checksum, shape and
class counts to the fixture's. Nothing here touches the network.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import io
import urllib.error

import numpy as np
import pytest

from dpgym.data.datafiles import DatasetUnavailable
from dpgym.plugins.datasets import covertype

CLASSES = {"1": 30, "2": 40, "3": 10, "4": 5, "5": 5, "6": 5, "7": 5}


def fixture_bytes(classes: dict[str, int] = CLASSES) -> bytes:
    """Rows shaped like covtype.data: 10 quantitative columns, one-hot wilderness and soil, the class."""
    rng = np.random.default_rng(0)
    label = np.repeat([int(c) for c in classes], list(classes.values()))
    n = len(label)
    quantitative = np.column_stack([
        rng.integers(1859, 3859, n), rng.integers(0, 361, n), rng.integers(0, 67, n), rng.integers(0, 1398, n),
        rng.integers(-173, 602, n), rng.integers(0, 7118, n), rng.integers(0, 255, n, endpoint=True),
        rng.integers(0, 255, n, endpoint=True), rng.integers(0, 255, n, endpoint=True), rng.integers(0, 7174, n),
    ])
    wilderness = np.eye(4, dtype=int)[rng.integers(0, 4, n)]
    soil = np.eye(40, dtype=int)[rng.integers(0, 40, n)]
    rows = np.column_stack([quantitative, wilderness, soil, label])
    text = "\n".join(",".join(map(str, row)) for row in rows) + "\n"
    return gzip.compress(text.encode(), mtime=0)


@pytest.fixture
def archive(monkeypatch) -> bytes:
    """The fixture's bytes, with the loader's expectations patched to match it."""
    data = fixture_bytes()
    monkeypatch.setattr(covertype, "SHA256", hashlib.sha256(data).hexdigest())
    monkeypatch.setattr(covertype, "ROWS", sum(CLASSES.values()))
    monkeypatch.setattr(covertype, "CLASS_COUNTS", CLASSES)
    monkeypatch.setattr(covertype, "TEST_ROWS", 25)
    monkeypatch.delenv("DPGYM_ALLOW_DOWNLOAD", raising=False)
    return data


def served(payload: bytes | Exception):
    """A stand-in for urllib.request.urlopen that serves `payload` (or raises it)."""

    def urlopen(url, timeout):
        assert url == covertype.URL
        if isinstance(payload, Exception):
            raise payload
        return io.BytesIO(payload)

    return urlopen


def test_loads_the_file_from_the_data_root(archive, tmp_path, monkeypatch):
    (tmp_path / "covertype").mkdir()
    (tmp_path / "covertype" / "covtype.data.gz").write_bytes(archive)
    monkeypatch.setenv("DPGYM_DATA", str(tmp_path))
    split = covertype.load()
    assert (len(split.train), len(split.test)) == (75, 25)
    assert covertype.schema().violations(split.train) == [] and len(split.train.columns) == 55
    assert split.test["Cover_Type"].value_counts()["2"] == 10  # stratified: a quarter of class 2's 40 rows


def test_data_dir_in_the_name_points_to_another_folder(archive, tmp_path, registry):
    (tmp_path / "covtype.data.gz").write_bytes(archive)
    spec = registry.dataset(f"covertype:data_dir={tmp_path}")
    assert len(spec.load().train) == 75


def test_absent_file_without_permission_is_unavailable_with_a_how_to_line(archive, tmp_path, monkeypatch):
    monkeypatch.setenv("DPGYM_DATA", str(tmp_path))
    monkeypatch.setattr("urllib.request.urlopen", served(AssertionError("must not download")))
    with pytest.raises(DatasetUnavailable) as caught:
        covertype.load()
    message = str(caught.value)
    assert "\n" not in message and "DPGYM_ALLOW_DOWNLOAD=1" in message and covertype.URL in message
    assert str(tmp_path / "covertype" / "covtype.data.gz") in message


def test_allowed_download_is_verified_then_kept(archive, tmp_path, monkeypatch):
    monkeypatch.setenv("DPGYM_DATA", str(tmp_path))
    monkeypatch.setenv("DPGYM_ALLOW_DOWNLOAD", "1")
    monkeypatch.setattr("urllib.request.urlopen", served(archive))
    assert len(covertype.load().test) == 25
    assert (tmp_path / "covertype" / "covtype.data.gz").read_bytes() == archive


def test_a_download_with_the_wrong_checksum_is_discarded(archive, tmp_path, monkeypatch):
    monkeypatch.setenv("DPGYM_DATA", str(tmp_path))
    monkeypatch.setenv("DPGYM_ALLOW_DOWNLOAD", "1")
    monkeypatch.setattr("urllib.request.urlopen", served(archive + b"tampered"))
    with pytest.raises(DatasetUnavailable, match="sha256"):
        covertype.load()
    assert list((tmp_path / "covertype").iterdir()) == []


def test_offline_download_is_unavailable(archive, tmp_path, monkeypatch):
    monkeypatch.setenv("DPGYM_DATA", str(tmp_path))
    monkeypatch.setenv("DPGYM_ALLOW_DOWNLOAD", "1")
    monkeypatch.setattr("urllib.request.urlopen", served(urllib.error.URLError("no network")))
    with pytest.raises(DatasetUnavailable, match="download .* failed .*no network"):
        covertype.load()


class CutStream(io.BytesIO):
    """A response whose connection drops mid-transfer."""

    def read(self, size=-1):
        raise http.client.IncompleteRead(b"partial")


def test_a_download_cut_mid_transfer_is_unavailable_and_leaves_no_file(archive, tmp_path, monkeypatch):
    monkeypatch.setenv("DPGYM_DATA", str(tmp_path))
    monkeypatch.setenv("DPGYM_ALLOW_DOWNLOAD", "1")
    monkeypatch.setattr("urllib.request.urlopen", lambda url, timeout: CutStream())
    with pytest.raises(DatasetUnavailable, match=r"download .* failed \(IncompleteRead"):
        covertype.load()
    assert list((tmp_path / "covertype").iterdir()) == []


def test_a_relative_data_dir_is_relative_to_the_working_directory(archive, tmp_path, registry, monkeypatch):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "covtype.data.gz").write_bytes(archive)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPGYM_DATA", str(tmp_path / "elsewhere"))
    spec = registry.dataset("covertype:data_dir=mine")
    assert spec.availability() == ""
    assert len(spec.load().train) == 75


def test_a_relative_data_dir_receives_the_download(archive, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPGYM_DATA", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("DPGYM_ALLOW_DOWNLOAD", "1")
    monkeypatch.setattr("urllib.request.urlopen", served(archive))
    assert len(covertype.load("fetched").test) == 25
    assert (tmp_path / "fetched" / "covtype.data.gz").read_bytes() == archive


def test_a_relative_data_root_is_relative_to_the_working_directory(archive, tmp_path, monkeypatch):
    (tmp_path / "root" / "covertype").mkdir(parents=True)
    (tmp_path / "root" / "covertype" / "covtype.data.gz").write_bytes(archive)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPGYM_DATA", "root")
    assert len(covertype.load().train) == 75


def test_a_present_file_with_the_wrong_checksum_is_unavailable(archive, tmp_path, monkeypatch):
    (tmp_path / "covtype.data.gz").write_bytes(fixture_bytes({"1": 50, "2": 55}))
    with pytest.raises(DatasetUnavailable, match="has sha256"):
        covertype.load(str(tmp_path))


def test_wrong_shape_or_class_counts_are_unavailable(archive, tmp_path, monkeypatch):
    (tmp_path / "covtype.data.gz").write_bytes(archive)
    monkeypatch.setattr(covertype, "CLASS_COUNTS", {**CLASSES, "1": 31})
    with pytest.raises(DatasetUnavailable, match="class counts"):
        covertype.load(str(tmp_path))


def test_the_real_expectations_are_sklearns_and_ucis():
    assert covertype.SHA256 == "614360d0257557dd1792834a85a1cdebfadc3c4f30b011d56afee7ffb5b15771"
    assert sum(covertype.CLASS_COUNTS.values()) == covertype.ROWS == 581_012
