"""Imported once by the forkserver: pays imports, plugin discovery, dataset loading and the import of
the run's model and metric code up front, so that every cell's child (forked from the server) starts
warm. Discovery alone imports no model code (specs name it with `Deferred`); the server imports the
code of the generators, learners and metrics the run names.

Nothing here may raise: the forkserver only tolerates ImportError from its preload, and a broken
plugin or dataset must fail its own cells (with its own message), not the server.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import warnings

from dpgym.data.splits import load_split
from dpgym.registry import PLUGINS_ENV, Registry
from dpgym.engine.worker import ALL_METRICS, PARENT_ENV, WARM_CODE_ENV, WARM_DATASETS_ENV, die_with_parent, worker_registry
from dpgym.specs import Deferred


def _die_with_driver() -> None:
    """Before the warm-up (seconds), so that a driver killed meanwhile takes the server with it. The
    variable is dropped here: the cells forked from the server are not its helpers."""
    parent = os.environ.pop(PARENT_ENV, "")
    if parent.isdigit():
        die_with_parent(int(parent))


def _import_code(registry: Registry, names: list[str]) -> None:
    """Import the code behind the named generators, learners (``via_synthetic:GENERATOR`` names both)
    and metrics."""
    wanted = {part for name in names for part in name.split(":")}
    specs = [p.spec.factory for kind in ("generator", "learner") for n, p in registry.kinds[kind].items() if n in wanted]
    specs += [p.spec.evaluate for n, p in registry.kinds["metric"].items() if n in wanted or ALL_METRICS in wanted]
    for code in specs:
        if isinstance(code, Deferred):
            code.resolve()


def _warm() -> None:
    try:
        registry = worker_registry(os.environ.get(PLUGINS_ENV, "").strip())
        for name in filter(None, os.environ.get(WARM_DATASETS_ENV, "").split("\n")):
            dataset = registry.dataset(name)
            split = load_split(dataset.load)
            # Validation's first call imports and initialises lazily loaded pandas/pyarrow code
            # (~0.3 s); paying it here keeps it out of every cell.
            dataset.schema().conform(split.train.head(100), "warm-up")
        _import_code(registry, list(filter(None, os.environ.get(WARM_CODE_ENV, "").split("\n"))))
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
