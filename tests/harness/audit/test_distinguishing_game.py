"""The empirical privacy audit (`dpgym audit`): the neighbouring datasets, the bound, the command, and
planted faults that only the audit can see."""

from __future__ import annotations

import json
import math
from multiprocessing import forkserver

import numpy as np
import pandas as pd
import pytest

from dpgym.audit.game import (
    AuditOptions,
    Certified,
    analyse,
    fit_seeds,
    neighbours,
    observe,
    run_audits,
    target_record,
)
from dpgym.cli import main
from dpgym.registry import Registry
from dpgym.engine.grid import expand
from dpgym.engine.suite import MethodConfig, Suite, apply_overrides
from tests.fake_plugins import FAULTY
from tests.harness.audit.audit_faults import PLANTED


def test_target_is_a_corner_of_the_public_schema(adult_schema):
    target = target_record(adult_schema).iloc[0]
    for column in adult_schema.columns:
        expected = column.max if column.is_numeric else column.categories[-1]
        assert target[column.name] == expected


def test_neighbours_differ_by_the_target_alone(adult_split, adult_schema):
    without, with_target = neighbours(adult_split.train, adult_schema, 300, seed=4)
    assert len(without) == 300 and len(with_target) == 301
    assert with_target.iloc[:300].equals(without)
    assert with_target.iloc[[300]].reset_index(drop=True).equals(target_record(adult_schema))
    assert neighbours(adult_split.train, adult_schema, 300, seed=4)[0].equals(without)


def test_each_fit_has_its_own_stream_and_the_coins_are_fair():
    assert fit_seeds(0, 7) == fit_seeds(0, 7) != fit_seeds(0, 8)
    coins = [fit_seeds(0, i)[0] for i in range(2000)]
    assert 0.46 < np.mean(coins) < 0.54


def test_bound_of_a_perfect_test_is_what_the_intervals_allow():
    included = np.array([True] * 50 + [False] * 50)
    perfect = Certified.of(included.copy(), included, delta=0.0)
    upper_rate = 1 - 0.025 ** (1 / 50)  # one-sided 97.5% Clopper–Pearson upper bound on 0 of 50
    assert perfect.lower == pytest.approx(math.log((1 - upper_rate) / upper_rate), rel=1e-6)
    assert perfect.point == math.inf
    coin_flip = Certified.of(np.arange(100) % 2 == 0, included, delta=0.0)
    assert coin_flip.lower == 0.0


class FixedDensity:
    """A released model whose log-likelihood of every row is `value`."""

    def __init__(self, value: float):
        self.value = value

    def log_prob(self, frame):
        return np.full(len(frame), self.value)


def test_the_attacks_see_the_nearest_row_the_target_cells_and_a_density(adult_split, adult_schema):
    target = target_record(adult_schema)
    synthetic = pd.concat([adult_split.train.iloc[:99], target], ignore_index=True)
    seen = observe(synthetic, target, adult_schema, FixedDensity(-3.5))
    assert seen["nearest_distance"] == 0.0 and seen["near_rows"] >= 1 and seen["log_prob"] == -3.5
    assert len(seen["cell_counts"]) == len(adult_schema.columns) and min(seen["cell_counts"]) >= 1
    assert seen["class_cell_counts"][-1] == (synthetic["income"] == ">50K").sum()
    assert observe(adult_split.train.iloc[:100], target, adult_schema, None)["log_prob"] is None


def _records(scores: np.ndarray, included: np.ndarray) -> list[dict]:
    return [{"fit": i, "included": bool(b), "nearest_distance": float(-s), "near_rows": 0, "cell_counts": [0],
             "class_cell_counts": None, "log_prob": None, "seconds": 0.0} for i, (s, b) in enumerate(zip(scores, included))]


def test_the_choosing_half_picks_the_test_and_the_other_half_certifies_it():
    rng = np.random.default_rng(0)
    included = rng.random(400) < 0.5
    separated = analyse(_records(np.where(included, 1.0, 0.0) + rng.normal(0, 0.1, 400), included), 400, 1e-5)
    assert separated["attack"] == "nearest" and separated["epsilon_lower"] > 2
    assert separated["certifying_fits"] == 200
    assert sum(separated["roc"]["certifying"]) == 200 and len(separated["attacks"]["nearest"]["scores"]) == 400
    unrelated = analyse(_records(rng.normal(0, 1, 400), included), 400, 1e-5)
    assert unrelated["epsilon_lower"] < 0.3
    white_box = [{**r, "log_prob": float(b)} for r, b in zip(_records(rng.normal(0, 1, 400), included), included)]
    found = analyse(white_box, 400, 1e-5)
    assert found["attack"] == "log_prob" and found["epsilon_lower"] > 2


@pytest.mark.slow
def test_command_writes_a_table_and_resumes_and_a_crash_fails_only_its_audit(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DPGYM_PLUGINS", FAULTY)
    argv = ["audit", "--generators", "uniform,crasher", "--datasets", "adult", "--epsilons", "1", "--fits", "6",
            "--audit-rows", "50", "--out", str(tmp_path), "--workers", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "uniform" in out and "consistent" in out and "model diverged" in out
    audits = {a["generator"]: a for a in json.loads((tmp_path / "audits.json").read_text())["audits"]}
    assert audits["uniform"]["status"] == "ok" and audits["uniform"]["fits_done"] == 6
    assert audits["crasher"]["status"] == "failed" and audits["crasher"]["verdict"] == "failed"
    fits = tmp_path / audits["uniform"]["detail"].replace("audit.json", "fits")
    stored = {p.name: p.stat().st_mtime_ns for p in fits.iterdir()}
    assert len(stored) == 2  # each of the 2 processes' 3 fits in one file
    assert main(argv) == 0  # resumed: every fit of uniform is stored, so none runs again
    assert {p.name: p.stat().st_mtime_ns for p in fits.iterdir()} == stored
    assert main([*argv[:2], "uniform", *argv[3:6], "2", *argv[7:]]) == 0  # another ε into the same folder
    listed = json.loads((tmp_path / "audits.json").read_text())["audits"]
    assert sorted((a["generator"], a["epsilon_claimed"]) for a in listed) == [("crasher", 1), ("uniform", 1),
                                                                              ("uniform", 2)]


def _audit(tmp_path, generators: list[str], options: AuditOptions, sets: list[str] = ()) -> dict[str, dict]:
    registry = Registry.discover()
    suite = Suite(name="audit", generators=tuple(MethodConfig(g) for g in generators), datasets=("adult",),
                  epsilons=(1.0,), seeds=(0,), metrics=())
    cells = expand(apply_overrides(suite, list(sets)), registry)
    return {s["generator"]: s for s in run_audits(cells, options, tmp_path, registry, workers=2)}


@pytest.fixture
def cold_forkserver():
    """No forkserver running, so the audit starts one warm with its plugins and Adult. One that an
    earlier test started keeps that test's warm state, and each of the game's 70 batches would then
    rediscover the plugins and load Adult itself (a second each: 80 s instead of 15). `_stop` is
    multiprocessing's own hook for tests."""
    forkserver._forkserver._stop()


@pytest.mark.slow
@pytest.mark.usefixtures("cold_forkserver")
def test_planted_faults_are_violations_and_honest_generators_are_consistent(tmp_path, monkeypatch):
    """Fixed seeds; about twenty seconds on two idle cores. The audit runs on Adult's `age` alone, the
    worst-case dataset where the target (age 90, the top of the public range) moves one count of one
    histogram, so each fit takes milliseconds and a fault's whole leak is in the one column. Each fit
    releases 5,000 synthetic rows, so the attack sees the fitted model rather than the noise of a small
    sample. (a), the resampler, is caught in one fit by the one-run audit (test_canary_audit.py)."""
    monkeypatch.setenv("DPGYM_PLUGINS", PLANTED)
    age_alone = {"audit_rows": 200, "synthetic_rows": 5000, "columns": ("age",)}
    found = _audit(tmp_path, ["independent_private_bounds", "independent", "uniform"],
                   AuditOptions(fits=100, **age_alone))
    # (b) leaks less per fit than (a) and (c): it needs more fits to show it.
    found |= _audit(tmp_path, ["independent_quiet"], AuditOptions(fits=400, **age_alone))
    verdicts = {name: (s["verdict"], round(s["epsilon_lower"], 2)) for name, s in found.items()}
    for fault in ("independent_quiet", "independent_private_bounds"):
        assert found[fault]["verdict"] == "violation", verdicts
    for honest in ("independent", "uniform"):
        assert found[honest]["verdict"] == "consistent", verdicts


def test_projection_keeps_the_columns_in_table_order_and_the_target_only_if_kept(adult_schema):
    projected = adult_schema.project(["sex", "age"])
    assert projected.names == ["age", "sex"] and projected.target is None
    assert adult_schema.project(["age", adult_schema.target]).target == adult_schema.target
    with pytest.raises(KeyError, match="no column 'agee'"):
        adult_schema.project(["agee"])


def test_columns_must_exist_in_every_audited_dataset(tmp_path, capsys):
    assert main(["audit", "--generators", "uniform", "--datasets", "adult", "--epsilons", "1", "--columns", "age,agee",
                 "--out", str(tmp_path)]) == 2
    assert "dataset 'adult' has no column 'agee'" in capsys.readouterr().err


@pytest.mark.slow
def test_laplace_on_a_one_column_worst_case_dataset_comes_near_its_claim(tmp_path):
    """independent's Laplace histograms on Adult's age alone: the target (age 90, the top of the public
    range) moves one count of one histogram, so the whole ε is in one release, and 1,000 fits (the
    recommended number for fits under a second) certify at least half of it. Numpy only: the same bound on
    any machine."""
    found = _audit(tmp_path, ["independent"], AuditOptions(fits=1000, audit_rows=1000, synthetic_rows=20000,
                                                          columns=("age",)), ["independent.mechanism=laplace"])
    audit = found["independent"]
    assert audit["verdict"] == "consistent" and 0.5 <= audit["epsilon_lower"] <= 1.0
    assert audit["target"] == {"age": "90"}
