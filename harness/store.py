"""The run directory: a manifest, and one folder per finished cell, each written atomically.

    DIR/run.json                     manifest: suite, package versions, git revision, history
    DIR/cells/<key>/result.json      status, metrics, timings, peak memory, error
    DIR/cells/<key>/ledger.json      the privacy ledger and its independent re-accounting
    DIR/cells/<key>/synthetic.parquet
    DIR/audits/<key>/audit.json      an empirical audit's summary, when `dpgym audit` wrote into DIR

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
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd

TRACKED_PACKAGES = ("dpgym", "numpy", "pandas", "scikit-learn", "xgboost-cpu", "xgboost", "torch", "opacus",
                    "prv-accountant", "pluggy", "scipy", "mbi", "jax", "jaxlib")


# result.json: format 2 names what a cell runs, generator or learner, its "method" (format 1 said
# "generator" for both); format 1 is still read, and upgraded as it is read (`upgraded`).
RESULT_FORMAT = "dpgym-result/2"
RESULT_FORMAT_1 = "dpgym-result/1"


def upgraded(result: dict[str, Any]) -> dict[str, Any]:
    """A stored result in the current format: one of format 1 gets its method's kind (from its task)
    and has its "generator" entries renamed "method"; nothing else differs."""
    if result.get("format") != RESULT_FORMAT_1:
        return result
    kind = "learner" if result.get("task") == "private_learning" else "generator"
    cell = {("method" if name == "generator" else name): value for name, value in result["cell"].items()}
    method = {"kind": kind, **result.get("generator", {})}
    return {**{name: value for name, value in result.items() if name != "generator"}, "format": RESULT_FORMAT,
            "cell": {"key": cell.get("key", ""), "kind": kind, **cell}, "method": method}


def stored_audits(root: Path) -> list[dict[str, Any]]:
    """Every audit summary `dpgym audit` stored under `root`/audits/, in key order: read by the audits'
    index and by the leaderboard of a run directory the audits were written into."""
    return [json.loads(path.read_text()) for path in sorted(Path(root).glob("audits/*/audit.json"))]


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


def runs_again(finished: dict[str, Any] | None, retry_failed: bool) -> bool:
    """Whether a run (re)does a cell with this stored result: one not run yet, or with `retry_failed`
    one that failed or was unavailable."""
    return finished is None or (retry_failed and finished["status"] in ("failed", "unavailable"))


class RunStore:
    def __init__(self, root: Path):
        self.root = Path(root).absolute()  # fixed when opened: code run in the driver may change directory
        self.cells = self.root / "cells"

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

    def write_manifest(self, suite: dict[str, Any], execution: dict[str, Any] | None = None) -> None:
        """Written before any cell: what was asked, with what software, and each (re)start's executor."""
        path = self.root / "run.json"
        history = json.loads(path.read_text()).get("history", []) if path.exists() else []
        history.append({"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": sys.argv[1:],
                        "pid": os.getpid(), "execution": execution or {}})
        write_json_atomic(path, {
            "format": "dpgym-run/1",
            "suite": suite,
            "packages": package_versions(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "machine": machine(),
            "git_revision": git_revision(),
            "history": history,
        })

    def manifest(self) -> dict[str, Any]:
        path = self.root / "run.json"
        if not path.exists():
            raise StoreError(f"{self.root} is not a dpgym run directory (no run.json)")
        return json.loads(path.read_text())

    def _result(self, path: Path) -> dict[str, Any] | None:
        """A cell's result, or None (with a warning naming the file) when it is unreadable, e.g. cut
        short by a full disk or edited by hand: the cell then counts as not run and is run again."""
        try:
            result = json.loads(path.read_text())
            if isinstance(result, dict) and isinstance(result.get("cell"), dict) and "status" in result:
                return upgraded(result)
            problem = "not a dpgym cell result"
        except (OSError, ValueError) as err:
            problem = f"{type(err).__name__}: {err}"
        warnings.warn(f"{path} is unreadable ({problem}); its cell counts as not run", stacklevel=3)
        return None

    def finished(self, key: str) -> dict[str, Any] | None:
        """The cell's stored result, or None when it has not run (or its result is unreadable)."""
        path = self.cells / key / "result.json"
        return self._result(path) if path.exists() else None

    def relabel(self, result: dict[str, Any], label: str, dataset: str) -> None:
        """Give a finished cell (its stored `result`) the suite's current label for its method and
        name for its dataset (a user file that moved keeps its cells: they are keyed by its content)."""
        if result["cell"].get("method") != label or result["cell"].get("dataset") != dataset:
            result["cell"].update(method=label, dataset=dataset)
            result.setdefault("method", {})["label"] = label
            result.setdefault("dataset", {})["name"] = dataset
            write_json_atomic(self.cells / result["cell"]["key"] / "result.json", result)

    def write_cell(self, key: str, result: dict[str, Any], ledger: dict[str, Any] | None,
                   synthetic: pd.DataFrame | None) -> None:
        """Write the cell's folder whole or not at all: on an error, nothing of it is left behind."""
        texts = {"result.json": to_json(result), **({"ledger.json": to_json(ledger)} if ledger is not None else {})}
        tmp = self.cells / f".tmp-{key}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        try:
            if synthetic is not None:
                synthetic.to_parquet(tmp / "synthetic.parquet", index=False)
            for name, text in texts.items():
                (tmp / name).write_text(text)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        final = self.cells / key
        if final.exists():  # a failed cell being retried: swap the old folder out first
            old = self.cells / f".old-{key}-{os.getpid()}"
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old)
        else:
            os.replace(tmp, final)

    def cells_outside(self, keys: set[str]) -> list[str]:
        """Keys of stored cells that are not among `keys` (e.g. cells of a suite run here before)."""
        if not self.cells.exists():
            return []
        return sorted(p.name for p in self.cells.iterdir() if not p.name.startswith(".") and p.name not in keys)

    def results(self, keys: set[str] | None = None) -> list[dict[str, Any]]:
        """Finished cells' results; with `keys`, only those cells (e.g. the current suite's)."""
        if not self.cells.exists():
            raise StoreError(f"{self.root} has no cells/ folder: not a dpgym run directory")
        paths = sorted(self.cells.glob("[!.]*/result.json"))
        results = (self._result(p) for p in paths if keys is None or p.parent.name in keys)
        return [r for r in results if r is not None]
