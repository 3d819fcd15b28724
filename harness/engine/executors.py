"""Executors: where cells run. The driver hands cells to one and writes what comes back.

- ``serial``: in the driver process, one after another (debugging: breakpoints work; no limits).
- ``processes``: every cell in its own child process under its time and memory limits, up to
  ``workers`` at once (default: the number of cores); each child gets cores // workers threads.
- ``dask``: the same isolated child, started by a ``dask.distributed`` worker, on an existing
  cluster (``scheduler``) or a LocalCluster of ``workers`` processes. A stopped run's cells stop
  there too: its client's tasks are released, and each cell's supervisor kills the cell's processes.

Only results travel back; the driver alone writes the run directory, so a worker (or an orphan of
a killed driver) can never leave a half-written cell behind. The serial and process executors tell
the run's `Activity` when each cell starts, the stages it enters, and when it ends (the progress
display); dask cells start on the cluster's schedule, which the driver does not see.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, ThreadPoolExecutor, wait
from contextlib import suppress
from dataclasses import replace
from typing import Any

from dpgym.registry import PluginError, Registry
from dpgym.engine.activity import Activity
from dpgym.engine.cell import STAGE_LISTENER, run_cell
from dpgym.engine.suite import Plan, SuiteError
from dpgym.engine.worker import CellTask, Outcome, run_isolated, start_forkserver


def start_early(plan: Plan, datasets: list[str], code: list[str]) -> None:
    """Before the driver discovers its plugins: a `processes` run spawns its forkserver now, so
    that the server's preload (the same imports and discovery, plus the datasets) overlaps the
    driver's start-up instead of following it (about 4 s of an 8-s start on 2 cores). `code`: the
    generators, learners and metrics whose code the server imports (see `start_forkserver`)."""
    if plan.executor == "processes":
        start_forkserver(",".join(Registry.env_references()), sorted(datasets), sorted(code), wait=False)


class SerialExecutor:
    """Cells run in the driver itself: no isolation, no limits; for debugging a plugin."""

    def __init__(self, plan: Plan, registry: Registry, activity: Activity):
        self.plan, self.registry, self.activity = plan, registry, activity

    def __enter__(self) -> SerialExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def run(self, cells: list[Any]) -> Iterator[tuple[Any, Outcome]]:
        for cell in cells:
            directory = os.getcwd()
            self.activity.start(cell.key, cell.title, cell.method.display)
            listening = STAGE_LISTENER.set(lambda label, key=cell.key: self.activity.stage(key, label))
            try:
                record, synthetic = run_cell(cell, self.registry, device=self.plan.device)
            finally:  # a plugin's os.chdir must not move the next cell's (or the driver's) relative paths
                os.chdir(directory)
                STAGE_LISTENER.reset(listening)
                self.activity.finish(cell.key)
            yield cell, Outcome(record, synthetic, peak_rss_mb=record.peak_rss_mb)


def _task(plan: Plan, registry: Registry, cell: Any) -> CellTask:
    return CellTask(cell, registry.worker_plugins, plan.device, plan.threads, plan.timeout, plan.max_memory)


def _require_discoverable(registry: Registry, executor: str) -> None:
    if registry.direct:
        raise PluginError(
            f"plugins {', '.join(registry.direct)} were registered as objects with state, which the {executor} "
            f"executor's worker processes cannot re-create; register them through DPGYM_PLUGINS=module:attr "
            "or an entry point, or use the serial executor")


class ProcessExecutor:
    """Up to `workers` isolated children at once, each supervised by a driver thread."""

    def __init__(self, plan: Plan, registry: Registry, activity: Activity):
        _require_discoverable(registry, "processes")
        self.plan, self.registry, self.activity = plan, registry, activity
        self.cancel = threading.Event()

    def __enter__(self) -> ProcessExecutor:
        self.pool = ThreadPoolExecutor(self.plan.workers, thread_name_prefix="dpgym-supervisor")
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel.set()  # on an exception or Ctrl-C, running children are killed, queued ones dropped
        self.pool.shutdown(wait=True, cancel_futures=True)

    def run(self, cells: list[Any]) -> Iterator[tuple[Any, Outcome]]:
        if not cells:
            return
        code = {c.method.name for c in cells} | {m for c in cells for m in c.metrics}
        start_forkserver(self.registry.worker_plugins, sorted({c.dataset for c in cells}), sorted(code))
        env = dict(os.environ)
        pending: dict[Future[Outcome], Any] = {
            self.pool.submit(self._supervised, replace(_task(self.plan, self.registry, c), env=env), c): c
            for c in cells}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield pending.pop(future), future.result()

    def _supervised(self, task: CellTask, cell: Any) -> Outcome:
        """On a supervisor thread, once a worker slot is free: the cell runs, and the activity hears of it."""
        self.activity.start(cell.key, cell.title, cell.method.display)
        try:
            return run_isolated(task, self.cancel, on_stage=lambda label: self.activity.stage(cell.key, label))
        finally:
            self.activity.finish(cell.key)


class _TaskCancelled:
    """`run_isolated`'s cancel signal on a dask worker: set once the worker has moved the running task
    to "cancelled", which it does when the scheduler releases the task because no client wants it any
    more (the driver was stopped, closing its client, or killed, dropping its connection). Dask cannot
    stop a task's thread, so the supervisor kills the cell's processes itself and the slot is free.
    It reads the worker's own state of the task, which the supervisor's poll already visits."""

    def __init__(self) -> None:
        from distributed import get_worker

        worker = get_worker()
        self.tasks, self.key = worker.state.tasks, worker.get_current_task()

    def is_set(self) -> bool:
        task = self.tasks.get(self.key)  # a running task stays in the table until its function returns
        return task is not None and task.state == "cancelled"


def run_on_dask_worker(task: CellTask) -> Outcome:
    return run_isolated(task, _TaskCancelled())


class CellCancelled(ConnectionError):
    """The cluster gave up a cell before it finished (the client lost its scheduler, or the cell was
    cancelled there): no fault of the cell's, so it is not recorded as failed; the run stops, keeping
    the cells it finished, and the same command resumes it."""


STOPPED_CLOSE_SECONDS = 5  # how long a stopped run waits for its dask client to close (DaskExecutor.__exit__)


class DaskExecutor:
    """Isolated children started by dask workers; a LocalCluster when no scheduler is given."""

    def __init__(self, plan: Plan, registry: Registry, activity: Activity):
        _require_discoverable(registry, "dask")
        self.plan, self.registry = plan, registry

    def __enter__(self) -> DaskExecutor:
        try:
            import dask
            from distributed import Client, LocalCluster
        except ImportError as err:
            raise SuiteError("the dask executor needs dask and distributed: pip install 'dpgym[dask]'") from err
        self.cluster = None
        if self.plan.scheduler:
            self.client = Client(self.plan.scheduler)
        else:
            # Workers start the cells' child processes: a daemonic worker may not have children.
            # memory_limit=0: each cell has its own limit; dask must not kill a whole worker.
            with dask.config.set({"distributed.worker.daemon": False}):
                self.cluster = LocalCluster(n_workers=self.plan.workers, threads_per_worker=1, processes=True,
                                            memory_limit=0, dashboard_address=None)
            self.client = Client(self.cluster)
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        # Closing the client (as a killed driver's lost connection does) has the scheduler release the
        # run's tasks: queued cells never start and running ones are cancelled (see _TaskCancelled).
        if kind is None:
            self.client.close()
        else:
            # A stopped run (Ctrl-C, a lost scheduler) waits for the close a few seconds, not distributed's
            # twice 30-s connect timeout, and its own error, not the close's TimeoutError, reaches the
            # user: the connection, dropped when the driver exits, releases the tasks just the same.
            with suppress(TimeoutError):
                self.client.close(timeout=STOPPED_CLOSE_SECONDS)
        if self.cluster is not None:
            self.cluster.close()

    def run(self, cells: list[Any]) -> Iterator[tuple[Any, Outcome]]:
        from distributed import as_completed

        # On our LocalCluster we know the share of cores; on a remote worker it is found there.
        local = self.cluster is not None
        # Keys of this run alone: a run started again at once must not adopt a stopped run's task that
        # the worker is still cancelling (a task given its key again resumes instead of starting anew).
        run = uuid.uuid4().hex[:8]
        futures = {}
        for cell in cells:
            task = _task(self.plan, self.registry, cell)
            task = task if local else replace(task, threads=None)
            futures[self.client.submit(run_on_dask_worker, task, key=f"dpgym-cell-{cell.key}-{run}", pure=False,
                                       retries=0)] = cell
        for future in as_completed(futures):
            cell = futures[future]
            try:
                outcome = future.result()
            except CancelledError as err:
                raise CellCancelled(f"dask: cell {cell.key} was cancelled on the cluster before it finished ({err}); "
                                    "it is not recorded, and the same command resumes the run") from err
            except Exception as err:  # the dask worker itself died or the task could not start
                outcome = Outcome(failure={"reason": "worker error", "type": type(err).__name__,
                                           "message": f"worker error: dask: {type(err).__name__}: {err}"})
            yield cell, outcome


EXECUTORS = {"serial": SerialExecutor, "processes": ProcessExecutor, "dask": DaskExecutor}


def make_executor(plan: Plan, registry: Registry,
                  activity: Activity | None = None) -> SerialExecutor | ProcessExecutor | DaskExecutor:
    return EXECUTORS[plan.executor](plan, registry, activity or Activity())
