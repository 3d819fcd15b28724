"""The run directory, and its only owner: every path under it comes from `RunStore`.

    DIR/run.json                     manifest: suite, package versions, git revision, history
    DIR/cells/<key>/result.json      status, metrics, timings, peak memory, error
    DIR/cells/<key>/ledger.json      the privacy ledger and its independent re-accounting
    DIR/cells/<key>/synthetic.parquet
    DIR/audits/<key>/audit.json      an empirical audit's summary, when `dpgym audit` wrote into DIR
    DIR/audits/<key>/fits/<i>.json   each of its fits
    DIR/audits.json                  the index of every audit in DIR
    DIR/leaderboard.{md,csv,json}    the leaderboard; DIR/report.html the report; DIR/outputs.json
                                     what they were built from
    DIR/compare-<reference>.{md,json} a comparison with a paper's figures
    DIR/scored.json                  the cells of synthetic rows made elsewhere (`dpgym score`), by key
    DIR/figures/                     the report's drawn figures, kept while their cells stay the same

A cell folder appears only complete (written under a temporary name, then renamed), so a run
killed at any moment resumes by redoing exactly the cells whose folder is missing. Only the driver
writes here, under an exclusive lock; leftovers of a killed writer (`.tmp-*`, `.old-*`, `.*.tmp`)
are never read as cells and are removed by the next run that takes the lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd

from dpgym.privacy.ledger import Ledger
from dpgym.results.records import CellRecord

TRACKED_PACKAGES = ("dpgym", "numpy", "pandas", "scikit-learn", "xgboost-cpu", "xgboost", "torch", "opacus",
                    "prv-accountant", "pluggy", "scipy", "mbi", "jax", "jaxlib")


class StoreError(RuntimeError):
    """The run directory cannot be used (locked by another run, or not a dpgym run directory)."""


def package_versions() -> dict[str, str]:
    found = {}
    for name in TRACKED_PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def machine() -> dict[str, Any]:
    """The CPU, its cores and memory, and whether it has AVX-512: torch and XLA choose kernels by
    instruction set, so learned generators' rows differ in the last bits between machines without it
    and with it (docs/measurements.md)."""
    info: dict[str, Any] = {"processor": platform.processor() or platform.machine(), "cores": os.cpu_count()}
    try:
        info["memory_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        text = cpuinfo.read_text(errors="replace")
        model = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), None)
        info |= {"processor": model or info["processor"], "avx512": " avx512f" in text}
    return info


def git_revision() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=Path(__file__).parent,
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def to_json(payload: Any) -> str:
    """The run directory's JSON. `default=str` covers values (numpy scalars), not keys: a dict keyed
    by tuples raises TypeError, which cells check for before they reach the store."""
    return json.dumps(payload, indent=2, default=str)


def write_json_atomic(path: Path, payload: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(to_json(payload))
    os.replace(tmp, path)


def runs_again(finished: CellRecord | None, retry_failed: bool) -> bool:
    """Whether a run (re)does a cell with this stored record: one not run yet, or with `retry_failed`
    one that failed or was unavailable."""
    return finished is None or (retry_failed and not finished.ok)


class RunStore:
    """A run directory: its layout (the paths below), its lock, and reading and writing its files."""

    def __init__(self, root: Path):
        self.root = Path(root).absolute()  # fixed when opened: code run in the driver may change directory
        self.cells = self.root / "cells"
        self.manifest_path = self.root / "run.json"
        self.audits = self.root / "audits"
        self.audits_index = self.root / "audits.json"
        self.figures = self.root / "figures"
        self.report_path = self.root / "report.html"
        self.outputs_stamp = self.root / "outputs.json"
        self.scored_index = self.root / "scored.json"

    # --- the layout -------------------------------------------------------------------------------

    def cell_dir(self, key: str) -> Path:
        return self.cells / key

    def result_path(self, key: str) -> Path:
        return self.cells / key / "result.json"

    def ledger_path(self, key: str) -> Path:
        return self.cells / key / "ledger.json"

    def synthetic_path(self, key: str) -> Path:
        return self.cells / key / "synthetic.parquet"

    def audit_dir(self, key: str) -> Path:
        return self.audits / key

    def audit_summary(self, key: str) -> Path:
        return self.audits / key / "audit.json"

    def audit_fit(self, key: str, fit: int) -> Path:
        return self.audits / key / "fits" / f"{fit}.json"

    def leaderboard_path(self, suffix: str) -> Path:
        """leaderboard.md, .csv or .json."""
        return self.root / f"leaderboard.{suffix}"

    def outputs(self) -> list[Path]:
        """The files a run's leaderboard and report are: current or not as one (`outputs_stamp`)."""
        return [*(self.leaderboard_path(s) for s in ("md", "csv", "json")), self.report_path]

    def comparison_path(self, reference: str, suffix: str) -> Path:
        """compare-<reference>.md or .json."""
        return self.root / f"compare-{reference}.{suffix}"

    def figure_path(self, name: str) -> Path:
        return self.figures / name

    def audit_fits(self, key: str) -> list[Path]:
        """The fits an audit has stored so far, in order."""
        return sorted((self.audits / key / "fits").glob("[0-9]*.json"), key=lambda p: int(p.stem))

    def stored_audits(self) -> list[dict[str, Any]]:
        """Every audit summary `dpgym audit` stored here, in key order: read by the audits' index and by
        the leaderboard of a run directory the audits were written into."""
        return [json.loads(path.read_text()) for path in sorted(self.audits.glob("*/audit.json"))]

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold an exclusive lock so two runs never write the same directory."""
        self.cells.mkdir(parents=True, exist_ok=True)
        with (self.root / ".lock").open("w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StoreError(f"another dpgym run is writing {self.root}") from None
            self._remove_leftovers()
            yield

    def _remove_leftovers(self) -> None:
        """Temporary files of a writer killed mid-write; safe to delete because we hold the lock."""
        for path in [*self.cells.glob(".tmp-*"), *self.cells.glob(".old-*"), *self.root.glob(".*.tmp")]:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    def write_manifest(self, suite: dict[str, Any], execution: dict[str, Any] | None = None,
                       earlier: dict[str, Any] | None = None) -> dict[str, Any]:
        """Written before any cell: what was asked, with what software, and each (re)start's executor
        after those of `earlier`, the manifest as the run read it. Returns what it wrote."""
        history = (earlier or {}).get("history", [])
        history = [*history, {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": sys.argv[1:],
                              "pid": os.getpid(), "execution": execution or {}}]
        manifest = {
            "format": "dpgym-run/1",
            "suite": suite,
            "packages": package_versions(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "machine": machine(),
            "git_revision": git_revision(),
            "history": history,
        }
        write_json_atomic(self.manifest_path, manifest)
        return manifest

    def manifest(self) -> dict[str, Any]:
        if not self.manifest_path.exists():
            raise StoreError(f"{self.root} is not a dpgym run directory (no run.json)")
        return json.loads(self.manifest_path.read_text())

    def _result(self, path: Path) -> CellRecord | None:
        """A cell's record, or None (with a warning naming the file) when it is unreadable, e.g. cut
        short by a full disk or edited by hand: the cell then counts as not run and is run again."""
        try:
            raw = json.loads(path.read_text())
            if isinstance(raw, dict) and isinstance(raw.get("cell"), dict) and "status" in raw:
                return CellRecord.from_dict(raw)
            problem = "not a dpgym cell result"
        except (OSError, ValueError, KeyError, TypeError) as err:
            problem = f"{type(err).__name__}: {err}"
        warnings.warn(f"{path} is unreadable ({problem}); its cell counts as not run", stacklevel=3)
        return None

    def finished(self, key: str) -> CellRecord | None:
        """The cell's stored record, or None when it has not run (or its result is unreadable)."""
        path = self.result_path(key)
        return self._result(path) if path.exists() else None

    def ledger(self, key: str) -> Ledger | None:
        """The cell's stored ledger, or None when it stored none."""
        path = self.ledger_path(key)
        return Ledger.from_dict(json.loads(path.read_text()), str(path)) if path.exists() else None

    def ledger_file(self, key: str) -> dict[str, Any] | None:
        """The cell's ledger.json as stored: the ledger, its budget and the harness's re-accounting."""
        path = self.ledger_path(key)
        return json.loads(path.read_text()) if path.exists() else None

    def synthetic(self, key: str) -> pd.DataFrame:
        return pd.read_parquet(self.synthetic_path(key))

    def relabel(self, record: CellRecord, label: str, dataset: str) -> None:
        """Give a finished cell (its stored `record`) the suite's current label for its method and
        name for its dataset (a user file that moved keeps its cells: they are keyed by its content)."""
        if record.cell.method != label or record.cell.dataset != dataset:
            record.cell = replace(record.cell, method=label, dataset=dataset)
            record.method.label, record.dataset.name = label, dataset
            write_json_atomic(self.result_path(record.key), record.to_dict())

    def write_cell(self, record: CellRecord, synthetic: pd.DataFrame | None) -> None:
        """Write the cell's folder (its record, its ledger, its synthetic rows) whole or not at all: on an
        error, nothing of it is left behind."""
        key, ledger = record.key, record.ledger_file()
        texts = {self.result_path(key).name: to_json(record.to_dict()),
                 **({self.ledger_path(key).name: to_json(ledger)} if ledger is not None else {})}
        tmp = self.cells / f".tmp-{key}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        try:
            if synthetic is not None:
                synthetic.to_parquet(tmp / self.synthetic_path(key).name, index=False)
            for name, text in texts.items():
                (tmp / name).write_text(text)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        final = self.cell_dir(key)
        if final.exists():  # a failed cell being retried: swap the old folder out first
            old = self.cells / f".old-{key}-{os.getpid()}"
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old)
        else:
            os.replace(tmp, final)

    def scored(self) -> dict[str, dict[str, Any]]:
        """The cells of scored rows (`dpgym score`) by key: label, dataset, ε and seed of each."""
        return json.loads(self.scored_index.read_text()) if self.scored_index.exists() else {}

    def add_scored(self, record: CellRecord) -> None:
        """List a scored cell written with `write_cell`, in place of an earlier one of the same label,
        dataset, ε and seed (whose folder is kept, but no longer shown)."""
        cell = record.cell
        entry = {"label": cell.method, "dataset": cell.dataset, "epsilon": cell.to_dict()["epsilon"], "seed": cell.seed}
        kept = {key: e for key, e in self.scored().items() if key != record.key and
                [e["label"], e["dataset"], e["epsilon"], e["seed"]] != list(entry.values())}
        write_json_atomic(self.scored_index, {**kept, record.key: entry})

    def cells_outside(self, keys: set[str]) -> list[str]:
        """Keys of stored cells that are not among `keys` (e.g. cells of a suite run here before)."""
        if not self.cells.exists():
            return []
        return sorted(p.name for p in self.cells.iterdir() if not p.name.startswith(".") and p.name not in keys)

    def results(self, keys: set[str] | None = None) -> list[CellRecord]:
        """Finished cells' records; with `keys`, only those cells (e.g. the current suite's)."""
        if not self.cells.exists():
            raise StoreError(f"{self.root} has no cells/ folder: not a dpgym run directory")
        paths = sorted(self.cells.glob("[!.]*/result.json"))
        results = (self._result(p) for p in paths if keys is None or p.parent.name in keys)
        return [r for r in results if r is not None]
