"""Executors under faults: limits that fail only their own cell, a driver killed mid-run that
resumes to the same leaderboard, and dask agreeing with local processes."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import psutil
import pytest

from dpgym.registry import PluginError, Registry
from tests.harness.report.fakerun import write_leaderboard
from dpgym.results.store import RunStore
from dpgym.engine.activity import Activity
from dpgym.engine.executors import Plan, ProcessExecutor
from dpgym.engine.grid import expand
from dpgym.engine.runner import run_suite
from dpgym.engine.suite import MethodConfig, Settings, Suite, SuiteError, load_suite, settings_from_dict
from dpgym.engine.worker import _Tree
from tests.fake_plugins import EXECUTION, HELPERS_ENV, FaultyGenerators

ROOT = Path(__file__).resolve().parents[3]
TIMING = ("seconds", "rss")


@pytest.fixture(scope="module")
def registry() -> Registry:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DPGYM_PLUGINS", EXECUTION)
        return Registry.discover()


def grid(*generators: str, seeds=(0,), metrics=("probe",), **settings) -> Suite:
    return Suite("exec", tuple(MethodConfig(g) for g in generators), ("adult",), (1.0,), seeds, 1e-5,
                 metrics=metrics, settings=Settings(**settings))


def results_by_generator(out: Path) -> dict[str, dict]:
    return {r.cell.method: r for r in RunStore(out).results()}


def metric_columns(board: pd.DataFrame) -> pd.DataFrame:
    keep = [c for c in board.columns if not any(t in c for t in TIMING)]
    return board[keep].sort_values(["generator", "epsilon"]).reset_index(drop=True)


@pytest.mark.slow
def test_each_fault_fails_its_own_cell_with_its_reason_and_the_others_complete(registry, tmp_path):
    # The limit leaves the well-behaved cells room on a loaded machine: at 15 s, a cell of `uniform`
    # timed out beside other jobs on 2 cores.
    suite = grid("sleeper", "hog", "exiter", "segfaulter", "uniform", "independent",
                 executor="processes", workers=2, timeout=30, max_memory=2**30)
    summary = run_suite(suite, RunStore(tmp_path), registry, show_progress=False)
    assert (summary.ok, summary.failed) == (2, 4)
    results = results_by_generator(tmp_path)
    reasons = {g: r.error.reason for g, r in results.items() if r.status == "failed"}
    assert reasons == {"sleeper": "timeout", "hog": "memory", "exiter": "crashed (exit code 3)",
                       "segfaulter": "crashed (signal SIGSEGV)"}
    assert results["hog"].peak_rss_mb > 1024 and "memory" in results["hog"].error.message
    assert results["sleeper"].timings.total_seconds >= 30
    for ok in ("uniform", "independent"):
        assert results[ok].status == "ok" and results[ok].metrics["probe_age_mean"] > 0
        assert results[ok].peak_rss_mb > 0 and results[ok].execution["threads"] == 1


def test_a_cell_that_crashes_beside_a_forked_helper_is_reported_as_crashed_and_no_helper_outlives_its_cell(
        registry, tmp_path, monkeypatch):
    helpers = tmp_path / "helpers"
    monkeypatch.setenv(HELPERS_ENV, str(helpers))
    suite = grid("forker", "spawner", executor="processes", workers=2, timeout=20)
    run_suite(suite, RunStore(tmp_path / "run"), registry, show_progress=False)
    results = results_by_generator(tmp_path / "run")
    assert results["forker"].error.reason == "crashed (exit code 5)"  # not a timeout: the helper holds its pipe
    assert results["spawner"].status == "ok"
    pids = [int(pid) for pid in helpers.read_text().split()]
    assert len(pids) == 2 and _wait_gone(pids, 5) == []


@pytest.mark.slow
def test_a_timed_out_cell_takes_with_it_a_helper_that_left_its_process_group_and_lost_its_parent(
        registry, tmp_path, monkeypatch):
    helpers = tmp_path / "helpers"
    monkeypatch.setenv(HELPERS_ENV, str(helpers))
    run_suite(grid("daemonizer", executor="processes", workers=1, timeout=5), RunStore(tmp_path / "run"), registry,
              show_progress=False)
    assert results_by_generator(tmp_path / "run")["daemonizer"].error.reason == "timeout"
    (pid,) = [int(pid) for pid in helpers.read_text().split()]
    assert _wait_gone([pid], 5) == []


def test_a_cell_whose_process_does_not_exit_after_its_result_is_ok_and_noted_as_killed_by_the_harness(
        registry, tmp_path, monkeypatch):
    monkeypatch.setattr("dpgym.engine.worker.EXIT_GRACE_SECONDS", 1.0)
    run_suite(grid("lingerer", executor="processes", workers=1), RunStore(tmp_path), registry, show_progress=False)
    (result,) = RunStore(tmp_path).results()
    assert result.status == "ok"
    assert any("had not exited 1 s after reporting its result" in w and "the harness killed it" in w
               for w in result.warnings), result.warnings


def test_workers_get_their_share_of_cores_and_generators_that_declare_cuda_get_a_device(registry, tmp_path):
    run_suite(grid("probe", workers=2, device="auto"), RunStore(tmp_path), registry, show_progress=False)
    (result,) = RunStore(tmp_path).results()
    threads = max(1, len(os.sched_getaffinity(0)) // 2)
    expected_device = result.device  # cuda where a GPU is present, else cpu
    assert any(f"device={expected_device} omp={threads} torch_threads={threads} cell_threads={threads}" in w
               for w in result.warnings)


def test_asking_for_cuda_without_a_gpu_fails_the_cell_at_the_device_stage(registry, tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    run_suite(grid("probe", device="cuda"), RunStore(tmp_path), registry, show_progress=False)
    (result,) = RunStore(tmp_path).results()
    assert result.status == "failed" and result.error.stage == "device"


@pytest.mark.slow
def test_serial_executor_gives_the_same_cells_as_processes(registry, tmp_path):
    suite = grid("independent", seeds=(0, 1))
    run_suite(suite, RunStore(tmp_path / "serial"), registry, show_progress=False, settings=Settings(executor="serial"))
    run_suite(suite, RunStore(tmp_path / "proc"), registry, show_progress=False, settings=Settings(workers=2))
    for cell in expand(suite, registry):
        a = pd.read_parquet(tmp_path / "serial" / "cells" / cell.key / "synthetic.parquet")
        b = pd.read_parquet(tmp_path / "proc" / "cells" / cell.key / "synthetic.parquet")
        pd.testing.assert_frame_equal(a, b)


@pytest.mark.slow
def test_dask_local_cluster_gives_the_same_leaderboard_as_processes(registry, tmp_path):
    pytest.importorskip("distributed")
    suite = grid("independent", "uniform", "real", seeds=(0, 1))
    run_suite(suite, RunStore(tmp_path / "proc"), registry, show_progress=False,
              settings=Settings(executor="processes", workers=2))
    run_suite(suite, RunStore(tmp_path / "dask"), registry, show_progress=False,
              settings=Settings(executor="dask", workers=2))
    proc, _ = write_leaderboard(tmp_path / "proc", {})
    dask, _ = write_leaderboard(tmp_path / "dask", {})
    assert "probe_age_mean_mean" in proc.columns
    pd.testing.assert_frame_equal(metric_columns(proc), metric_columns(dask))
    executed = {r.execution["pid"] for r in RunStore(tmp_path / "dask").results()}
    assert os.getpid() not in executed
    history = json.loads((tmp_path / "dask" / "run.json").read_text())["history"]
    assert history[-1]["execution"]["executor"] == "dask"


def test_plugins_given_as_objects_reach_workers_when_they_can_be_recreated():
    stateless = Registry.discover(extra={"faulty": FaultyGenerators()})
    assert stateless.worker_plugins == "tests.fake_plugins:FaultyGenerators" and not stateless.direct
    holder = FaultyGenerators()
    holder.note = "state a worker could not re-create"
    registry = Registry.discover(extra={"faulty": holder})
    with pytest.raises(PluginError, match="cannot re-create"):
        ProcessExecutor(Plan.resolve(Settings()), registry, Activity())


def test_dpgym_plugins_loads_modules_and_instantiates_classes(registry):
    assert registry.get("generator", "sleeper").package == "DPGYM_PLUGINS (tests.fake_plugins:ExecutionFaults)"
    assert "probe" in registry.kinds["metric"]


def test_suite_settings_parse_and_cli_settings_take_precedence(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('datasets = ["adult"]\nepsilons = [1]\n[[generators]]\nname = "uniform"\n'
                    '[settings]\nexecutor = "dask"\nworkers = 3\ntimeout = "2h"\nmax_memory = "512MiB"\n')
    suite = load_suite(str(path))
    assert suite.settings == Settings(executor="dask", workers=3, timeout=7200.0, max_memory=512 * 2**20)
    plan = Plan.resolve(Settings(executor="processes", workers=1).over(suite.settings))
    assert (plan.executor, plan.workers, plan.timeout, plan.device) == ("processes", 1, 7200.0, "auto")
    path.write_text('datasets = ["adult"]\nepsilons = [1]\n[[generators]]\nname = "uniform"\n'
                    '[settings]\nmax_memory = 4096\n')
    with pytest.raises(SuiteError, match="needs a unit"):
        load_suite(str(path))
    assert settings_from_dict(suite.settings.to_dict(), "manifest") == suite.settings  # run.json reads back


@pytest.mark.slow
def test_the_harness_core_does_not_import_torch():
    code = "import sys, dpgym.cli, dpgym.engine.executors, dpgym.engine.runner; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), cwd=ROOT)
    assert out.stdout.strip() == "False", out.stderr


# --- the driver killed with SIGKILL ------------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "DPGYM_PLUGINS": EXECUTION, **extra}


def _suite_file(tmp_path: Path, *generators: str, seeds: int, **settings: object) -> Path:
    path = tmp_path / "suite.toml"
    lines = ['name = "kill"', 'datasets = ["adult"]', "epsilons = [1.0]", f"seeds = {seeds}", 'metrics = ["probe"]']
    lines += [f'[[generators]]\nname = "{g}"' for g in generators]
    lines += ["[settings]", *(f"{k} = {json.dumps(v)}" for k, v in settings.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def _default_sigint() -> None:
    """Run in the driver's process before it execs: SIGINT at its default, so that Python installs its
    KeyboardInterrupt handler there, as in a command typed at a terminal. An ignored SIGINT is
    inherited, and pytest run as a background job of a non-interactive shell has one: its drivers
    then ignored the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _driver(suite: Path, out: Path, **env: str) -> subprocess.Popen:
    # PYTHONFAULTHANDLER: on SIGABRT the driver prints every thread's stack (see _exit_status)
    return subprocess.Popen([sys.executable, "-m", "dpgym.cli", "run", "--suite", str(suite), "--out", str(out),
                             "--no-progress"], env=_env(PYTHONFAULTHANDLER="1", **env), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=_default_sigint)


def _exit_status(driver: subprocess.Popen, after: str) -> tuple[int, str]:
    """The driver's exit status and stderr once it exits. A driver still running 60 s on fails the test
    with its stderr, ending in the stack of each of its threads, so that a hang says where it is."""
    try:
        status = driver.wait(timeout=60)
    except subprocess.TimeoutExpired:
        driver.send_signal(signal.SIGABRT)
        try:
            _, stderr = driver.communicate(timeout=30)
        finally:
            driver.kill()
        pytest.fail(f"the driver did not exit within 60 s of {after}; its stderr:\n{stderr.decode()}")
    return status, driver.stderr.read().decode()


def _run_to_the_end(suite: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpgym.cli", "run", "--suite", str(suite), "--out", str(out),
                           "--no-progress"], env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=300)


def _finished(out: Path) -> int:
    return len(list((out / "cells").glob("[!.]*/result.json"))) if (out / "cells").exists() else 0


def _kill_after(driver: subprocess.Popen, out: Path, cells: int, rng: random.Random) -> list[int]:
    """SIGKILL the driver alone (not its group) a random moment after `cells` cells are stored;
    returns the pids it had started, which must then die by themselves."""
    deadline = time.monotonic() + 120
    while _finished(out) < cells:
        assert driver.poll() is None, driver.stderr.read().decode()
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.05)
    time.sleep(rng.uniform(0, 0.6))
    descendants = [p.pid for p in psutil.Process(driver.pid).children(recursive=True)]
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    return descendants


def _wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    return alive


def _started_helper(driver: subprocess.Popen, helpers: Path) -> int:
    """The pid of the helper a stuck_spawner cell starts, once it has: the cell is then running."""
    deadline = time.monotonic() + 60
    while not (helpers.exists() and helpers.read_text().endswith("\n")):
        assert driver.poll() is None, driver.stderr.read().decode()
        assert time.monotonic() < deadline, "no cell started its helper"
        time.sleep(0.1)
    return int(helpers.read_text())


@pytest.mark.slow
def test_driver_killed_twice_resumes_to_the_uninterrupted_leaderboard(registry, tmp_path):
    suite = _suite_file(tmp_path, "uniform", "independent", "real", seeds=3, workers=2)
    reference = tmp_path / "reference"
    run_suite(load_suite(str(suite)), RunStore(reference), registry, show_progress=False)
    out, rng = tmp_path / "killed", random.Random(11)
    orphans = _kill_after(_driver(suite, out), out, 2, rng)
    orphans += _kill_after(_driver(suite, out), out, 4, rng)
    assert _wait_gone(orphans, 10) == [], "workers of a killed driver outlived it"
    partial = _finished(out)
    assert 4 <= partial < 9
    resumed = _run_to_the_end(suite, out)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{9 - partial} ran ok, {partial} already done" in resumed.stdout
    cells = sorted(p.name for p in (out / "cells").iterdir())
    assert cells == sorted(p.name for p in (reference / "cells").iterdir())  # none lost, none extra, no leftovers
    assert len(json.loads((out / "run.json").read_text())["history"]) == 3
    expected, _ = write_leaderboard(reference, {})
    got, _ = write_leaderboard(out, {})
    assert got["n_seeds"].eq(3).all()
    pd.testing.assert_frame_equal(metric_columns(got), metric_columns(expected))


@pytest.fixture
def short_tmpdir():
    """A TMPDIR for processes that start a forkserver: its socket lives there, and a Unix socket path
    may hold 107 bytes, which pytest's tmp_path/…/pymp-…/listener-… can exceed."""
    folder = Path(tempfile.mkdtemp(prefix="dpgym-t"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_workers_of_a_killed_driver_exit_with_their_helpers_and_temporary_files_instead_of_running_on(
        tmp_path, short_tmpdir):
    suite = _suite_file(tmp_path, "stuck_spawner", seeds=1, workers=1)
    out, helpers, temp = tmp_path / "run", tmp_path / "helpers", short_tmpdir
    driver = _driver(suite, out, **{HELPERS_ENV: str(helpers), "TMPDIR": str(temp)})
    helper = _started_helper(driver, helpers)
    pids = [p.pid for p in psutil.Process(driver.pid).children(recursive=True)] + [helper]
    assert list(temp.glob("dpgym-cell-*"))  # the cell's temporary folder, which must go with it
    driver.send_signal(signal.SIGKILL)  # reaped only at the end: a zombie driver is as dead to its cells
    assert _wait_gone(pids, 10) == []
    assert list(temp.glob("dpgym-cell-*")) == []
    driver.wait()
    assert _finished(out) == 0  # nothing written for the cell that was running


@pytest.mark.slow
def test_a_new_cell_removes_the_temporary_folders_of_killed_supervisors_and_keeps_live_ones(tmp_path, monkeypatch):
    """A supervisor killed between creating its cell's folder and the child arming its orphan watch
    leaves the folder behind: the next cell on the host removes it."""
    from dpgym.engine.worker import _scratch_folder

    creator = ("import time; from dpgym.engine.worker import _scratch_folder; "
               "print(_scratch_folder(), flush=True); time.sleep(60)")
    supervisor = subprocess.Popen([sys.executable, "-c", creator], env={**_env(), "TMPDIR": str(tmp_path)}, cwd=ROOT,
                                  stdout=subprocess.PIPE, text=True)
    abandoned = Path(supervisor.stdout.readline().strip())
    supervisor.kill()
    supervisor.wait()
    supervisor.stdout.close()
    assert abandoned.is_dir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    unrelated = tmp_path / "dpgym-cell-not-ours"
    unrelated.mkdir()
    live = Path(_scratch_folder())
    assert abandoned.parent == tmp_path and not abandoned.exists()
    assert Path(_scratch_folder()).exists() and live.exists() and unrelated.exists()


# --- a dask cluster the run did not start --------------------------------------------------------


@dataclass(frozen=True)
class ExternalCluster:
    address: str
    client: Any  # distributed.Client, the test's own
    temp: Path  # the worker's TMPDIR, which holds its cells' scratch folders
    helpers: Path  # where the worker's stuck_spawner cells record their helpers' pids


@pytest.fixture
def external_cluster(tmp_path, short_tmpdir):
    """A scheduler and a one-slot worker in processes of their own, as `dask scheduler` and
    `dask worker` start them: they outlive any driver, and share no forkserver or environment with
    this test process."""
    distributed = pytest.importorskip("distributed")
    file, temp, helpers = tmp_path / "scheduler.json", short_tmpdir, tmp_path / "helpers"

    def start(role: str, *arguments: str, **env: str) -> subprocess.Popen:
        command = [sys.executable, "-m", f"distributed.cli.dask_{role}", "--scheduler-file", str(file),
                   "--host", "127.0.0.1", "--no-dashboard", *arguments]
        with open(tmp_path / f"{role}.log", "w") as log:
            return subprocess.Popen(command, env=_env(**env), cwd=ROOT, stdout=log, stderr=log, start_new_session=True)

    scheduler = start("scheduler", "--port", "0")
    # --no-nanny: a worker that is not daemonic may start the cells' processes (README)
    worker = start("worker", "--nthreads", "1", "--no-nanny", **{HELPERS_ENV: str(helpers), "TMPDIR": str(temp)})
    try:
        deadline = time.monotonic() + 60
        while not file.exists():  # written once the scheduler listens
            assert scheduler.poll() is None and time.monotonic() < deadline, (tmp_path / "scheduler.log").read_text()
            time.sleep(0.1)
        with distributed.Client(scheduler_file=str(file), timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
            yield ExternalCluster(client.scheduler.address, client, temp, helpers)
    finally:
        for process in (worker, scheduler):
            process.kill()
            process.wait()


def _dask_run(cluster: ExternalCluster, folder: Path, generator: str) -> tuple[Path, Path]:
    """A suite of one cell run on `cluster`, into folder/run."""
    folder.mkdir(exist_ok=True)
    return _suite_file(folder, generator, seeds=1, executor="dask", scheduler=cluster.address), folder / "run"


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "killed"])
def test_a_run_stopped_on_an_external_dask_cluster_stops_its_cells_there_and_a_later_run_gets_the_slot(
        external_cluster, tmp_path, stop):
    """The cluster outlives the driver: a stopped run's cell must not run on, holding its slot."""
    suite, out = _dask_run(external_cluster, tmp_path / "stopped", "stuck_spawner")
    driver = _driver(suite, out)
    helper = _started_helper(driver, external_cluster.helpers)
    cell = psutil.Process(helper).ppid()
    assert list(external_cluster.temp.glob("dpgym-cell-*"))
    driver.send_signal(stop)
    status, stderr = _exit_status(driver, stop.name)
    assert status == (130 if stop == signal.SIGINT else -signal.SIGKILL), stderr
    assert _wait_gone([cell, helper], 15) == [], "the stopped run's cell runs on on the worker"
    assert _finished(out) == 0  # nothing recorded for the stopped cell, not even as failed: a resume runs it
    suite, later = _dask_run(external_cluster, tmp_path / "later", "uniform")
    done = _run_to_the_end(suite, later)
    assert done.returncode == 0 and "1 cells: 1 ran ok" in done.stdout, done.stderr
    assert list(external_cluster.temp.glob("dpgym-cell-*")) == []  # the stopped cell's scratch folder too


@pytest.mark.slow
def test_a_dask_cell_cancelled_on_the_cluster_is_not_recorded_as_failed_and_the_run_stops_resumable(
        external_cluster, tmp_path):
    """Neither a lost scheduler nor a cancel on the cluster is the cell's fault: it is left to a resume."""
    from distributed import Future

    suite, out = _dask_run(external_cluster, tmp_path, "stuck_spawner")
    driver = _driver(suite, out)
    helper = _started_helper(driver, external_cluster.helpers)
    cell = psutil.Process(helper).ppid()
    client = external_cluster.client
    (key,) = [key for keys in client.processing().values() for key in keys]
    client.cancel([Future(key, client)], force=True)  # another client's cancel, for every client that wants it
    status, stderr = _exit_status(driver, "the cancel")
    assert status == 1 and "it is not recorded, and the same command resumes the run" in stderr, stderr
    assert _finished(out) == 0
    assert _wait_gone([cell, helper], 15) == []


@pytest.mark.slow
def test_a_stopped_dask_run_leaves_its_client_within_seconds_and_keeps_its_own_error(external_cluster, registry):
    """Ctrl-C must not wait on a client close that cannot complete: distributed's would wait 60 s, then
    raise a TimeoutError in place of the KeyboardInterrupt (exit 1, not 130). The connection, dropped
    when the driver exits, releases the run's tasks all the same."""
    from dpgym.engine.executors import STOPPED_CLOSE_SECONDS, DaskExecutor

    executor = DaskExecutor(Plan.resolve(Settings(executor="dask", scheduler=external_cluster.address)), registry,
                            Activity())
    with pytest.raises(KeyboardInterrupt):
        with executor:
            assert executor.client.loop is not external_cluster.client.loop  # only the run's client stalls
            executor.client.loop.add_callback(time.sleep, 30)  # its event loop stalls: no close completes
            start = time.monotonic()
            raise KeyboardInterrupt
    assert time.monotonic() - start < STOPPED_CLOSE_SECONDS + 5


def test_a_cell_process_gone_before_it_is_watched_is_an_empty_tree_not_an_error():
    """A cell that crashes at once may be reaped by the forkserver before the driver looks at it."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    tree = _Tree(gone.pid)
    assert tree.processes(fresh=True) == []
    tree.kill()  # nothing left to kill, and no error
