"""Datasets' fixed splits, loaded once per process: by the driver's checks before a run, by the cells a
serial run runs in the driver, by the report's figures, and by each worker (warmed in its server)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from dpgym.specs import Split


@cache
def load_split(load: Callable[[], Split]) -> Split:
    """Each dataset is loaded once per process and shared by its users (read-only)."""
    return load()
