"""Empirical audits written into a run directory appear beside the claimed and spent ε: in the leaderboard's
rows and files, and in the report's "Empirical audit" section with each audit's ROC."""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd
import pytest

from dpgym.audit.game import AuditOptions, run_audits
from dpgym.audit.matching import match_audits
from dpgym.results.leaderboard import metric_info
from dpgym.results.render import save_leaderboard
from dpgym.results.store import RunStore
from dpgym.engine.grid import expand
from dpgym.engine.suite import MethodConfig, Suite
from tests.harness.report.fakerun import leaderboard_of, report_of


@pytest.fixture(scope="module")
def audited_run(smoke_run, report_registry, tmp_path_factory):
    """A copy of the smoke run with two tiny real audits of uniform written into it (a few seconds): one at the
    run's ε = 1, one at ε = 2, which no row of the run has."""
    run = tmp_path_factory.mktemp("audited") / "run"
    shutil.copytree(smoke_run, run)
    suite = Suite(name="audit", generators=(MethodConfig("uniform"),), datasets=("adult",), epsilons=(1.0, 2.0),
                  seeds=(0,), metrics=())
    run_audits(expand(suite, report_registry), AuditOptions(fits=4, audit_rows=50), run, report_registry, workers=1)
    return run


def stored_audit(run, epsilon: float) -> dict:
    return next(a for path in (run / "audits").glob("*/audit.json") for a in [json.loads(path.read_text())]
                if a["epsilon_claimed"] == epsilon)


def test_the_audited_row_carries_the_bound_fits_and_verdict_and_the_others_a_dash(audited_run, report_registry):
    audit = stored_audit(audited_run, 1.0)
    assert audit["status"] == "ok"
    lb = leaderboard_of(audited_run, metric_info(report_registry)[0])
    board = lb.board.set_index("generator")
    assert board.loc["uniform", "eps_lower"] == audit["epsilon_lower"]
    assert board.loc["uniform", "audit_fits"] == 4 and board.loc["uniform", "audit_verdict"] == "consistent"
    assert math.isnan(board.loc["independent", "eps_lower"]) and board.loc["independent", "audit_fits"] is None
    assert board.loc["independent", "audit_verdict"] == ""
    assert [a["epsilon_claimed"] for a in lb.unmatched_audits] == [2.0]

    markdown = save_leaderboard(RunStore(audited_run), lb)
    assert "| audit | ε lower (audit) | audit fits |" in markdown
    assert f"| consistent | {audit['epsilon_lower']:.3f} | 4 |" in markdown
    assert "| — | — | — |" in markdown  # independent: no audit
    assert "`consistent` proves nothing" in markdown and "1 audit(s) in this folder match no row" in markdown
    written = pd.read_csv(audited_run / "leaderboard.csv").set_index("generator")
    assert written.loc["uniform", "audit_fits"] == 4 and written.loc["uniform", "audit_verdict"] == "consistent"
    saved = json.loads((audited_run / "leaderboard.json").read_text())
    uniform = next(r for r in saved["rows"] if r["generator"] == "uniform")
    assert uniform["eps_lower"] == audit["epsilon_lower"] and uniform["audit_fits"] == 4
    assert saved["audits"] == [{"generator": "uniform", "dataset": "adult", "epsilon": 1.0, "delta": 1e-5,
                                "detail": f"audits/{audit['key']}/audit.json"}]


def test_an_audit_of_another_version_or_dataset_matches_no_row(audited_run):
    results = RunStore(audited_run).results()
    audit = stored_audit(audited_run, 1.0)
    assert list(match_audits(results, [audit])[0]) == [("uniform", "adult", 1.0, 1e-5)]
    for changed in ({**audit, "method": {**audit["method"], "version": "0"}}, {**audit, "dataset_checksum": "other"},
                    {**audit, "method": {**audit["method"], "params": {"other": 1}}}):
        assert match_audits(results, [changed]) == ({}, [changed])


def test_the_report_shows_each_audit_beside_the_claim_with_its_roc(audited_run, report_registry, tmp_path):
    audit = stored_audit(audited_run, 1.0)
    html = report_of(audited_run, report_registry, out=tmp_path / "report.html").read_text()
    assert 'href="#audit"' in html and '<h2 id="audit">Empirical audit</h2>' in html
    section = html.split('<h2 id="audit">', 1)[1].split('<h2 id="privacy">', 1)[0]
    assert "<code>consistent</code> proves nothing; a bound above the claim shows the claim false." in section
    assert f"{audit['epsilon_lower']:.3f} [{audit['epsilon_point']:.3f}]" in section
    assert f"<td>{audit['fits_done']}</td><td class=\"text\">{audit['attack']}</td>" in section
    assert 'src="data:image/png;base64,' in section.split('alt="audit ROC of uniform on adult at epsilon 1"')[0]
    assert section.count("<img") == 1  # the ε = 2 audit matches no row: named, not drawn
    gdp = audit["gdp"]
    assert f"{gdp['mu']:.3f} [{gdp['mu_interval'][0]:.3f}, {gdp['mu_interval'][1]:.3f}] → {gdp['epsilon']:.3f}" in section
    assert "an estimate that assumes a Gaussian trade-off curve, never a bound" in section
    assert "match no row of this run" in section and "uniform × adult × ε = 2" in section
    assert "generators that <code>dpgym audit</code> tested the empirical audit's" in html  # the leaderboard's legend


def test_a_run_without_audits_has_no_audit_section_or_columns(smoke_report, smoke_run, report_registry):
    html = smoke_report.read_text()
    assert 'id="audit"' not in html and 'href="#audit"' not in html and "generators are not audited" in html
    board = leaderboard_of(smoke_run, metric_info(report_registry)[0]).board
    assert "eps_lower" not in board and "audit_fits" not in board
    assert "ε lower" not in (smoke_run / "leaderboard.md").read_text()


def test_a_one_run_audit_shows_its_mu_bound_beside_its_epsilon_bound(smoke_run, report_registry, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(smoke_run, run)
    suite = Suite(name="audit", generators=(MethodConfig("uniform"),), datasets=("adult",), epsilons=(1.0,),
                  seeds=(0,), metrics=())
    run_audits(expand(suite, report_registry), AuditOptions(fits=1, audit_rows=50, canaries=20), run, report_registry,
               workers=1)
    audit = stored_audit(run, 1.0)
    assert audit["mode"] == "one_run" and audit["bound"] in ("steinke", "f-dp") and audit["mu_attack"] == "nearest"
    html = report_of(run, report_registry, out=tmp_path / "report.html").read_text()
    section = html.split('<h2 id="audit">', 1)[1].split('<h2 id="privacy">', 1)[0]
    assert "<td>1, 20 canaries</td>" in section
    assert f"μ ≥ {audit['mu_lower']:.3f} → {audit['mu_lower_epsilon']:.3f}" in section
    assert "which bounds ε only if the mechanism's curve is Gaussian" in section
