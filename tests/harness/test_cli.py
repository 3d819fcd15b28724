"""The `dpgym` command as a user meets it: one clear line per user error, exit codes, listing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dpgym.cli import main


def dpgym(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "250"}  # rich tables wrap at 80 columns without a terminal
    return subprocess.run([sys.executable, "-m", "dpgym.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env=env)


@pytest.mark.slow
def test_list_shows_plugins_with_their_package():
    out = dpgym("list")
    assert out.returncode == 0
    for name in ("uniform", "independent", "real", "adult", "dpgym 0.1.0", "formal", "CC BY 4.0"):
        assert name in out.stdout


@pytest.mark.slow
def test_list_piped_at_the_default_width_shows_every_default_in_full():
    out = subprocess.run([sys.executable, "-m", "dpgym.cli", "list"], capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if k != "COLUMNS"})
    assert out.returncode == 0 and "…" not in out.stdout
    assert "encoder_mode=joint" in out.stdout  # dp_autogan's, cut to "encoder_mode=join…" at 80 columns
    # a generator's own one-line description, which says what it does not model
    assert "models the numeric columns only, draws categorical ones uniformly from their public categories" in out.stdout


def test_list_marks_datasets_without_their_files_unavailable(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DPGYM_DATA", str(tmp_path))
    monkeypatch.delenv("DPGYM_MIMIC3", raising=False)
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["list"]) == 0
    rows = {line.split("│")[1].strip(): line.split("│")[3].strip() for line in capsys.readouterr().out.splitlines()
            if line.count("│") == 8}  # the datasets table's rows: name, version, available, ...
    assert {name: rows[name] for name in ("adult", "census", "intrusion", "lifesci", "mimic3", "half_moons")} == {
        "adult": "no (see below)", "census": "no (see below)", "intrusion": "no (see below)",
        "lifesci": "no (see below)", "mimic3": "no (see below)", "half_moons": "yes"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--generators", "unifrom", "--datasets", "adult", "--epsilons", "1"], "unknown generator 'unifrom'; did you mean uniform"),
        (["run", "--generators", "uniform", "--datasets", "adullt", "--epsilons", "1"], "unknown dataset 'adullt'"),
        (["run", "--suite", "no-such-suite"], "no suite file 'no-such-suite'"),
        (["run", "--generators", "uniform", "--datasets", "adult", "--epsilons", "x"], "'x' is not an epsilon"),
        (["run", "--generators", "independent", "--datasets", "adult", "--epsilons", "1", "--set", "independent.bins=3"],
         "unknown hyper-parameters ['bins']"),
        (["run", "--datasets", "adult"], "give --suite, or an ad-hoc grid with --generators (or --learners), --epsilons"),
        (["leaderboard", "/nonexistent/run"], "not a dpgym run directory"),
        (["run", "--suite", "smoke", "--datasets", ""], "--datasets '' names no dataset"),
        (["run", "--suite", "smoke", "--epsilons", ""], "--epsilons '' names no epsilon"),
        (["run", "--suite", "smoke", "--metrics", ","], "--metrics ',' names no metric"),
        (["run", "--generators", "uniform", "--datasets", "adult", "--epsilons", "1", "--metrics", ""],
         "--metrics '' names no metric"),
    ],
)
def test_user_errors_are_one_line_without_traceback(args, message, tmp_path):
    if "--out" not in args and args[0] == "run":
        args = [*args, "--out", str(tmp_path / "run")]
    out = dpgym(*args)
    assert out.returncode in (1, 2)
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpgym: error:") and message in lines[0]


@pytest.mark.slow
def test_a_dry_run_counts_the_cells_to_run_and_writes_nothing(tmp_path):
    grid = ["--generators", "uniform", "--datasets", "adult", "--seeds", "1", "--metrics", "fidelity", "--no-progress"]
    assert dpgym("run", *grid, "--epsilons", "1", "--out", str(tmp_path)).returncode == 0
    before = sorted(p.name for p in (tmp_path / "cells").iterdir())
    out = dpgym("run", *grid, "--epsilons", "1,inf", "--out", str(tmp_path), "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "2 cells: 1 to run, 1 done, 0 done but failed or unavailable; nothing was run" in out.stdout
    assert sorted(p.name for p in (tmp_path / "cells").iterdir()) == before
    assert not (tmp_path / "elsewhere").exists()
    assert dpgym("run", *grid, "--epsilons", "1", "--out", str(tmp_path / "elsewhere"), "--dry-run").returncode == 0
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.slow
def test_resuming_a_finished_run_rebuilds_nothing_until_a_cell_changes(tmp_path):
    grid = ["--generators", "uniform", "--datasets", "adult", "--epsilons", "1", "--seeds", "1", "--metrics",
            "fidelity", "--no-progress", "--out", str(tmp_path)]
    assert dpgym("run", *grid).returncode == 0
    report = tmp_path / "report.html"
    built = report.stat().st_mtime_ns
    again = dpgym("run", *grid)
    assert again.returncode == 0 and "nothing new since the last run" in again.stdout
    assert report.stat().st_mtime_ns == built
    [result] = (tmp_path / "cells").glob("*/result.json")
    result.touch()  # as a re-run cell would rewrite it
    third = dpgym("run", *grid)
    assert "nothing new" not in third.stdout and report.stat().st_mtime_ns > built


@pytest.mark.slow
def test_adhoc_run_with_override_completes_and_writes_a_leaderboard(tmp_path):
    out = dpgym("run", "--generators", "independent,uniform", "--datasets", "adult", "--epsilons", "0.5,inf",
                "--seeds", "1", "--metrics", "fidelity", "--set", "independent.mechanism=\"laplace\"", "--out", str(tmp_path),
                "--no-progress")
    assert out.returncode == 0, out.stderr
    assert "4 cells: 4 ran ok" in out.stdout
    board = (tmp_path / "leaderboard.csv").read_text().splitlines()
    assert board[0].startswith("generator,dataset,epsilon,delta,eps_spent,under_spent,n_seeds,failures,fit_seconds_mean")
    assert len(board) == 5


def test_help_and_a_bad_option_load_no_data_or_model_package():
    """`dpgym --help` and an option typo answer before pandas, scipy, sklearn or torch load."""
    probe = ("import sys\nfrom dpgym.cli import main\n"
             "for argv in (['--help'], ['run', '--no-such-option']):\n"
             "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
             "print(sorted(m for m in ('pandas', 'scipy', 'sklearn', 'torch') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "[]"


MODEL_PACKAGES = ("torch", "opacus", "jax", "mbi", "sklearn", "scipy", "xgboost", "matplotlib", "prv_accountant")


def test_list_a_name_error_and_a_dry_run_import_no_model_code(tmp_path):
    """Plugin discovery imports each installed plugin's entry module only: its spec names its code with
    `Deferred`, so listing, a typo in a generator's name and a dry run leave torch, JAX, scikit-learn
    and scipy unloaded (the first-party plugins and the runner both keep to this)."""
    probe = ("import contextlib, io, sys\nfrom dpgym.cli import main\n"
             f"for argv in (['list'], ['run', '--generators', 'dp_hflw', '--datasets', 'adult', '--out', {str(tmp_path / 'a')!r}],\n"
             f"             ['run', '--generators', 'dp_hflow,independent', '--datasets', 'adult', '--epsilons', '1', '--dry-run', '--out', {str(tmp_path / 'b')!r}]):\n"
             "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
             "        print(main(argv), file=sys.__stdout__)\n"
             f"print(sorted(m for m in {MODEL_PACKAGES!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "250"})
    assert done.stdout.strip().splitlines() == ["0", "2", "0", "[]"], done.stdout + done.stderr


def test_every_installed_entry_module_is_light():
    """Each first-party plugin module, imported alone, loads none of the model packages: a new plugin
    that imports torch or JAX at the top of its entry module fails here, not in a user's `dpgym list`."""
    from importlib.metadata import entry_points

    modules = sorted(ep.value.split(":")[0] for ep in entry_points(group="dpgym") if ep.dist and ep.dist.name == "dpgym")
    probe = ("import importlib, sys\n"
             f"for module in {modules!r}:\n"
             "    before = set(sys.modules)\n"
             "    importlib.import_module(module)\n"
             f"    heavy = sorted(m for m in set(sys.modules) - before if m.split('.')[0] in {MODEL_PACKAGES!r})\n"
             "    if heavy:\n"
             "        print(module, sorted({m.split('.')[0] for m in heavy}))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "", f"entry modules importing model packages:\n{done.stdout}"
