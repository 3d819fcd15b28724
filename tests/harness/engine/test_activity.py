"""Progress that informs: the stages each running cell reports, the estimate of the time left, and
one line per finished cell when no terminal shows the live display."""

from __future__ import annotations

import pytest

from dpgym.registry import Registry
from dpgym.results.store import RunStore
from dpgym.engine.activity import Activity
from dpgym.engine.executors import Plan, ProcessExecutor, SerialExecutor
from dpgym.engine.grid import expand
from dpgym.engine.runner import duration, run_suite
from dpgym.engine.suite import MethodConfig, Settings, Suite
from tests.fake_plugins import EXECUTION


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_running_cell_shows_its_stage_and_how_long_it_has_been_in_it():
    clock = Clock()
    activity = Activity(clock)
    activity.start("k", "gen × adult × ε=1 × seed 0", "gen")
    clock.now = 5
    activity.stage("k", "fit")
    clock.now = 65
    activity.stage("k", "fit")  # the same stage again keeps its start
    [running] = activity.running()
    assert (running.stage, running.stage_seconds, running.cell_seconds) == ("fit", 60, 65)
    activity.finish("k")
    assert activity.running() == []


def test_time_left_uses_each_methods_measured_cells_and_moves_with_the_running_clock():
    clock = Clock()
    activity = Activity(clock)
    assert activity.seconds_left(["slow"], workers=1) is None  # nothing measured yet
    activity.measured("slow", 100)
    activity.measured("slow", 300)
    activity.measured("fast", 10)
    assert activity.expected("slow") == 200 and activity.expected("new") == pytest.approx(410 / 3)
    activity.start("a", "a", "slow")
    assert activity.seconds_left(["fast", "slow"], workers=2) == pytest.approx((10 + 200 + 200) / 2)
    clock.now = 150
    assert activity.seconds_left(["fast", "slow"], workers=2) == pytest.approx((10 + 200 + 50) / 2)
    clock.now = 500  # past its expected duration: counted as about to end, never negative
    assert activity.seconds_left([], workers=2) == 0


@pytest.fixture(scope="module")
def registry() -> Registry:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DPGYM_PLUGINS", EXECUTION)
        return Registry.discover()


def cells(registry: Registry) -> list:
    suite = Suite("stages", (MethodConfig("independent"),), ("adult",), (1.0,), (0,), 1e-5, metrics=("probe",))
    return expand(suite, registry)


class Recorder(Activity):
    def __init__(self) -> None:
        super().__init__()
        self.heard: list[str] = []

    def stage(self, key: str, label: str) -> None:
        self.heard.append(label)
        super().stage(key, label)


@pytest.mark.parametrize("executor", [SerialExecutor, ProcessExecutor])
def test_an_executor_reports_every_stage_of_its_cells_in_order(registry, executor):
    recorder = Recorder()
    with executor(Plan.resolve(Settings(workers=1)), registry, recorder) as running:
        [(_, outcome)] = list(running.run(cells(registry)))
    assert outcome.result.status == "ok"
    heard = list(dict.fromkeys(recorder.heard))
    assert heard == ["load", "build", "fit", "privacy", "sample", "validate", "evaluate: probe"]
    assert recorder.running() == []


def test_without_a_terminal_each_finished_cell_prints_one_line(registry, tmp_path, capsys):
    suite = Suite("lines", (MethodConfig("uniform"), MethodConfig("independent")), ("adult",), (1.0,), (0,), 1e-5,
                  metrics=("probe",), settings=Settings(executor="serial"))
    run_suite(suite, RunStore(tmp_path), registry, show_progress=True)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert len(lines) == 2 and all(" ok: " in line and "× adult × ε=1 × seed 0 in " in line for line in lines)
    assert {line.split(": ")[1].split(" ×")[0] for line in lines} == {"uniform", "independent"}
    assert "(fit " in lines[0] and "evaluate " in lines[0]


def test_durations_read_like_a_clock():
    assert [duration(s) for s in (7.4, 65, 3723)] == ["7s", "1:05", "1:02:03"]
