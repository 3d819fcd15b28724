"""A driver killed with SIGKILL runs no clean-up: nothing it started may outlive it, and what it leaves
in the temporary folder is removed by the next run, never what a live process (or another program)
still uses."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from dpgym.cli import build_parser
from dpgym.commands import suite_from_args
from dpgym.registry import Registry
from dpgym.results.store import RunStore
from dpgym.engine.runner import run_suite
from dpgym.engine.threads import cpu_count
from dpgym.engine.worker import OWNER_PREFIX, SCRATCH_PREFIX, _host, _owner, _started, sweep_temp
from tests.fake_plugins import EXECUTION

ROOT = Path(__file__).resolve().parents[3]
# The probe metric keeps the cells cheap; two generators give the report two figure workers.
GRID = ["--generators", "uniform,independent", "--datasets", "adult", "--epsilons", "1", "--seeds", "1",
        "--metrics", "probe", "--no-progress"]


@pytest.fixture
def temp() -> Path:
    """The runs' TMPDIR: short, since the forkserver's socket lives there and a Unix socket path may
    hold 107 bytes; and the test's own, so that what it finds there is the run's alone."""
    folder = Path(tempfile.mkdtemp(prefix="dpgym-t"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _session(sid: int) -> list[psutil.Process]:
    """The live processes of the session the driver leads: whatever it started, however far down."""
    found = []
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) == sid and process.pid != sid and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (OSError, psutil.Error):
            continue
    return found


def _drawing(driver: psutil.Process, out: Path) -> list[psutil.Process]:
    """The figure workers, once the leaderboard is written and the report is being drawn: children
    forked from the driver, so with its command line."""
    deadline = time.monotonic() + 120
    while True:
        assert driver.is_running() and driver.status() != psutil.STATUS_ZOMBIE, "the driver exited before its report"
        assert time.monotonic() < deadline, "the driver never drew its report"
        if (out / "leaderboard.csv").exists():
            try:
                forked = [c for c in driver.children() if c.cmdline() == driver.cmdline()]
            except psutil.Error:  # a child that exited meanwhile
                forked = []
            if len(forked) >= 2:
                return forked
        time.sleep(0.05)


@pytest.mark.slow
def test_a_driver_killed_while_it_draws_its_report_leaves_no_process_and_a_resume_removes_its_folders(
        temp, tmp_path, monkeypatch):
    if cpu_count() < 2:
        pytest.skip("on one core the report draws its figures in the driver, without workers")
    out = tmp_path / "run"
    env = {**os.environ, "TMPDIR": str(temp), "DPGYM_PLUGINS": EXECUTION,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    driver = subprocess.Popen([sys.executable, "-m", "dpgym.cli", "run", *GRID, "--out", str(out)], env=env, cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        process = psutil.Process(driver.pid)
        workers = _drawing(process, out)
        started = _started(process)
        helpers = {p.pid: " ".join(p.cmdline()) for p in _session(driver.pid)}
        servers = [c for c in helpers.values() if "multiprocessing.forkserver" in c or "resource_tracker" in c]
        assert {w.pid for w in workers} <= helpers.keys() and len(servers) == 2, helpers
        driver.send_signal(signal.SIGKILL)  # not reaped until the end: a zombie driver must not keep anything alive
        killed = time.monotonic()
        while _session(driver.pid) and time.monotonic() - killed < 10:
            time.sleep(0.1)
        alive = {p.pid: helpers.get(p.pid, "?") for p in _session(driver.pid)}
        assert alive == {}, f"processes of the killed run still alive 10 s later (of {len(helpers)}): {alive}"
    finally:
        for p in _session(driver.pid):
            p.kill()
        driver.wait()

    # What the killed driver left: its multiprocessing folder (the forkserver's socket), and say a cell's
    # folder it had made when it was killed. A live process's folders and another program's stay.
    [left] = temp.glob("pymp-*")
    scratch = temp / f"{SCRATCH_PREFIX}{_host()}-{driver.pid}-{started}-x"
    live, foreign = temp / "pymp-live", temp / "pymp-foreign"
    for folder in (scratch, live, foreign):
        folder.mkdir()
    (live / f"{OWNER_PREFIX}{_owner()}").touch()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setenv("DPGYM_PLUGINS", EXECUTION)
    summary = run_suite(suite_from_args(build_parser().parse_args(["run", *GRID, "--out", str(out)])), RunStore(out),
                        Registry.discover(), show_progress=False)
    assert (summary.total, summary.skipped) == (2, 2)
    assert not left.exists() and not scratch.exists() and live.exists() and foreign.exists()


def test_the_sweep_removes_folders_of_gone_or_zombie_owners_of_this_host_only(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    exited = subprocess.Popen(["true"])
    zombie = subprocess.Popen(["true"])  # exits at once, but is not waited for until the end
    gone = {p: f"{_host()}-{p.pid}-{_started(psutil.Process(p.pid))}" for p in (exited, zombie)}
    exited.wait()
    while psutil.Process(zombie.pid).status() != psutil.STATUS_ZOMBIE:
        time.sleep(0.01)
    me = _owner()
    owners = {"pymp-exited": [gone[exited]], "pymp-zombie": [gone[zombie]], "pymp-live": [me],
              "pymp-shared": [gone[exited], me],  # a forked child of a live process tagged the folder too
              "pymp-elsewhere": [f"{int(_host(), 16) ^ 1:08x}-{exited.pid}-1"],  # another host's pids
              "pymp-untagged": []}
    for folder, tags in owners.items():
        (tmp_path / folder).mkdir()
        for tag in tags:
            (tmp_path / folder / f"{OWNER_PREFIX}{tag}").touch()
    (tmp_path / f"{SCRATCH_PREFIX}{gone[zombie]}-abc").mkdir()
    (tmp_path / f"{SCRATCH_PREFIX}{me}-abc").mkdir()
    sweep_temp()
    zombie.wait()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["pymp-live", "pymp-shared", "pymp-elsewhere", "pymp-untagged", f"{SCRATCH_PREFIX}{me}-abc"])
