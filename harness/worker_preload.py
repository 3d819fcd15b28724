"""Imported once by the forkserver: pays imports, plugin discovery and dataset loading up front,
so that every cell's child (forked from the server) starts warm.

Nothing here may raise: the forkserver only tolerates ImportError from its preload, and a broken
plugin or dataset must fail its own cells (with its own message), not the server.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import warnings

from dpgym.registry import PLUGINS_ENV
from dpgym.cell import load_split
from dpgym.worker import PARENT_ENV, WARM_DATASETS_ENV, die_with_parent, worker_registry


def _die_with_driver() -> None:
    """Before the warm-up (seconds), so that a driver killed meanwhile takes the server with it. The
    variable is dropped here: the cells forked from the server are not its helpers."""
    parent = os.environ.pop(PARENT_ENV, "")
    if parent.isdigit():
        die_with_parent(int(parent))


def _warm() -> None:
    try:
        registry = worker_registry(os.environ.get(PLUGINS_ENV, "").strip())
        for name in filter(None, os.environ.get(WARM_DATASETS_ENV, "").split("\n")):
            dataset = registry.dataset(name)
            split = load_split(dataset.load)
            # Validation's first call imports and initialises lazily loaded pandas/pyarrow code
            # (~0.3 s); paying it here keeps it out of every cell.
            dataset.schema().conform(split.train.head(100), "warm-up")
        if "torch" in sys.modules:  # a plugin imported it: the deterministic-mode switch every torch
            importlib.import_module("torch._inductor")  # cell makes imports this lazily (~0.45 s)
    except Exception:  # noqa: BLE001 - see the module docstring
        pass


_die_with_driver()
with warnings.catch_warnings():  # a dataset's warnings (an unreviewed schema) are its cells' to record
    warnings.simplefilter("ignore")
    _warm()
# Everything preloaded is shared copy-on-write with every cell: keep the cycle collector from walking
# (and so writing to, and copying) those pages in each child.
gc.freeze()
