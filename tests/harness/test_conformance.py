"""The conformance suite: first-party generators, learners, datasets and metrics pass it, and it
catches the faults it is for."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dpgym.testing import CHECKS, conformance_checks, iter_first_party
from tests.fake_plugins import FaultyGenerators

# via_synthetic needs a generator named after a colon: it is checked as via_synthetic:independent.
FIRST_PARTY = [(kind, check) for kind in ("generator", "learner", "dataset", "metric")
               for spec in iter_first_party(kind) if spec.name != "via_synthetic" for check in conformance_checks(spec)]
FIRST_PARTY += [("learner", check) for check in conformance_checks("via_synthetic:independent")]
FAULTY = {spec.name: spec for spec in FaultyGenerators().dpgym_generators()}


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "check"), FIRST_PARTY, ids=str)
def test_first_party_plugins_conform(kind, check):
    check()


def run_check(generator: str, name: str) -> None:
    (check,) = [c for c in conformance_checks(FAULTY[generator]) if c.check.__name__ == f"check_{name}"]
    check()


def test_catches_a_generator_that_ignores_its_seed():
    with pytest.raises(AssertionError, match="ignores its seed"):
        run_check("seed_ignorer", "seed_changes_samples")


def test_catches_an_unknown_category():
    with pytest.raises(ValueError, match="unknown categories.*'Astronaut'"):
        run_check("unknown_category", "samples_match_schema")


def test_catches_a_ledger_that_publishes_a_statistic_of_the_rows():
    with pytest.raises(AssertionError, match="the ledger changes with which training row changes"):
        run_check("loss_reporter", "ledger_does_not_depend_on_the_rows")


def test_catches_a_ledger_that_publishes_a_count_only_a_removed_row_moves():
    """The replaced row keeps its membership; removing a member rather than a non-member moves the count."""
    with pytest.raises(AssertionError, match="the ledger changes with which training row is removed"):
        run_check("member_counter", "ledger_does_not_depend_on_the_rows")


def test_catches_a_generator_that_reads_rows_it_declares_it_does_not_read():
    with pytest.raises(AssertionError, match="declares that it reads no training rows, but its samples change"):
        run_check("lying_row_copier", "reads_no_rows")


@pytest.mark.parametrize(("name", "fault"), [
    ("row_copier", "its ledger records no mechanism, so it claims ε = 0"),
    ("gaussian_but_pure", "labelled pure, but its ledger records \\['gaussian'\\]"),
])
def test_catches_a_ledger_that_contradicts_its_label(name, fault):
    with pytest.raises(AssertionError, match=fault):
        run_check(name, "ledger_within_budget")


def test_catches_overspending():
    with pytest.raises(AssertionError, match="underclaimed"):
        run_check("overspender", "ledger_within_budget")


@pytest.mark.slow
def test_pytest_plugin_option_runs_checks_on_an_installed_generator(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--dpgym-conformance=uniform",
         "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{len(CHECKS) - 3} passed, 3 skipped" in out.stdout  # uniform declares no device, log_prob or release
