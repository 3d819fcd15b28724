"""Running a grid: skip what the run directory already holds, hand the rest to an executor, and store
each cell as it finishes, telling observer hooks and the progress display.

On a terminal the display is live: the bar, every running cell with its stage and how long it has
been in it, and the time left estimated from measured cell durations (`dpgym.engine.activity`). In
Jupyter one output, replaced as cells finish, shows the latest and the counts. Elsewhere without a
terminal (a log), or with `show_progress=False`, each finished cell prints one line instead.

How one cell runs is `dpgym.engine.cell`; how a suite becomes cells is `dpgym.engine.grid`; where cells run
(in this process, in supervised child processes, on dask) is `dpgym.engine.executors`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn
from rich.table import Table
from rich.text import Text

from dpgym.registry import Registry
from dpgym.results.records import CellRecord, ErrorRecord, Status
from dpgym.results.store import RunStore, runs_again
from dpgym.engine.activity import Activity
from dpgym.engine.cell import cell_header, unrecorded
from dpgym.engine.executors import make_executor
from dpgym.engine.grid import Cell, check_builds
from dpgym.engine.pipeline import Run, stored_manifest
from dpgym.engine.suite import Plan, Settings, Suite
from dpgym.engine.worker import Outcome, sweep_temp
from dpgym.specs import CellResult


@dataclass
class RunSummary:
    total: int
    skipped: int = 0  # already finished in an earlier run
    ok: int = 0
    failed: int = 0
    unavailable: int = 0
    messages: list[str] = field(default_factory=list)


def run_suite(suite: Suite, store: RunStore, registry: Registry, retry_failed: bool = False,
              show_progress: bool = True, settings: Settings | None = None) -> RunSummary:
    """Run `suite` into `store` from Python, prepared as `dpgym run` prepares it: its run directory's
    manifest read and the execution `settings` (over the suite's own) resolved once."""
    plan = Plan.resolve((settings or Settings()).over(suite.settings))
    return run_grid(Run.prepare(suite, store, registry, stored_manifest(store), plan), retry_failed, show_progress)


def run_grid(run: Run, retry_failed: bool = False, show_progress: bool = True) -> RunSummary:
    """Run every cell of `run` not already finished in its directory (failed ones too with
    `retry_failed`), under its resolved execution plan; the run learns every cell's final record."""
    plan, store, registry, cells = run.plan, run.store, run.registry, run.cells
    assert plan is not None, "a run that runs cells has an execution plan (Run.prepare)"
    stored = run.stored()
    check_builds((c for c in cells if runs_again(stored[c.key], retry_failed)), registry)
    summary = RunSummary(total=len(cells))
    records: list[CellRecord] = []
    with store.locked():
        sweep_temp()  # what runs killed on this host left in the temporary folder, which their exit would remove
        earlier = store.cells_outside(run.keys)
        if earlier:
            summary.messages.append(
                f"{len(earlier)} finished cell(s) in {store.root} are not part of this suite (an earlier suite's, or "
                "the same suite with other settings that change cells): they are kept, but the leaderboard and "
                "report now show this suite only; run the earlier suite into this directory again to show them")
        run.manifest = store.write_manifest(run.suite.to_dict(), execution=asdict(plan), earlier=run.manifest)
        todo = []
        finished_failed = 0
        activity = Activity()
        for cell in cells:
            finished = stored[cell.key]
            if finished is not None and finished.ok:  # how long this method's cells take
                activity.measured(cell.method.display, finished.timings.total_seconds)
            if runs_again(finished, retry_failed):
                todo.append(cell)
            else:
                summary.skipped += 1
                finished_failed += not finished.ok
                store.relabel(finished, cell.method.display, cell.dataset)  # names, not part of the key
                records.append(finished)
        if finished_failed:
            summary.messages.append(f"{finished_failed} of the cells already done had failed or were unavailable; "
                                    "re-run with --retry-failed to run them again")
        if plan.executor == "serial" and (plan.timeout or plan.max_memory):
            summary.messages.append("the serial executor applies no timeout or memory limit; "
                                    "use --executor processes to enforce them")
        ended: set[str] = set()

        def seconds_left() -> float | None:
            started = {running.key for running in activity.running()}
            return activity.seconds_left(
                (c.method.display for c in todo if c.key not in ended and c.key not in started), plan.workers)

        console = Console(highlight=False)
        live = show_progress and console.is_terminal
        notebook = NotebookLine() if show_progress and not live and console.is_jupyter else None
        with RunProgress(activity, seconds_left, console=console, disable=not live) as progress, \
                make_executor(plan, registry, activity) as executor:
            task = progress.add_task(run.suite.name, total=len(cells), completed=summary.skipped, ok=0, failed=0)
            for cell in todo:
                _notify(registry, "dpgym_cell_started", cell=cell.info())
            for done, (cell, outcome) in enumerate(executor.run(todo), start=1):
                record = outcome_record(cell, outcome, registry)
                try:
                    store.write_cell(record, outcome.synthetic)
                except Exception as err:  # e.g. a plugin's output the cell's own check missed: fail the cell only
                    record = unrecorded(cell, registry, record, err)
                    store.write_cell(record, None)
                records.append(record)
                _notify(registry, "dpgym_cell_finished", cell=cell.info(), result=CellResult.of(record.to_dict()))
                _count(summary, cell, record)
                ended.add(cell.key)
                if record.ok:
                    activity.measured(cell.method.display, record.timings.total_seconds)
                progress.update(task, advance=1, ok=summary.ok, failed=summary.failed + summary.unavailable)
                line = finished_line(summary.skipped + done, len(cells), cell, record)
                if notebook is not None:
                    notebook.show(f"{line}\nok {summary.ok} · failed {summary.failed + summary.unavailable}")
                elif not live:
                    console.print(line, markup=False, soft_wrap=True)
    run.recorded(records)
    summary.messages = list(dict.fromkeys(summary.messages))
    return summary


def duration(seconds: float) -> str:
    """`1:02:03`, `4:05` or `7s`."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}" if minutes else f"{secs}s"


def finished_line(count: int, total: int, cell: Cell, record: CellRecord) -> str:
    """The line a finished cell prints when the display is not live."""
    timings = record.timings
    line = f"[{count}/{total}] {record.status}: {cell.title} in {duration(timings.total_seconds or 0.0)}"
    if record.ok:
        stages = [(name, seconds) for name in ("fit", "sample", "evaluate")
                  if (seconds := getattr(timings, f"{name}_seconds")) is not None]
        return line + f" ({', '.join(f'{name} {duration(seconds)}' for name, seconds in stages)})"
    error = record.error
    return line + f" (at {error.stage if error else '?'}: {error.message if error else ''})"


class NotebookLine:
    """In Jupyter, where a live display needs widgets: the latest finished cell and the counts so far, one
    output replaced in place as cells finish, instead of a line per cell."""

    def __init__(self) -> None:
        from IPython.display import display  # in a notebook's kernel, always there

        self.handle = display({"text/plain": "starting"}, raw=True, display_id=True)

    def show(self, text: str) -> None:
        self.handle.update({"text/plain": text}, raw=True)


class TimeLeft(ProgressColumn):
    """The estimate of `dpgym.engine.activity.Activity.seconds_left`, which moves with every running cell's
    clock rather than waiting for a cell to finish."""

    def __init__(self, seconds_left: Callable[[], float | None]):
        super().__init__()
        self.seconds_left = seconds_left

    def render(self, task: Task) -> Text:
        if task.finished:
            return Text("done")
        left = self.seconds_left()
        return Text("time left: measuring" if left is None else f"about {duration(left)} left", style="cyan")


class RunProgress(Progress):
    """The bar, then one line per running cell: what it is, its stage, for how long."""

    def __init__(self, activity: Activity, seconds_left: Callable[[], float | None], **kwargs: Any):
        self.activity = activity  # before Progress starts rendering
        super().__init__(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("ok {task.fields[ok]} · failed {task.fields[failed]}"), TimeLeft(seconds_left),
            transient=False, **kwargs)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        running = sorted(self.activity.running(), key=lambda r: -r.cell_seconds)
        if running:
            table = Table.grid(padding=(0, 2))
            for cell in running:
                table.add_row(f"  {cell.title}", Text(cell.stage, style="magenta"),
                              f"{duration(cell.stage_seconds)} in stage, {duration(cell.cell_seconds)} in all")
            yield table


def outcome_record(cell: Cell, outcome: Outcome, registry: Registry) -> CellRecord:
    """The record of a finished cell; a cell whose process was killed or crashed is failed."""
    if outcome.failure is None:
        record = outcome.result
        record.peak_rss_mb = max(record.peak_rss_mb, outcome.peak_rss_mb)
        record.warnings = sorted({*record.warnings, *outcome.notes})
        record.execution = outcome.execution
        return record
    record = cell_header(cell, registry)
    failure = dict(outcome.failure)
    record.status, record.peak_rss_mb, record.warnings = Status.FAILED, outcome.peak_rss_mb, outcome.notes
    record.error = ErrorRecord("worker", failure.get("type", "?"), failure.get("message", ""),
                               failure.get("traceback", ""), failure.get("reason", ""))
    record.timings.total_seconds = outcome.wall_seconds
    return record


def _notify(registry: Registry, hook: str, **kwargs: Any) -> None:
    try:
        getattr(registry.manager.hook, hook)(**kwargs)
    except Exception as err:  # an observer's fault must not fail the cell
        warnings.warn(f"observer hook {hook} raised {type(err).__name__}: {err}", stacklevel=2)


def _count(summary: RunSummary, cell: Cell, record: CellRecord) -> None:
    if record.ok:
        summary.ok += 1
    elif record.status == Status.UNAVAILABLE:
        summary.unavailable += 1
        message = record.error.message if record.error else ""
        summary.messages.append(message if message.startswith(cell.dataset) else f"{cell.dataset} unavailable: {message}")
    else:
        summary.failed += 1
        err = record.error
        summary.messages.append(f"failed {cell.title} at {err.stage}: {err.type}: {err.message}" if err
                                else f"failed {cell.title}")
