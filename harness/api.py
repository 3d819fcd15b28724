"""dpgym from Python: `run`, `open` and `score` return a `Results`, read from the run directory they
wrote or name. Each calls the functions the `dpgym` command's own commands call (`dpgym.commands`),
so a run started here and one started from a shell write the same directory; an error is the
exception the command would have printed (its message is the `dpgym: error:` line), raised.

    import dpgym

    results = dpgym.run(generators=["independent", "mst"], datasets=["adult"], epsilons=[1], seeds=2,
                        out="runs/mine")
    results.leaderboard      # one row per generator × dataset × ε × metric value
    results.cells            # one row per cell
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from dpgym.engine.pipeline import Run
from dpgym.privacy.ledger import Ledger
from dpgym.registry import Registry
from dpgym.results.store import RunStore, StoreError

# The columns of `Results.cells`, before each metric value's own column.
CELL_COLUMNS = ("generator", "plugin", "task", "dataset", "epsilon", "delta", "seed", "key", "status", "error",
                "guarantee", "claimed_epsilon", "reaccounted_epsilon", "fit_seconds", "sample_seconds",
                "total_seconds", "peak_rss_mb")


def _option(values: Any, text: Any = str) -> str | None:
    """A list option as the command line writes it (comma-separated); a string passes as it is."""
    if values is None or isinstance(values, str):
        return values
    if not isinstance(values, Iterable):
        values = [values]
    return ",".join(text(v) for v in values)


def _epsilon(value: Any) -> str:
    return "inf" if isinstance(value, float) and math.isinf(value) else str(value)


def _settings(overrides: Mapping[str, Any] | Sequence[str] | None) -> list[str]:
    """``{"independent.numeric_bins": 16}`` or ``["independent.numeric_bins=16"]`` as `--set` items; a
    value is written as TOML (JSON's numbers, strings and booleans are TOML's), which `--set` reads."""
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        return [f"{key}={json.dumps(value)}" for key, value in overrides.items()]
    return [str(item) for item in overrides]


def _command(argv: list[str], **given: Any) -> argparse.Namespace:
    """The command line `argv` (a command and its required options) parsed as `dpgym` parses it, every
    other option at its default, then `given` in their place."""
    from dpgym.cli import build_parser

    args = build_parser().parse_args(argv)
    for key, value in given.items():
        setattr(args, key, value)
    return args


def _consoles() -> tuple[Console, Console]:
    return Console(highlight=False), Console(stderr=True, highlight=False)


def run(suite: str | None = None, *, generators: Sequence[str] | str | None = None,
        learners: Sequence[str] | str | None = None, datasets: Sequence[str] | str | None = None,
        epsilons: Sequence[float] | float | str | None = None, seeds: int | None = None, delta: float | None = None,
        metrics: Sequence[str] | str | None = None, set: Mapping[str, Any] | Sequence[str] | None = None,
        out: str | Path, retry_failed: bool = False, executor: str | None = None, workers: int | None = None,
        timeout: str | float | None = None, max_memory: str | None = None, device: str | None = None,
        progress: bool = True) -> Results:
    """`dpgym run`: a suite by name or file (`suite="smoke"`), or an ad-hoc grid of `generators` (and
    `learners`) × `datasets` × `epsilons` × `seeds` (a count), into the run directory `out` (running into
    it again resumes it). `set` overrides hyper-parameters (``{"independent.numeric_bins": 16}``).
    The leaderboard files and report are written as the command writes them; the results are returned.

    The processes executor (the default) starts its workers by spawning, so a script that calls this
    guards its top level with ``if __name__ == "__main__":``."""
    from dpgym.commands import check_run, cmd_run, prepare_run

    args = _command(["run", f"--out={out}"], suite=suite, generators=_option(generators), learners=_option(learners),
                    datasets=_option(datasets), epsilons=_option(epsilons, _epsilon), seeds=seeds, delta=delta,
                    metrics=_option(metrics), set=_settings(set), out=Path(out), retry_failed=retry_failed,
                    no_progress=not progress, executor=executor, workers=workers,
                    timeout=None if timeout is None else str(timeout), max_memory=max_memory, device=device)
    console, err = _consoles()
    prepared = prepare_run(args)
    check_run(prepared, err, retry_failed)
    cmd_run(args, prepared, console)
    return Results(prepared)


def open(path: str | Path) -> Results:  # noqa: A001 (dpgym.open reads like the built-in it mirrors)
    """The results of an existing run directory (what `dpgym leaderboard DIR` reads)."""
    return Results(Run.open(RunStore(Path(path)), Registry.discover()))


def score(*, dataset: str, synthetic: str | Path, label: str, out: str | Path, epsilon: float | None = None,
          seed: int = 0, metrics: Sequence[str] | str | None = None) -> Results:
    """`dpgym score`: synthetic rows made elsewhere (a CSV or Parquet file) scored against `dataset`'s
    real split with the metrics of a cell, written into the run directory `out` as a row `label` of
    its own beside the run's generators: guarantee ``nominal`` with a stated `epsilon`, else ``none``;
    no ledger, so the row is shown and never ranked. Bad rows raise before anything is written."""
    from dpgym.commands import cmd_score

    args = _command(["score", f"--dataset={dataset}", f"--synthetic={synthetic}", f"--label={label}", f"--out={out}"],
                    epsilon=None if epsilon is None else _epsilon(epsilon), seed=seed, metrics=_option(metrics))
    console, _ = _consoles()
    cmd_score(args, Registry.discover(), console)
    return open(out)


class Results:
    """A run directory's results: its leaderboard, ranking, cells, ledgers and report."""

    def __init__(self, run: Run):
        self._run = run

    @property
    def path(self) -> Path:
        return self._run.store.root

    @cached_property
    def _board(self) -> Any:
        return self._run.leaderboard()

    @cached_property
    def leaderboard(self) -> pd.DataFrame:
        """One row per generator × dataset × ε × metric value: its mean over seeds, standard deviation,
        95% bootstrap interval and rank among the generators (a shared rank: overlapping intervals),
        with the row's ε spent (re-accounted), guarantee, seeds, charged failures and privacy check.
        `leaderboard.md` explains every statistic."""
        lb = self._board
        rows = []
        for _, row in lb.board.iterrows():
            for metric in lb.metrics:
                rows.append({
                    "generator": row.generator, "dataset": row.dataset, "epsilon": row.epsilon, "delta": row.delta,
                    "metric": metric,
                    "direction": str(lb.directions[metric]) if metric in lb.directions else "",
                    **{part: row[f"{metric}_{part}"] for part in ("mean", "std", "ci_low", "ci_high", "rank")},
                    "eps_spent": row.eps_spent, "guarantee": row.guarantee, "n_seeds": row.n_seeds,
                    "failures": row.failures, "privacy_check": row.privacy_check,
                })
        return pd.DataFrame(rows)

    @cached_property
    def ranking(self) -> pd.DataFrame:
        """The overall ranking: each ranked generator's mean rank and rank (1 + the generators significantly
        better than it); the test behind it, in words, is ``ranking.attrs["statement"]``."""
        ranking = self._board.ranking
        frame = pd.DataFrame(ranking.generators, columns=["generator", "mean_rank", "rank"])
        frame.attrs["statement"] = ranking.statement
        return frame

    @cached_property
    def cells(self) -> pd.DataFrame:
        """One row per cell as it finished (failed cells uncharged): its status and error, guarantee,
        claimed and re-accounted ε, timings, peak memory, and one column per metric value."""
        from dpgym.results.leaderboard import cell_rows

        frame = cell_rows(self._run.results())
        values = [c for c in frame.columns if c.startswith("metric:")]
        return frame[[*CELL_COLUMNS, *values]].rename(columns=lambda c: c.removeprefix("metric:"))

    def ledger(self, cell: str | pd.Series | Mapping[str, Any]) -> Ledger:
        """A cell's privacy ledger, by its key or by its row of `cells`."""
        key = cell if isinstance(cell, str) else str(cell["key"])
        found = self._run.store.ledger(key)
        if found is None:
            raise StoreError(f"{self.path}: cell {key!r} has no ledger (a cell that failed before its fit, or scored "
                             "rows, whose privacy nothing accounts for)")
        return found

    def report(self, path: str | Path | None = None) -> Path:
        """Write the run's self-contained HTML report (DIR/report.html, or `path`); its path."""
        from dpgym.report import write_report

        return write_report(self._run, None if path is None else Path(path))

    def __repr__(self) -> str:
        cells = self.cells
        counts = ", ".join(f"{n} {status}" for status, n in cells.status.value_counts().items())
        return f"Results({str(self.path)!r}: {len(cells)} cells, {counts})"

    def _repr_html_(self) -> str:
        """In Jupyter: one row per generator, dataset and ε, one column per metric value (its mean, 95%
        interval and rank), then the ranking's statement."""
        from html import escape

        board = self.leaderboard
        arrows = {"higher": " ↑", "lower": " ↓"}

        def shown(row: pd.Series) -> str:
            text = f"{row['mean']:.4g}"
            if pd.notna(row.ci_low):
                text += f" [{row.ci_low:.4g}, {row.ci_high:.4g}]"
            return text + (f" #{row['rank']:g}" if pd.notna(row["rank"]) else "")

        table = (board.assign(value=board.apply(shown, axis=1), metric=board.metric + board.direction.map(arrows)
                              .fillna(""))
                 .pivot(index=["generator", "dataset", "epsilon", "guarantee"], columns="metric", values="value"))
        return (f"<p><b>{escape(repr(self))}</b></p>{table.to_html()}"
                f"<p>{escape(self.ranking.attrs['statement'])}</p>")
