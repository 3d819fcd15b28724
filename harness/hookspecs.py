"""The plugin contract: every hook dpgym calls, in the order a run calls them.

A plugin is a module (or object) registered under the entry-point group ``dpgym`` that
implements any subset of these hooks with ``@dpgym.hookimpl``. First-party plugins register
exactly the same way (see ``pyproject.toml``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from dpgym.specs import CellInfo, CellResult, DatasetSpec, GeneratorSpec, LearnerSpec, MetricSpec

PROJECT = "dpgym"
# The version of this contract. A plugin module may declare the version it was written for as
# `DPGYM_API_VERSION = N`; the registry refuses a mismatch with a message saying which to upgrade.
DPGYM_API_VERSION = 2
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# --- registration: called once when the registry loads plugins -------------------------------


@hookspec
def dpgym_generators() -> list[GeneratorSpec]:
    """Return the synthetic-data generators this plugin provides.

    Each `GeneratorSpec` names a factory taking the hyper-parameters as keywords (all of them
    listed with defaults in `spec.defaults`) and declares the generator's privacy guarantee:
    ``formal``, ``pure``, ``nominal`` or ``none``. Names must be unique across all plugins.
    """


@hookspec
def dpgym_learners() -> list[LearnerSpec]:
    """Return the private learners this plugin provides (the private-learning track).

    A `LearnerSpec` names a factory taking the hyper-parameters as keywords (all listed with
    defaults in `spec.defaults`) and declares the guarantee of the ONE model it releases:
    ``formal`` (DP-SGD), ``pure``, ``nominal`` (a claim without a proof, e.g. ExpM+NF) or
    ``none``. Learner cells share datasets, budgets, the ledger and the store with generator
    cells; the runner scores the released model by AUC on the real test split.
    """


@hookspec
def dpgym_datasets() -> list[DatasetSpec]:
    """Return the datasets this plugin provides.

    A `DatasetSpec` loads the official train/test split and its public schema. Everything a
    generator may know about the domain without paying privacy comes from that schema.
    """


@hookspec
def dpgym_metrics() -> list[MetricSpec]:
    """Return the metrics this plugin provides.

    A metric gets a `MetricContext` (real train/test, synthetic rows, schema, a seed) and returns
    named values, each with a declared direction (higher or lower is better).
    """


# --- cell lifecycle: called by the runner, in the driver process ------------------------------


@hookspec
def dpgym_cell_started(cell: CellInfo) -> None:
    """A cell is handed to the executor (it may queue for a free worker first). `cell` names its
    key, what it runs (generator or learner), dataset, ε, δ and seed."""


@hookspec
def dpgym_cell_finished(cell: CellInfo, result: CellResult) -> None:
    """A cell finished and was stored. `result` has its status (``ok``, ``failed`` or
    ``unavailable``), metrics, timings, peak memory and any error, and the whole ``result.json`` as
    `record`. Use it for progress, logging or experiment tracking; exceptions raised here are
    logged and do not fail the cell."""
