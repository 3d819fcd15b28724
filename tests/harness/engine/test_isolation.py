"""Generators in their own environment: a throwaway stdlib-only venv runs a real DP generator
through the isolated runner; its ledger is re-accounted like any other, and failures inside the
environment fail the cell with a message naming the generator and the environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dpgym.registry import Registry
from dpgym.results.store import RunStore
from dpgym.engine.grid import expand
from dpgym.engine.isolation import Environment
from dpgym.engine.runner import run_suite
from dpgym.engine.suite import MethodConfig, Settings, Suite
from dpgym.testing import conformance_checks
from tests.harness.engine.isolated.plugin import PLUGINS, THROWAWAY, IsolatedPlugins

ISOLATED_MARGINALS = IsolatedPlugins().dpgym_generators()[0]


@pytest.fixture(scope="module")
def environment(tmp_path_factory):
    venv = tmp_path_factory.mktemp("env") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(THROWAWAY.env_var, str(venv / "bin" / "python"))
        patch.setenv("DPGYM_PLUGINS", PLUGINS)
        yield Registry.discover()


def run(registry, out, generator="isolated_marginals", params=None, epsilon=1.0, executor="serial"):
    suite = Suite("isolation", (MethodConfig(generator, params=params or {}),), ("adult",), (epsilon,), (0,),
                  1e-5, metrics=("fidelity",))
    summary = run_suite(suite, RunStore(out), registry, show_progress=False,
                        settings=Settings(executor=executor, workers=1))
    (cell,) = expand(suite, registry)
    store = RunStore(out)
    return summary, store.finished(cell.key), store.ledger_file(cell.key)


@pytest.mark.slow
def test_cell_runs_in_the_environment_and_its_ledger_is_reaccounted(environment, tmp_path):
    summary, result, ledger = run(environment, tmp_path)
    assert summary.ok == 1, result.error
    assert result.metrics["marginal_tvd"] < 0.1
    assert ledger["guarantee"] == "pure" and ledger["entries"][0]["event"]["type"] == "laplace"
    assert ledger["reaccounted"]["verdict"] == "ok"
    assert ledger["reaccounted"]["epsilon"] == pytest.approx(1.0)


@pytest.mark.parametrize("check", conformance_checks(ISOLATED_MARGINALS), ids=str)
def test_the_isolated_generator_passes_the_conformance_suite(environment, check):
    check()


def test_an_overspending_ledger_from_the_environment_is_refused(environment, tmp_path):
    summary, result, ledger = run(environment, tmp_path, params={"overspend": True})
    assert summary.failed == 1
    assert result.error.stage == "privacy" and "underclaimed" in result.error.message
    assert ledger["reaccounted"]["epsilon"] == pytest.approx(2.0)


def test_a_crash_in_the_environment_fails_the_cell_naming_generator_and_environment(environment, tmp_path):
    summary, result, _ = run(environment, tmp_path, params={"crash": True})
    assert summary.failed == 1 and result.error.stage == "fit"
    message = result.error.message
    assert "generator 'isolated_marginals' in environment 'stdlib-test'" in message
    assert "exited with code 1" in message and "RuntimeError: model diverged inside the environment" in message


def test_an_adapter_missing_from_the_environment_fails_the_cell(environment, tmp_path):
    _, result, _ = run(environment, tmp_path, generator="isolated_no_adapter")
    assert result.status == "failed" and "ModuleNotFoundError: No module named 'no_such_adapter'" in result.error.message


def test_a_missing_environment_says_how_to_create_it(environment, tmp_path, monkeypatch):
    monkeypatch.setenv(THROWAWAY.env_var, str(tmp_path / "nowhere" / "python"))
    _, result, _ = run(environment, tmp_path)
    assert result.error.type == "EnvironmentUnavailable"
    assert "create it with `python -m venv --without-pip .venv-isolation-test`" in result.error.message
    (check, *_) = conformance_checks(ISOLATED_MARGINALS)
    with pytest.raises(pytest.skip.Exception, match="unavailable here"):
        check()


def test_an_interpreter_that_cannot_run_fails_the_cell_naming_generator_and_environment(environment, tmp_path,
                                                                                      monkeypatch):
    python = tmp_path / "python"
    python.write_text("root:x:0:0:root:/root:/bin/sh\n")  # a file, as /etc/passwd is, but no program
    monkeypatch.setenv(THROWAWAY.env_var, str(python))
    _, result, _ = run(environment, tmp_path / "not-executable")
    assert result.error.type == "EnvironmentUnavailable"
    assert f"{python} is not executable" in result.error.message
    assert f"set {THROWAWAY.env_var} to its python" in result.error.message
    python.write_text("#!/nonexistent/interpreter\n")
    python.chmod(0o755)
    _, result, _ = run(environment, tmp_path / "missing-interpreter")
    message = result.error.message
    assert "generator 'isolated_marginals' in environment 'stdlib-test'" in message
    assert "fit could not start" in message


@pytest.mark.slow
def test_a_cell_killed_while_its_environment_runs_leaves_no_training_rows_on_disk(environment, tmp_path, monkeypatch):
    python, workdir = tmp_path / "python", tmp_path / "workdir"
    python.write_text(f"#!/bin/sh\npwd > {workdir}\nkill -KILL $PPID\nexec sleep 1000\n")  # the cell's process
    python.chmod(0o755)
    monkeypatch.setenv(THROWAWAY.env_var, str(python))
    _, result, _ = run(environment, tmp_path / "run", executor="processes")
    assert result.error.reason == "crashed (signal SIGKILL)"
    work = Path(workdir.read_text().strip())
    assert work.name.startswith("dpgym-isolated-") and not work.exists()


def test_a_half_built_environment_is_unavailable_until_its_setup_writes_the_ready_marker(tmp_path, monkeypatch):
    python, marker = tmp_path / "venv" / "bin" / "python", tmp_path / "venv" / ".ready"
    python.parent.mkdir(parents=True)
    python.touch(mode=0o755)  # the interpreter exists while the set-up is still installing packages
    building = Environment(name="slow", python=str(python), env_var="DPGYM_TEST_SLOW_PYTHON",
                           setup="bash setup-slow.sh", ready=str(marker))
    monkeypatch.delenv(building.env_var, raising=False)
    assert "is incomplete (its set-up has not finished" in building.availability()
    assert "run `bash setup-slow.sh`" in building.availability()
    marker.touch()
    assert building.availability() == ""
    marker.unlink()
    monkeypatch.setenv(building.env_var, str(python))  # a user's own interpreter is taken as it is
    assert building.availability() == ""
