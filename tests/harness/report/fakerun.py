"""Write run directories by hand, so leaderboard tests control every number they check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GUARANTEES = {"uniform": "pure", "real": "none"}


def result(generator: str, seed: int, metrics: dict[str, float], *, status: str = "ok", epsilon: float = 1.0,
           dataset: str = "adult", plugin: str | None = None, fit_seconds: float = 1.0,
           total_seconds: float = 2.0, spent: float | None = None, detail: dict[str, Any] | None = None,
           audit: dict[str, Any] | None = None) -> dict[str, Any]:
    """One cell's result.json; `spent`: its re-accounted ε (default: the budget, to float noise);
    `detail`: its metrics' details; `audit`: the audit its cell recorded."""
    plugin = plugin or generator
    out: dict[str, Any] = {
        "format": "dpgym-result/1",
        "cell": {"key": f"{generator}-{dataset}-{epsilon}-{seed}", "generator": generator, "dataset": dataset,
                 "epsilon": epsilon, "delta": 1e-5, "seed": seed},
        "generator": {"name": plugin, "label": generator, "guarantee": GUARANTEES.get(plugin, "formal")},
        "status": status,
        "timings": {"fit_seconds": fit_seconds, "sample_seconds": 0.5, "total_seconds": total_seconds},
        "peak_rss_mb": 100.0,
        "privacy": {"claimed_epsilon": epsilon, "reaccounted": {"epsilon": epsilon * 1.001 if spent is None else spent}},
        "metrics": metrics if status == "ok" else {},
    }
    if detail is not None:
        out["metric_detail"] = detail
    if audit is not None:
        out["audit"] = audit
    if status != "ok":
        out["error"] = {"stage": "fit", "type": "RuntimeError", "message": "model diverged", "traceback": "..."}
        out["timings"] = {"total_seconds": total_seconds}
    return out


def write_run(root: Path, results: list[dict[str, Any]], suite: dict[str, Any] | None = None,
              timeout: float | None = None) -> Path:
    """`timeout`: the per-cell limit as the runner records it, in the manifest's execution history."""
    (root / "cells").mkdir(parents=True)
    (root / "run.json").write_text(json.dumps({"format": "dpgym-run/1", "suite": suite or {"name": "test"},
                                               "history": [{"execution": {"timeout": timeout}}]}))
    for r in results:
        folder = root / "cells" / r["cell"]["key"]
        folder.mkdir()
        (folder / "result.json").write_text(json.dumps(r))
    return root


def leaderboard_of(run_dir: Path, directions: dict[str, Any], generator_independent: Any = (),
                   ranked: Any = None) -> Any:
    """The leaderboard of every cell in a run directory, hand-written or not, ranked on the values in
    `ranked` (every value in `directions` when None)."""
    from dpgym.results.leaderboard import build_leaderboard
    from dpgym.results.store import RunStore

    store = RunStore(run_dir)
    manifest = store.manifest() if store.manifest_path.exists() else {}
    return build_leaderboard(store, store.results(), manifest, directions,
                             list(directions) if ranked is None else ranked, generator_independent)


def write_leaderboard(run_dir: Path, directions: dict[str, Any], ranked: Any = None) -> tuple[Any, str]:
    """Build and write the leaderboard of a hand-written run directory, as `dpgym leaderboard` does."""
    from dpgym.results.render import save_leaderboard
    from dpgym.results.store import RunStore

    lb = leaderboard_of(run_dir, directions, ranked=ranked)
    return lb.board, save_leaderboard(RunStore(run_dir), lb)


def report_of(run_dir: Path, registry: Any, out: Path | None = None) -> Path:
    """The report of the suite last run into a run directory, as `dpgym report` writes it."""
    from dpgym.report import write_report
    from dpgym.results.store import RunStore
    from dpgym.engine.pipeline import Run

    return write_report(Run.open(RunStore(run_dir), registry), out)
