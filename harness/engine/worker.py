"""One cell in its own child process, under a wall-clock and a resident-memory limit.

`run_isolated` is the supervisor: it forks a child from a forkserver (imports and plugin discovery
already paid for in the server, so a cell starts in milliseconds, not seconds), watches it and
returns an `Outcome`. It runs in the driver (the `processes` executor, one thread per busy worker)
or inside a dask worker (the `dask` executor); either way only the driver writes the store.

Why an RSS watchdog rather than RLIMIT_AS: the address-space limit counts virtual reservations,
and torch, OpenBLAS and glibc arenas reserve far more address space than they touch, so a limit
that is safe for real use either fails healthy cells or is too loose to catch a runaway one; a
plugin may also catch the resulting MemoryError and misreport it. Sampling the resident set of the
child and its descendants every 50 ms and SIGKILLing the tree is exact about what we care about
(physical memory) at the price of a short overshoot for very fast allocators.

A driver killed with SIGKILL runs no clean-up, so nothing it started may depend on it: its cells
kill themselves once their supervisor is gone (`_exit_when_orphaned`), its forkserver and the
report's figure workers are killed by the kernel with it (`die_with_parent`, Linux), and what it
left in the temporary folder is removed by the next run on the host (`sweep_temp`).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import multiprocessing.util
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import psutil

from dpgym.registry import PLUGINS_ENV, Registry
from dpgym.engine.cell import STAGE_LISTENER, run_cell

POLL_SECONDS = 0.05
DESCENDANTS_EVERY = 1.0  # listing descendants scans all of /proc: refreshed once a second, not per poll
KILL_ROUNDS = 10  # listings of a cell's processes while stopping them (a fork bomb gets no more)
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36  # linux/prctl.h
EXIT_GRACE_SECONDS = 30.0  # for a child that reported its result to exit before it is killed
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
              "VECLIB_MAXIMUM_THREADS")
SCRATCH_PREFIX = "dpgym-cell-"  # + host hash-pid-start-random: see _scratch_folder
OWNER_PREFIX = "dpgym-owner-"  # + host hash-pid-start: see _tag_temp_dir
WARM_DATASETS_ENV = "DPGYM_WARM_DATASETS"  # read by dpgym.engine.worker_preload in the forkserver
# Also read there: the generators, learners and metrics whose code (named by `Deferred` in their specs)
# the server imports up front; "*" stands for every metric.
WARM_CODE_ENV = "DPGYM_WARM_CODE"
ALL_METRICS = "*"
PARENT_ENV = "DPGYM_FORKSERVER_PARENT"  # read by dpgym.engine.worker_preload: see start_forkserver


@dataclass(frozen=True)
class CellTask:
    """Everything a child needs to run a cell; plain data, so it pickles to any worker."""

    cell: Any  # dpgym.engine.grid.Cell
    plugins: str = ""  # DPGYM_PLUGINS value to discover in the child
    device: str = "auto"
    threads: int | None = 1  # None: the worker's cores // its task slots (a remote dask worker)
    timeout: float | None = None
    max_memory: int | None = None
    # The driver's environment when the cell was handed over: the forkserver's is a snapshot of
    # an earlier moment (None on a dask worker, whose own environment is the right one).
    env: dict[str, str] | None = None
    # What the child runs: `run_cell`, or another module-level function of the same signature whose
    # `cell` has a `key` (an empirical audit's batch of fits). It returns (result, synthetic rows).
    job: Callable[..., tuple[Any, Any]] | None = None


@dataclass
class Outcome:
    """A finished cell as the child reported it, or why the child produced nothing."""

    result: Any = None  # the job's result: a cell's CellRecord (with its ledger), an audit batch's fits
    synthetic: Any = None  # pandas.DataFrame
    execution: dict[str, Any] | None = None  # the child that ran it: pid, host, threads, CPU seconds
    failure: dict[str, Any] | None = None  # {"reason", "type", "message", ...} when killed or crashed
    peak_rss_mb: float = 0.0  # of the child's process tree, as the supervisor saw it
    wall_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


# --- child side --------------------------------------------------------------------------------


@cache
def worker_registry(plugins: str) -> Any:
    """Plugins discovered once per process for a given DPGYM_PLUGINS value (forked warm)."""
    if plugins:
        os.environ[PLUGINS_ENV] = plugins
    else:
        os.environ.pop(PLUGINS_ENV, None)
    return Registry.discover()


def limit_threads(threads: int) -> None:
    """Keep workers from oversubscribing cores: env for libraries loaded later, threadpoolctl and
    torch for those already loaded (torch only if a plugin imported it: never imported here)."""
    for name in THREAD_ENV:
        os.environ[name] = str(threads)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def _exit_when_orphaned(supervisor_pid: int, supervisor_started: int, scratch: str) -> None:
    """An orphan must not burn a core for hours after its driver was killed: it dies too, with the
    helpers in its process group, and its temporary files (training rows among them) go first."""

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if not _running(supervisor_pid, supervisor_started):
                shutil.rmtree(scratch, ignore_errors=True)
                os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="dpgym-orphan-watch").start()


def _adopt_orphans() -> None:
    """Make this process the subreaper of its descendants (Linux): a helper that leaves the process
    group (setsid) and loses its parent stays a descendant, so the supervisor still finds and kills it."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this helper process when `parent`, which started it, dies (Linux), so
    that a parent killed with SIGKILL, which runs no clean-up, leaves no helper running; a helper whose
    parent is already gone exits at once. The signal comes when the parent's *thread* that started
    this process exits: call it only in a process started by its parent's main thread. Without prctl
    only the check remains, and the helper stops once the pipes it shares with its parent close."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request, which then never fires
        os._exit(1)


def _child_main(conn: Any, task: CellTask, supervisor: tuple[int, int], scratch: str) -> None:
    # Its own process group: helpers it forks are found and killed with it, even once orphaned by
    # its crash; and a terminal's Ctrl-C reaches the driver alone, which then cancels the cell.
    os.setpgid(0, 0)
    _adopt_orphans()
    _exit_when_orphaned(*supervisor, scratch)
    try:
        if task.env is not None:
            os.environ.clear()
            os.environ.update(task.env)
        # Temporary files live in a folder the supervisor removes once the cell ends, however it ends.
        os.environ["TMPDIR"] = tempfile.tempdir = scratch
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before any CUDA context exists
        limit_threads(task.threads)
        STAGE_LISTENER.set(lambda label: conn.send(("stage", label)))
        run = task.job or run_cell
        result, synthetic = run(task.cell, worker_registry(task.plugins), device=task.device)
        execution = {"pid": os.getpid(), "host": os.uname().nodename, "threads": task.threads,
                     "cpu_seconds": time.process_time()}  # this process's whole life, since its fork
        conn.send(("ok", (result, synthetic, execution)))
    except BaseException as err:  # the harness's own fault in the child: report it, don't hang
        conn.send(("error", {"type": type(err).__name__, "message": str(err),
                             "traceback": "".join(traceback.format_exception(err))}))
    finally:
        conn.close()


# --- supervisor side ---------------------------------------------------------------------------


def _context() -> multiprocessing.context.BaseContext:
    """A forkserver whose preload warms imports, plugins and the datasets named in the env."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["dpgym.engine.worker_preload"])
    _tag_temp_dir()
    return ctx


@cache
def _tag_temp_dir() -> None:
    """Name this process as the owner of its multiprocessing folder (pymp-* in the temporary folder,
    which holds the forkserver's socket) with an empty file in it. Multiprocessing removes the folder
    when the process exits, but not when it is killed; `sweep_temp` then finds whose it was. A process
    forked from this one shares the folder and, the cache being copied, tags it no further."""
    (Path(multiprocessing.util.get_temp_dir()) / f"{OWNER_PREFIX}{_owner()}").touch()


def start_forkserver(plugins: str, datasets: list[str], code: list[str] = (), wait: bool = True) -> None:
    """Start (and warm) the forkserver now rather than inside the first cell's time limit.

    With `wait`, return once its preload (imports, plugin discovery, the datasets, the code of the
    generators, learners and metrics named in `code`) is done; without,
    return at once, so that the driver's own start-up overlaps the server's. The server reads the
    warm-up lists from its environment when it starts; a server already running keeps its warm
    state, which is only an optimisation: children rediscover as needed.
    """
    from multiprocessing import forkserver

    ctx = _context()
    saved = {name: os.environ.get(name) for name in (WARM_DATASETS_ENV, WARM_CODE_ENV, PLUGINS_ENV, PARENT_ENV)}
    os.environ.update({WARM_DATASETS_ENV: "\n".join(datasets), WARM_CODE_ENV: "\n".join(code),
                       PLUGINS_ENV: plugins})  # names hold commas
    # The server dies with this process (die_with_parent) only if the main thread starts it: it would
    # die with any other thread, which may end first. A server started otherwise (by another thread,
    # or by a cell on a dask worker) stops as multiprocessing stops it, once no process holds its pipe.
    if threading.current_thread() is threading.main_thread():
        os.environ[PARENT_ENV] = str(os.getpid())
    else:
        os.environ.pop(PARENT_ENV, None)
    try:
        if wait:
            probe = ctx.Process(target=os.getpid, name="dpgym-forkserver-probe")
            probe.start()  # returns once the server has finished its preload and forked the probe
            probe.join()
        else:
            forkserver.ensure_running()  # spawns the server, which preloads on its own
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class _Tree:
    """The child and its descendants (e.g. a joblib pool a plugin starts), for RSS and killing."""

    def __init__(self, pid: int):
        self.pid = pid
        try:
            self.root: psutil.Process | None = psutil.Process(pid)
        except psutil.NoSuchProcess:  # it already exited and the forkserver, its parent, reaped it
            self.root = None
        self.members = [self.root] if self.root is not None else []
        self.listed = time.monotonic()

    def processes(self, fresh: bool = False) -> list[psutil.Process]:
        """Once the child has exited its orphans are no longer its children: the last listing stays."""
        if self.root is None:
            return self.members
        if fresh or time.monotonic() - self.listed > DESCENDANTS_EVERY:
            try:
                if self.root.status() != psutil.STATUS_ZOMBIE:
                    self.members = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                pass
            self.listed = time.monotonic()
        return self.members

    def kill(self) -> None:
        """The child, its descendants and its process group. Descendants are stopped as they are
        found, until a listing finds no new one, so none can fork a helper the kill would miss."""
        stopped: dict[int, psutil.Process] = {}
        for _ in range(KILL_ROUNDS):
            found = [p for p in self.processes(fresh=True) if p.pid not in stopped]
            if not found:
                break
            for p in found:
                try:
                    p.suspend()
                except psutil.Error:
                    pass
                stopped[p.pid] = p
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass  # the group is gone, or not made yet: the child sets it up as it starts
        for p in stopped.values():
            try:
                p.kill()
            except psutil.Error:
                continue


def _rss(processes: list[psutil.Process]) -> int:
    total = 0
    for p in processes:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


def _crash_reason(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"crashed (signal {name})"
    return f"crashed (exit code {exitcode})"


def _threads_on_dask_worker() -> int:
    """On a cluster we did not start, share this machine's cores among the worker's task slots."""
    from distributed import get_worker

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // get_worker().state.nthreads)


def run_isolated(task: CellTask, cancel: threading.Event | None = None,
                 on_stage: Callable[[str], None] | None = None) -> Outcome:
    """Run `task` in a fresh child process and supervise it; never raises for the cell's fault.
    `on_stage` hears the label of each stage the cell starts (`dpgym.engine.cell.STAGE_LISTENER`)."""
    if multiprocessing.current_process().daemon:
        return Outcome(failure={"reason": "worker error", "type": "DaemonicWorker", "message": (
            "worker error: this worker is a daemonic process and may not start the cell's process; start dask "
            "workers with DASK_DISTRIBUTED__WORKER__DAEMON=False (or --no-nanny)")})
    if task.threads is None:
        task = replace(task, threads=_threads_on_dask_worker())
    scratch = _scratch_folder()
    try:
        return _supervise(task, cancel, scratch, on_stage)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # the cell's processes are gone: nothing writes there now


def _scratch_folder() -> str:
    """A new cell's temporary folder, named after its supervisor: host, pid and start time. A supervisor
    killed before its child armed the orphan watch leaves its folder behind, which the next cell or run
    started on this host removes (`sweep_temp`). The host is a short hash, since a socket a cell opens
    under its folder may have a path of at most 107 bytes."""
    sweep_temp()
    return tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{_owner()}-")


def sweep_temp() -> None:
    """Remove what killed processes of this host left in the temporary folder: the cells' folders whose
    supervisor is gone, and the multiprocessing folders (pymp-*) whose owners, as their tags name them
    (`_tag_temp_dir`), are all gone. An untagged folder (another program's) is never touched, nor one
    of another host sharing the temporary folder (its pids mean nothing here), nor a live process's."""
    temp, host = Path(tempfile.gettempdir()), f"{_host()}-"
    for folder in temp.glob(f"{SCRATCH_PREFIX}{host}*"):
        if _gone(folder.name[len(SCRATCH_PREFIX + host):]):
            shutil.rmtree(folder, ignore_errors=True)
    for folder in temp.glob("pymp-*"):
        tags = [tag.name[len(OWNER_PREFIX):] for tag in folder.glob(f"{OWNER_PREFIX}*")]
        if tags and all(tag.startswith(host) and _gone(tag[len(host):]) for tag in tags):
            shutil.rmtree(folder, ignore_errors=True)


def _host() -> str:
    return f"{zlib.crc32(socket.gethostname().encode()):08x}"


def _owner() -> str:
    """This process, as the folders it owns name it: host, pid and start time."""
    me = psutil.Process()
    return f"{_host()}-{me.pid}-{_started(me)}"


def _gone(owner: str) -> bool:
    """Whether `owner`, "pid-start" (and a random part of mkdtemp's, without "-"), names a process no
    longer running; a name in another form is never judged gone."""
    fields = owner.split("-")
    return 2 <= len(fields) <= 3 and all(f.isdigit() for f in fields[:2]) and not _running(*map(int, fields[:2]))


def _started(process: psutil.Process) -> int:
    """Start time in clock ticks (10 ms), which tells a process from a later one given the same pid."""
    return round(process.create_time() * 100)


def _running(pid: int, started: int) -> bool:
    """A zombie is not running: a killed driver stays one until its parent waits for it, which a shell
    script busy with something else, or a parent that never waits, may not do for a long time."""
    try:
        process = psutil.Process(pid)
        return _started(process) == started and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _supervise(task: CellTask, cancel: threading.Event | None, scratch: str,
               on_stage: Callable[[str], None] | None) -> Outcome:
    ctx = _context()
    receive, send = ctx.Pipe(duplex=False)
    me = psutil.Process()
    child = ctx.Process(target=_child_main, args=(send, task, (me.pid, _started(me)), scratch),
                        name=f"dpgym-cell-{task.cell.key}", daemon=False)
    child.start()
    send.close()  # EOF on the pipe only once the child and every helper it forked (they inherit it) are gone
    started = time.monotonic()
    tree = _Tree(child.pid)
    outcome = Outcome()
    peak = 0
    message = None
    while message is None and outcome.failure is None:
        ready = multiprocessing.connection.wait([receive, child.sentinel], POLL_SECONDS)
        if receive in ready:
            try:
                message = receive.recv()
            except (EOFError, OSError):
                break  # died without a word: see its exit code below
            if message[0] == "stage":  # a progress note, not the result
                if on_stage is not None:
                    on_stage(message[1])
                message = None
            continue
        if ready:
            break  # the child exited without a word, while a helper it forked still holds the pipe open
        peak = max(peak, _rss(tree.processes()))
        elapsed = time.monotonic() - started
        if task.max_memory is not None and peak > task.max_memory:
            tree.kill()
            outcome.failure = {"reason": "memory", "type": "MemoryLimit", "message":
                               f"memory: resident set reached {peak / 2**20:.0f} MiB, over the limit of "
                               f"{task.max_memory / 2**20:.0f} MiB; killed"}
        elif task.timeout is not None and elapsed > task.timeout:
            tree.kill()
            outcome.failure = {"reason": "timeout", "type": "Timeout",
                               "message": f"timeout: still running after {task.timeout:g} s of wall clock; killed"}
        elif cancel is not None and cancel.is_set():
            tree.kill()
            outcome.failure = {"reason": "cancelled", "type": "Cancelled", "message": "cancelled: the run was stopped"}
    child.join(timeout=EXIT_GRACE_SECONDS)
    stuck = child.is_alive()  # reported its result but does not exit (e.g. a stuck non-daemon thread)
    tree.kill()  # a stuck child, and whatever helpers (a pool, a subprocess) the cell left: none outlives it
    child.join()
    receive.close()
    outcome.wall_seconds = time.monotonic() - started
    outcome.peak_rss_mb = peak / 2**20
    if message is not None and message[0] == "ok":
        outcome.result, outcome.synthetic, outcome.execution = message[1]
        if stuck:
            outcome.notes.append(f"the cell's process had not exited {EXIT_GRACE_SECONDS:g} s after reporting its "
                                 "result (a non-daemon thread still running?); the harness killed it")
        elif child.exitcode != 0:
            outcome.notes.append(f"the cell's process {_crash_reason(child.exitcode)} after reporting its result")
    elif message is not None:
        outcome.failure = {"reason": "worker error", **message[1],
                           "message": f"worker error: {message[1]['type']}: {message[1]['message']}"}
    elif outcome.failure is None:
        reason = _crash_reason(child.exitcode)
        outcome.failure = {"reason": reason, "type": "Crashed", "message": f"{reason} before reporting a result"}
    return outcome
