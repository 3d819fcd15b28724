"""`dpgym check`: unchanged code passes, a weakened generator or a privacy change fails."""

from __future__ import annotations

import json
import math
import re
import shutil

import pytest

from dpgym.cli import main
from dpgym.commands import metric_directions
from dpgym.registry import Registry
from dpgym.results.check import compare, load_baseline, same_ledger, summarise, write_baseline
from dpgym.results.store import RunStore
from dpgym.engine.runner import run_suite
from dpgym.engine.suite import MethodConfig, Suite
from tests.fake_plugins import QuieterGenerators


def summary_of(run_dir):
    store = RunStore(run_dir)
    return summarise(store, store.results())


def baseline_from(run_dir, path, suite, keys=None):
    store = RunStore(run_dir)
    write_baseline(store, store.results(), path, suite, keys)


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.discover(extra={"quieter": QuieterGenerators()})


def run(out, registry, params=None, name="independent"):
    suite = Suite("gate", (MethodConfig(name, params or {}, label="independent"), MethodConfig("uniform")),
                  ("adult",), (1.0,), (0, 1, 2), 1e-5, metrics=("fidelity",))
    run_suite(suite, RunStore(out), registry, show_progress=False)
    return summary_of(out)


@pytest.fixture(scope="module")
def baseline(registry, tmp_path_factory):
    out = tmp_path_factory.mktemp("baseline-run")
    run(out, registry)
    path = out / "golden.json"
    baseline_from(out, path, "gate")
    return load_baseline(path)


@pytest.fixture(scope="module")
def rerun(registry, baseline, tmp_path_factory):
    """A second run of the unchanged code (read-only: a test that edits a run copies it)."""
    out = tmp_path_factory.mktemp("rerun")
    run(out, registry)
    return out


@pytest.mark.slow
def test_unchanged_code_passes(registry, baseline, rerun):
    findings = compare(baseline, summary_of(rerun), metric_directions(registry), alpha=0.05)
    assert findings == []


@pytest.mark.slow
def test_weakened_generator_fails_naming_generator_and_metric(registry, baseline, tmp_path):
    weakened = run(tmp_path, registry, params={"numeric_bins": 2})
    findings = compare(baseline, weakened, metric_directions(registry), alpha=0.05)
    failing = {(f.group[0], f.what) for f in findings if f.fails}
    assert ("independent", "marginal_tvd") in failing
    assert all(f.kind == "regression" for f in findings if f.fails)


@pytest.mark.slow
def test_changed_noise_with_the_same_claimed_epsilon_is_a_privacy_regression(registry, baseline, tmp_path):
    quieter = run(tmp_path, registry, name="quieter_independent")
    findings = compare(baseline, quieter, metric_directions(registry), alpha=0.05)
    privacy = {f.what for f in findings if f.kind == "privacy"}
    assert "cells refused by the privacy re-accounting" in privacy


@pytest.mark.slow
def test_cli_exit_codes(registry, rerun, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    run(out, registry, params={"numeric_bins": 2})
    path = tmp_path / "golden.json"
    monkeypatch.setattr(Registry, "discover", classmethod(lambda cls, extra=None: registry))
    assert main(["check", str(out), "--baseline", str(path)]) == 2  # no baseline yet: usage error
    assert main(["check", str(out), "--baseline", str(path), "--update"]) == 0
    assert main(["check", str(out), "--baseline", str(path)]) == 0
    baseline_from(rerun, path, "gate")
    assert main(["check", str(out), "--baseline", str(path)]) == 1
    out_text = capsys.readouterr().out
    assert "REGRESSION  independent × adult × ε=1.0  marginal_tvd" in out_text and "6 regressions (0 privacy)" in out_text


def test_ledgers_compare_floats_to_rounding_not_to_the_last_bit():
    def phase(noise_multiplier, steps=300, **details):
        return {"event": {"type": "subsampled_gaussian", "noise_multiplier": noise_multiplier, "steps": steps},
                "details": details}

    entry, last_bit, changed = phase(0.5190832108208103), phase(0.5190832108208102), phase(0.5191)
    # the same DP-NF cell's ledger from two machines (2026-11-23 and -24): σ and its derived ε figures
    # agree to ~1e-9 relative, beyond the last bit
    other_machine = phase(0.519083210642816, epsilon_gdp_clt_poisson=1.2824665841754166)
    this_machine = phase(0.5190832108208103, epsilon_gdp_clt_poisson=1.2824665823295733)
    assert same_ledger([entry], [last_bit]) and same_ledger([this_machine], [other_machine])
    assert not same_ledger([entry], [changed])
    assert not same_ledger([entry], [phase(0.5190832108208103, steps=301)])
    assert not same_ledger([entry], [entry, entry])


def _edit(groups, **changes):
    """A copy of summarised groups with the independent group's fields replaced."""
    import copy

    out = copy.deepcopy(groups)
    group = next(g for k, g in out.items() if k[0] == "independent")
    for name, value in changes.items():
        group[name] = value(group) if callable(value) else value
    return out


@pytest.mark.slow
def test_a_metric_turning_nan_or_a_missing_seed_is_a_regression(registry, baseline, rerun):
    now = summary_of(rerun)
    directions = metric_directions(registry)
    nan = _edit(now, metrics=lambda g: {**g["metrics"], "marginal_tvd": [float("nan"), *g["metrics"]["marginal_tvd"][1:]]})
    assert {f.what for f in compare(baseline, nan, directions, 0.05) if f.fails} == {
        "marginal_tvd not a finite number in some seeds", "marginal_tvd values"}
    short = _edit(now, seeds=[0, 1], metrics=lambda g: {k: v[:2] for k, v in g["metrics"].items()})
    assert "cells run" in {f.what for f in compare(baseline, short, directions, 0.05) if f.fails}


def _with_sigma(ledger, sigma):
    return [{**ledger[0], "event": {**ledger[0]["event"], "sigma": sigma}}, *ledger[1:]]


def _seed_dependent(groups):
    """The independent group as if its noise had been drawn per seed: seed s used σ = 1 + s."""
    return _edit(groups, ledgers=lambda g: {s: _with_sigma(ledger, 1.0 + s) for s, ledger in g["ledgers"].items()})


def _ledger_findings(baseline, now, registry):
    return [f for f in compare(baseline, now, metric_directions(registry), 0.05) if f.kind == "privacy"]


@pytest.mark.slow
def test_a_ledger_changed_in_any_seed_is_a_privacy_regression(registry, baseline, rerun):
    now = summary_of(rerun)
    changed = _edit(now, ledgers=lambda g: {**g["ledgers"], 1: _with_sigma(g["ledgers"][1], 0.5)})
    findings = _ledger_findings(baseline, changed, registry)
    assert [f.what for f in findings] == ["ledger mechanisms or parameters changed"]
    assert findings[0].now.startswith("seed 1; seed 1: ") and "sigma=0.5" in findings[0].now


@pytest.mark.slow
def test_each_seed_is_held_to_its_own_baseline_ledger(registry, baseline, rerun):
    """A ledger that legitimately differs between seeds passes unchanged; one seed given another
    seed's ledger fails, though that ledger is in the baseline too."""
    now = summary_of(rerun)
    base, unchanged = _seed_dependent(baseline), _seed_dependent(now)
    assert _ledger_findings(base, unchanged, registry) == []
    swapped = _edit(unchanged, ledgers=lambda g: {**g["ledgers"], 2: g["ledgers"][0]})
    assert [f.now.split(";")[0] for f in _ledger_findings(base, swapped, registry)] == ["seed 2"]


@pytest.mark.slow
def test_a_seed_the_baseline_did_not_run_is_held_to_its_ledger_only_if_that_did_not_depend_on_the_seed(
        registry, baseline, rerun):
    now = summary_of(rerun)
    extra_seed = lambda groups, sigma: _edit(  # noqa: E731
        groups, ledgers=lambda g: {**g["ledgers"], 7: _with_sigma(g["ledgers"][0], sigma)})
    constant = baseline[next(k for k in baseline if k[0] == "independent")]["ledgers"][0][0]["event"].get("sigma")
    assert _ledger_findings(baseline, extra_seed(now, constant), registry) == []
    assert [f.what for f in _ledger_findings(baseline, extra_seed(now, 123.0), registry)] == [
        "ledger mechanisms or parameters changed"]
    assert _ledger_findings(_seed_dependent(baseline), extra_seed(_seed_dependent(now), 123.0), registry) == []


@pytest.mark.slow
def test_a_format_1_baseline_is_refused_saying_how_to_regenerate_it(registry, rerun, tmp_path, monkeypatch, capsys):
    out = rerun
    path = tmp_path / "b.json"
    baseline_from(out, path, "gate")
    raw = json.loads(path.read_text())
    for group in raw["groups"]:  # format 1 kept one ledger per group
        group["ledger"] = group.pop("ledgers")[0]
    path.write_text(json.dumps({**raw, "format": "dpgym-baseline/1"}))
    regenerate = f"`dpgym run --suite gate --out RUN_DIR`, then `dpgym check RUN_DIR --baseline {path} --update`"
    with pytest.raises(ValueError, match=re.escape(f"{path} is a dpgym-baseline/1 baseline")) as refused:
        load_baseline(path)
    assert regenerate in str(refused.value)
    monkeypatch.setattr(Registry, "discover", classmethod(lambda cls, extra=None: registry))
    assert main(["check", str(out), "--baseline", str(path)]) == 2
    assert regenerate in " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize("text", ['{"format": "dpgym-baseline/2"}', "[]",
                                  '{"format": "dpgym-baseline/2", "groups": [{"generator": "x"}]}'])
def test_a_malformed_baseline_is_a_usage_error(tmp_path, text):
    path = tmp_path / "b.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="b.json"):
        load_baseline(path)


@pytest.mark.slow
def test_alpha_outside_zero_one_is_refused(registry, rerun, tmp_path, monkeypatch):
    monkeypatch.setattr(Registry, "discover", classmethod(lambda cls, extra=None: registry))
    assert main(["check", str(rerun), "--baseline", str(tmp_path / "none.json"), "--alpha", "0"]) == 2


@pytest.mark.slow
def test_a_guarantee_label_changed_in_any_seed_is_a_privacy_regression(registry, baseline, rerun):
    now = summary_of(rerun)
    relabelled = _edit(now, _guarantees=lambda g: sorted({g["guarantee"], "nominal"}))
    privacy = {f.what for f in compare(baseline, relabelled, metric_directions(registry), 0.05) if f.kind == "privacy"}
    assert privacy == {"guarantee label changed"}


def test_a_tiny_alpha_gives_a_finite_tolerance():
    """1 − 1e-17 rounds to 1, where the t quantile is ∞: no regression of any size could fail."""
    from dpgym.results.check import _worse_by
    from dpgym.specs import Direction

    worse, tolerance = _worse_by([0.10, 0.11, 0.12], [0.50, 0.52, 0.55], Direction.LOWER, 1e-17)
    assert math.isfinite(tolerance) and worse == pytest.approx(0.413, abs=1e-3)


@pytest.mark.slow
def test_metrics_that_are_not_per_seed_lists_are_a_malformed_baseline(rerun, tmp_path):
    path = tmp_path / "b.json"
    baseline_from(rerun, path, "gate")
    path.write_text(path.read_text().replace('"failures": 0', '"failures": null', 1))
    with pytest.raises(ValueError, match=r"b.json: group 0 has malformed \['failures'\]"):
        load_baseline(path)


@pytest.mark.slow
def test_a_baseline_is_not_written_from_a_run_with_failed_or_missing_cells(rerun, tmp_path):
    out = shutil.copytree(rerun, tmp_path / "run")
    keys = {r.cell.key for r in RunStore(out).results(None)}
    with pytest.raises(ValueError, match=r"1 of the suite's 7 cells have not run"):
        baseline_from(out, tmp_path / "b.json", "gate", keys | {"not-run-yet"})
    failed = next(iter(RunStore(out).results(None))).to_dict()
    failed.update(status="failed", error={"stage": "fit", "type": "RuntimeError", "message": "boom"})
    (RunStore(out).cells / failed["cell"]["key"] / "result.json").write_text(json.dumps(failed))
    with pytest.raises(ValueError, match=r"cells failed in .*; a baseline must hold every cell's"):
        baseline_from(out, tmp_path / "b.json", "gate", keys)
    assert not (tmp_path / "b.json").exists()


def test_committed_results_holding_a_moved_generator_are_named_stale(tmp_path):
    from dpgym.results.check import Finding, stale_results

    for suite, generators in {"main": ["independent", "dp_vae"], "marginal": ["aim", "mst"]}.items():
        (tmp_path / suite).mkdir()
        (tmp_path / suite / "run.json").write_text(json.dumps(
            {"suite": {"name": suite, "generators": [{"name": g, "label": "", "params": {}} for g in generators]}}))
    moved = [Finding("regression", ("dp_vae", "adult", 1.0), "marginal_tvd"),
             Finding("improvement", ("independent", "lifesci", 4.0), "kendall_rmse"),
             Finding("new", ("aim", "adult", 1.0), "new group")]
    assert stale_results(moved, tmp_path) == {"main": ["dp_vae", "independent"]}
    assert stale_results([], tmp_path) == {}
