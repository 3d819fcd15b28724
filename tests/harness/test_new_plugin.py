"""`dpgym new-plugin`: the scaffolded package installs, is listed, passes conformance and is ranked."""

from __future__ import annotations

import importlib

import pytest

from dpgym.cli import main
from dpgym.commands import metric_directions
from dpgym.registry import Registry
from tests.harness.report.fakerun import write_leaderboard
from dpgym.results.store import RunStore
from dpgym.engine.runner import run_suite
from dpgym.engine.suite import MethodConfig, Settings, Suite
from dpgym.scaffold import new_plugin
from dpgym.testing import CHECKS, check_device_flag, conformance_checks
from tests.pip_target import conformance, install, metadata_only


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory):
    """The scaffolded package, pip-installed into a throwaway folder that is also on this process's path."""
    package = tmp_path_factory.mktemp("work") / "my-package"
    assert main(["new-plugin", "marginal_demo", "--dir", str(package)]) == 0
    site = tmp_path_factory.mktemp("site")
    env = install(package, site)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(site))
        yield package, env


@pytest.mark.slow
def test_the_package_has_its_entry_point_generator_test_and_readme(scaffolded):
    package, _ = scaffolded
    assert '[project.entry-points.dpgym]\nmarginal_demo = "dpgym_marginal_demo"' in (package / "pyproject.toml").read_text()
    assert 'name = "dpgym-marginal-demo"' in (package / "pyproject.toml").read_text()
    assert "class MarginalDemoGenerator:" in (package / "src" / "dpgym_marginal_demo" / "generator.py").read_text()
    assert "## What to replace" in (package / "README.md").read_text()
    assert not list(package.rglob("*.tmpl")) and not list(package.rglob("*{{*"))


def test_the_installed_plugin_is_listed_with_its_package(scaffolded, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "marginal_demo" in out and "dpgym-marginal-demo 0.1.0" in out


@pytest.mark.slow
def test_its_own_test_file_passes_the_conformance_suite(scaffolded):
    package, env = scaffolded
    out = conformance(env, package, str(package / "tests"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{len(CHECKS) - 4} passed, 4 skipped" in out.stdout  # it reads rows; no device, log_prob or release


@pytest.mark.slow
def test_it_is_ranked_in_a_run(scaffolded, tmp_path):
    registry = Registry.discover()
    suite = Suite("new-plugin", (MethodConfig("marginal_demo"), MethodConfig("uniform")), ("adult",), (1.0,),
                  (0, 1), 1e-5, metrics=("fidelity",))
    summary = run_suite(suite, RunStore(tmp_path), registry, show_progress=False, settings=Settings(executor="serial"))
    assert summary.ok == 4, summary.messages
    board, _ = write_leaderboard(tmp_path, metric_directions(registry))
    rows = {r["generator"]: {k: str(v) for k, v in r.items()} for r in board.to_dict("records")}
    assert rows["marginal_demo"]["failures"] == "0" and rows["marginal_demo"]["guarantee"] == "pure"
    assert float(rows["marginal_demo"]["marginal_tvd_mean"]) < float(rows["uniform"]["marginal_tvd_mean"])
    assert rows["marginal_demo"]["marginal_tvd_rank"] == "1.0"


@pytest.mark.parametrize("name, problem", [
    ("My-Gen", "invalid plugin name 'My-Gen'"),
    ("class", "invalid plugin name 'class'"),
    ("gen_", "invalid plugin name 'gen_'"),  # dpgym-gen- is no valid distribution name
    ("my__first", "invalid plugin name 'my__first'"),  # dpgym-my--first is dpgym-my-first to pip
    ("independent", "the name 'independent' is taken by the generator 'independent' from dpgym 0.1.0"),
    ("census", "the name 'census' is taken by the dataset 'census' from dpgym 0.1.0"),
    ("fidelity", "the name 'fidelity' is taken by the metric 'fidelity' from dpgym 0.1.0"),
    ("dpsgd_lr", "the name 'dpsgd_lr' is taken by the learner 'dpsgd_lr' from dpgym 0.1.0"),
    ("mimic", "the name 'mimic' is taken by the plugin 'mimic' from dpgym 0.1.0"),  # an entry-point key only
])
def test_invalid_names_are_refused(name, problem, tmp_path, capsys):
    assert main(["new-plugin", name, "--dir", str(tmp_path / "out")]) == 2
    assert problem in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_name_whose_distribution_is_installed_is_refused(tmp_path, monkeypatch, capsys):
    metadata_only(tmp_path / "site", "dpgym-taken-dist", {})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert main(["new-plugin", "taken_dist", "--dir", str(tmp_path / "out")]) == 2
    assert "the distribution dpgym-taken-dist 0.1.0 is already installed" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["none", "true", "guarantee", "generator_spec", "ledger_entry", "column_kind",
                                  "generator"])
def test_names_of_python_constants_and_of_imported_classes_make_a_working_package(name, tmp_path, monkeypatch):
    package = new_plugin(name, tmp_path / "package", taken={})
    monkeypatch.syspath_prepend(str(package / "src"))
    spec = Registry.discover(extra={name: importlib.import_module(f"dpgym_{name}")}).generator(name)
    for check in conformance_checks(spec):
        if check.check is not check_device_flag:  # skipped: the scaffold's generator has no device flag
            check()


def test_a_non_empty_target_is_refused_and_left_alone(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    assert main(["new-plugin", "fresh_name", "--dir", str(tmp_path)]) == 2
    assert "exists and is not an empty folder" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
