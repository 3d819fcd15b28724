"""One run, carried from the command line to the report, with each thing derived once: the grid
expanded once, the execution settings resolved once, the manifest (run.json) read once, the stored
results read once, the leaderboard built once and handed to the report.

`Run.prepare` is what `dpgym run` starts from (a suite and a run directory, which may hold an
earlier run of it); `Run.open` is what `leaderboard`, `report`, `compare` and `check` start from
(a run directory, whose manifest says which suite ran into it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from dpgym.registry import Registry
from dpgym.results.records import CellRecord
from dpgym.results.store import RunStore, StoreError
from dpgym.engine.grid import Cell, expand
from dpgym.engine.suite import Plan, Suite, suite_from_dict

if TYPE_CHECKING:
    from dpgym.results.leaderboard import Leaderboard


def stored_manifest(store: RunStore) -> dict[str, Any] | None:
    """The run directory's run.json, or None before its first run."""
    return store.manifest() if store.manifest_path.is_file() else None


@dataclass
class Run:
    """A run directory and the suite run into it, with its cells and settings."""

    store: RunStore
    suite: Suite
    registry: Registry
    cells: list[Cell]
    manifest: dict[str, Any] | None  # run.json as the run found it, then as it wrote it; None: none yet
    plan: Plan | None = None  # the resolved execution settings, for a run that runs cells
    _stored: dict[str, CellRecord | None] | None = field(default=None, repr=False)
    _results: list[CellRecord] | None = field(default=None, repr=False)
    _leaderboard: Leaderboard | None = field(default=None, repr=False)

    @classmethod
    def prepare(cls, suite: Suite, store: RunStore, registry: Registry, manifest: dict[str, Any] | None,
                plan: Plan) -> Run:
        """`dpgym run`: the suite's grid expanded, to run under `plan` (the execution settings given on
        the command line over the suite's own, resolved); `manifest` is the run directory's run.json
        as read once, or None."""
        return cls(store, suite, registry, expand(suite, registry), manifest, plan)

    @classmethod
    def open(cls, store: RunStore, registry: Registry) -> Run:
        """A run directory as its manifest records it: the suite last run into it, and that suite's cells
        (cells of earlier suites run into the same folder are not part of it)."""
        manifest = store.manifest()
        suite = suite_from_dict(manifest["suite"], str(store.manifest_path))
        return cls(store, suite, registry, expand(suite, registry), manifest)

    @cached_property
    def keys(self) -> set[str]:
        """The keys of the suite's cells and of the rows scored into the run directory (`dpgym score`)."""
        return {cell.key for cell in self.cells} | set(self.store.scored())

    def stored(self) -> dict[str, CellRecord | None]:
        """Each cell's record as the run directory held it when the run began (None: not run yet)."""
        if self._stored is None:
            self._stored = {cell.key: self.store.finished(cell.key) for cell in self.cells}
        return self._stored

    def results(self) -> list[CellRecord]:
        """The finished cells' records, read once the cells have run."""
        if self._results is None:
            self._results = self.store.results(self.keys)
        return self._results

    def recorded(self, records: list[CellRecord]) -> None:
        """The records of every cell once the run has ended, those it wrote and those it found: its
        results, without reading them back, with the rows scored into its directory (`dpgym score`)."""
        scored = [record for key in self.store.scored() if (record := self.store.finished(key)) is not None]
        self._results = sorted([*records, *scored], key=lambda r: r.key)
        self._leaderboard = None

    def leaderboard(self) -> Leaderboard:
        """The run's leaderboard, built once (its bootstrap intervals are most of its cost)."""
        if self._leaderboard is None:
            from dpgym.results.leaderboard import (build_leaderboard, generator_independent_values, metric_info,
                                                   ranked_values)

            self._leaderboard = build_leaderboard(self.store, self.results(), self.manifest or {},
                                                  metric_info(self.registry)[0], ranked_values(self.registry),
                                                  generator_independent_values(self.registry))
        return self._leaderboard

    def outputs_stamp(self) -> dict[str, Any]:
        """What the run's leaderboard and report are built from: the suite, each cell's result file (by
        modification time), and the software. Equal stamps: the outputs are current."""
        if self.manifest is None:
            raise StoreError(f"{self.store.root} is not a dpgym run directory (no run.json)")
        cells = {key: (path.stat().st_mtime_ns if path.exists() else None)
                 for key in sorted(self.keys) for path in [self.store.result_path(key)]}
        return {"suite": {**self.suite.to_dict(), "settings": None}, "cells": cells,
                "packages": self.manifest["packages"], "git_revision": self.manifest["git_revision"]}
