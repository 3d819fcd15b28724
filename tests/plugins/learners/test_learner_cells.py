"""Learners run in the same grid as generators: suite and CLI parsing, cell results, leaderboard."""

import math
import re
from dataclasses import replace

import numpy as np
import pytest

from dpgym.cli import build_parser
from dpgym.commands import suite_from_args
from dpgym.results.store import RunStore
from dpgym.engine.grid import expand
from dpgym.engine.runner import run_suite
from dpgym.engine.suite import MethodConfig, Settings, Suite, SuiteError, suite_from_dict
from dpgym.specs import SpecError
from tests.harness.report.fakerun import report_of


def test_suite_reads_learners_as_names_or_tables():
    suite = suite_from_dict({"datasets": ["adult_expm"], "epsilons": [1.0], "learners": [
        "nonprivate_lr", {"name": "expm_nf_lr", "label": "expm-proper", "params": {"mode": "proper"}}]}, "t")
    assert suite.generators == ()
    assert [(c.name, c.kind, c.display) for c in suite.learners] == [
        ("nonprivate_lr", "learner", "nonprivate_lr"), ("expm_nf_lr", "learner", "expm-proper")]
    assert suite_from_dict(suite.to_dict(), "again").learners == suite.learners


def test_a_suite_needs_generators_or_learners():
    with pytest.raises(SuiteError, match="generators"):
        Suite(name="x", generators=(), datasets=("d",), epsilons=(1.0,), seeds=(0,))


def test_cli_learners_build_an_adhoc_grid():
    args = build_parser().parse_args(["run", "--learners", "nonprivate_lr,dpsgd_lr", "--datasets", "adult_expm",
                                      "--epsilons", "1,1e-3", "--out", "x"])
    suite = suite_from_args(args)
    assert [c.name for c in suite.learners] == ["nonprivate_lr", "dpsgd_lr"] and suite.epsilons == (1.0, 1e-3)


def test_learner_cells_have_their_own_keys(learner_registry):
    suite = Suite(name="k", generators=(MethodConfig("uniform"),), datasets=("toy_learning",), epsilons=(1.0,),
                  seeds=(0,), learners=(MethodConfig("nonprivate_lr", kind="learner"),))
    cells = expand(suite, learner_registry)
    assert len({c.key for c in cells}) == 2 and [c.method.kind for c in cells] == ["generator", "learner"]


def test_a_learner_on_a_dataset_without_a_binary_target_is_refused_with_the_grid(learner_registry):
    """Not cell by cell at fit, after `via_synthetic`'s generator has trained: before any work."""
    learners = (MethodConfig("via_synthetic:uniform", kind="learner"),)
    suite = Suite(name="t", generators=(MethodConfig("uniform"),), datasets=("toy_learning", "intrusion"),
                  epsilons=(1.0,), seeds=(0,), learners=learners)
    with pytest.raises(SpecError, match=r"learner 'via_synthetic:uniform' needs a binary target, and schema "
                                        r"'intrusion' has target 'attack_category' \(categorical, 5 categories\): "
                                        r"drop dataset 'intrusion'"):
        expand(suite, learner_registry)
    assert len(expand(replace(suite, learners=()), learner_registry)) == 2  # generators take any target


@pytest.fixture
def few_directions(monkeypatch):
    """The exact-ExpM audit's base measure from 2,000 random directions instead of 50,000 (speed)."""
    from dpgym.plugins.learners.expm_nf_lr import model as expm_nf_lr

    monkeypatch.setattr(expm_nf_lr, "AUDIT_DIRECTIONS", 2_000)


@pytest.mark.slow
def test_learner_cells_score_auc_and_audit(tmp_path, learner_registry, few_directions):
    suite = Suite(name="cells", generators=(), datasets=("toy_learning",), epsilons=(1e-5, 1.0), seeds=(0,),
                  learners=(MethodConfig("nonprivate_lr", kind="learner"),
                            MethodConfig("expm_nf_lr", {"iterations": 150, "data_batch": 1024}, kind="learner")))
    summary = run_suite(suite, RunStore(tmp_path), learner_registry, show_progress=False,
                        settings=Settings(executor="serial"))
    assert summary.ok == 4, summary.messages
    results = {(r.cell.method, r.cell.epsilon): r for r in RunStore(tmp_path).results(None)}
    nonprivate = results[("nonprivate_lr", 1.0)]
    assert nonprivate.task == "private_learning" and nonprivate.metrics["auc"] > 0.85
    assert nonprivate.audit["verdict"] == "not_audited"  # guarantee none: nothing to audit
    small = results[("expm_nf_lr", 1e-5)]
    assert small.method.guarantee == "nominal"
    assert small.privacy.reaccounted.verdict == "ok"
    assert small.audit["verdict"] in {"consistent", "vacuous"} and small.audit["findings"]
    assert math.isfinite(small.audit["auc_permuted_median"])
    assert set(small.metrics) == {"auc", "auc_draws_median"}  # the diagnostic is not ranked as a score


@pytest.mark.slow
def test_leaderboard_and_report_of_learners_carry_auc_fraction_and_verdict(tmp_path, learner_registry):
    from tests.harness.report.fakerun import write_leaderboard

    # ε = 1e-3: PRV's error bar is clipped at 1e-4 (docs/methods/expm-nf.md#dpsgd-baseline), so DP-SGD cannot certify ε ≲ 1e-4
    suite = Suite(name="board", generators=(), datasets=("toy_learning",), epsilons=(1e-3,), seeds=(0, 1),
                  learners=(MethodConfig("nonprivate_lr", kind="learner"),
                            MethodConfig("dpsgd_lr", {"epochs": 1.0}, kind="learner")))
    run_suite(suite, RunStore(tmp_path), learner_registry, show_progress=False, settings=Settings(executor="serial"))
    board, markdown = write_leaderboard(tmp_path, {})
    rows = board.set_index("generator")
    assert rows.loc["nonprivate_lr", "auc_fraction_of_nonprivate"] == 1.0
    assert rows.loc["dpsgd_lr", "auc_fraction_of_nonprivate"] < 0.9  # ε·n = 3: little signal survives the noise
    assert rows.loc["dpsgd_lr", "audit_verdict"] in {"consistent", "vacuous"}
    assert "| audit |" in markdown and "auc_fraction_of_nonprivate" in markdown
    html = report_of(tmp_path, learner_registry).read_text()  # no synthetic rows, so no marginal figures
    assert "Private learners (dpsgd_lr, nonprivate_lr) release a model" in html and "Marginals:" not in html
    learning = html[html.index('<h2 id="learning">'):html.index('<h2 id="privacy">')]
    assert re.search(r"dpsgd_lr \(formal\): (consistent with its claimed ε|at ε = 0.001 the audit ran but its bound is "
                     r"vacuous)", learning)
    assert "nonprivate_lr</td>" not in learning and 'alt="test AUC versus epsilon' in learning


def test_draws_of_different_seeds_are_not_pooled_for_the_group_privacy_check():
    """ExpM+NF's 1,000 draws per seed are iid only given that seed's flow: pooled over seeds they would
    pass for 10,000 independent models and overstate the evidence. One model per seed is pooled."""
    import pandas as pd

    from dpgym.results.leaderboard import _learning_columns

    rng = np.random.default_rng(0)
    shifted = [list(rng.normal(0.6 + 0.02 * s, 0.001, 1000)) for s in range(10)]  # each seed its own spot
    centred = [list(rng.normal(0.6 + 0.02 * (9 - s) - 0.01, 0.001, 1000)) for s in range(10)]
    many = pd.DataFrame({"auc_draws": shifted, "auc_permuted_draws": centred, "audit_verdict": ["consistent"] * 10,
                         "n_rows": 1000, "delta_spent": 0.0, "replace_one": True, "metric:auc": [d[0] for d in shifted]})
    assert _learning_columns(many, 1e-6)["audit_verdict"] == "consistent"
    one = many.assign(auc_draws=[[0.8]] * 10, auc_permuted_draws=[[0.5]] * 10)
    assert _learning_columns(one, 1e-6)["audit_verdict"] == "implausible"


def test_a_learner_fault_after_its_fit_fails_its_cell_at_its_stage(tmp_path, learner_registry):
    """Serially these ended the whole run with a traceback: no models to evaluate, and a raise in the
    audit twin's evaluation, both outside any stage."""
    suite = Suite(name="faults", generators=(), datasets=("toy_learning",), epsilons=(1e-3,), seeds=(0,),
                  learners=(MethodConfig("no_models", kind="learner"), MethodConfig("twin_fails", kind="learner")))
    summary = run_suite(suite, RunStore(tmp_path), learner_registry, show_progress=False,
                        settings=Settings(executor="serial"))
    assert summary.failed == 2
    errors = {r.cell.method: r.error for r in RunStore(tmp_path).results(None)}
    assert errors["no_models"].stage == "evaluate" and "returned no model" in errors["no_models"].message
    assert errors["twin_fails"].stage == "audit" and "permuted-label twin broke" in errors["twin_fails"].message
