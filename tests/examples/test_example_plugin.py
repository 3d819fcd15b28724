"""The example third-party package: installed by pip, found by entry point, ranked in a run."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from dpgym.testing import CHECKS
from tests.pip_target import conformance, dpgym, install

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dpgym-example-plugin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, str]:
    return install(EXAMPLE, tmp_path_factory.mktemp("site"))


@pytest.mark.slow
def test_installed_plugins_are_listed_with_their_package(installed):
    out = dpgym(installed, "list")
    assert out.returncode == 0, out.stderr
    for name in ("dp_gaussian_copula", "example_blobs", "category_coverage", "dpgym-example-plugin 0.1.0"):
        assert name in out.stdout


@pytest.mark.slow
def test_example_generator_is_ranked_in_a_run(installed, tmp_path):
    out = dpgym(installed, "run", "--generators", "dp_gaussian_copula,uniform", "--datasets", "example_blobs",
                "--epsilons", "1", "--seeds", "2", "--metrics", "category_coverage,fidelity", "--out", str(tmp_path),
                "--no-progress")
    assert out.returncode == 0, out.stderr
    rows = {r["generator"]: r for r in csv.DictReader((tmp_path / "leaderboard.csv").open())}
    assert rows["dp_gaussian_copula"]["n_seeds"] == "2" and rows["dp_gaussian_copula"]["failures"] == "0"
    assert float(rows["dp_gaussian_copula"]["kendall_rmse_mean"]) < float(rows["uniform"]["kendall_rmse_mean"])
    assert rows["dp_gaussian_copula"]["kendall_rmse_rank"] == "1.0"


@pytest.mark.slow
def test_example_generator_passes_the_conformance_suite(installed, tmp_path):
    out = conformance(installed, tmp_path, "--dpgym-conformance=dp_gaussian_copula", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{len(CHECKS) - 4} passed, 4 skipped" in out.stdout  # it reads rows; no device, log_prob or release
