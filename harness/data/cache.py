"""Work that does not depend on the generator, done once: arrays computed from a dataset's real rows
(or its public schema) and a seed, shared by every cell that needs them.

A metric's real-data side (the real rows' Kendall τ matrix, a learner audit's random directions) is
the same in every cell of a dataset, split and seed, whatever the generator; recomputing it per cell
can cost more than the generator. `computed_once` keeps such arrays in ``$DPGYM_CACHE`` (default
``~/.cache/dpgym``) under a digest of everything that determines them, which the caller lists: the
rows themselves (`digest` hashes a DataFrame's values, columns and dtypes), the seed, and the metric's
name and version, so a new version recomputes. Files are written whole (a temporary file, then a
rename), so cells computing the same entry side by side, or a run killed mid-write, leave either a
complete entry or none; a run resumed later reads it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def cache_dir() -> Path:
    return Path(os.environ.get("DPGYM_CACHE") or Path.home() / ".cache" / "dpgym")


def digest(parts: Sequence[Any]) -> str:
    """A hex digest of `parts`: DataFrames by their values, column names and dtypes; arrays by their
    bytes, shape and dtype; anything else by its repr."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, pd.DataFrame):
            h.update(repr([(str(c), str(t)) for c, t in part.dtypes.items()]).encode())
            h.update(pd.util.hash_pandas_object(part, index=False).to_numpy().tobytes())
        elif isinstance(part, np.ndarray):
            h.update(repr((part.shape, part.dtype.str)).encode())
            h.update(np.ascontiguousarray(part).tobytes())
        else:
            h.update(repr(part).encode())
        h.update(b"\x00")
    return h.hexdigest()[:32]


def computed_once(name: str, parts: Sequence[Any],
                  compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays `compute()` returns, computed on the first call for these `parts` and read from the
    cache on every later one, in this process or another. `name` labels the file (e.g. the metric)."""
    path = cache_dir() / f"{name}-{digest(parts)}.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as stored:
            return {key: stored[key] for key in stored.files}
    arrays = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    with open(partial, "wb") as handle:
        np.savez(handle, **arrays)
    partial.replace(path)
    return arrays
