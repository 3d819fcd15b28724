"""Locating and verifying the data files a dataset plugin reads.

Files are looked up under ``$DPGYM_DATA`` when set and not empty, else under the repository's
``datasets/`` folder, and their sha256 is checked before every load: a corrupted or substituted
file is an error naming the file, never a silent substitute.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

# The source checkout dpgym runs from: its datasets, suites, references and committed results.
CHECKOUT = Path(__file__).resolve().parents[2]
REPO_DATA = CHECKOUT / "datasets"


class DatasetUnavailable(RuntimeError):
    """A dataset's files are missing or do not match their checksum; the message says how to fix it."""


def data_root() -> Path:
    """An empty DPGYM_DATA (``DPGYM_DATA= dpgym run``) counts as unset, not as the working directory."""
    return Path(os.environ.get("DPGYM_DATA") or REPO_DATA)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _missing(path: Path, relative: str) -> str:
    return f"data file {path} is missing (set DPGYM_DATA to the folder that holds {relative})"


def files_availability(relatives: Iterable[str]) -> str:
    """A dataset's `availability`: "" when each of its files is under the data root, else a line
    naming the first missing one. No hashing, so `dpgym list` stays quick; `verified` checks at load."""
    for relative in relatives:
        path = data_root() / relative
        if not path.is_file():
            return _missing(path, relative)
    return ""


def verified(relative: str, sha256: str) -> Path:
    """The path of a data file under the data root, after checking its sha256."""
    path = data_root() / relative
    if not path.is_file():
        raise DatasetUnavailable(_missing(path, relative))
    actual = sha256_of(path)
    if actual != sha256:
        raise DatasetUnavailable(f"data file {path} has sha256 {actual}, expected {sha256}: corrupted or not the published file")
    return path


def combined_checksum(checksums: list[str]) -> str:
    """One key for a dataset made of several files."""
    return hashlib.sha256("".join(sorted(checksums)).encode()).hexdigest()
