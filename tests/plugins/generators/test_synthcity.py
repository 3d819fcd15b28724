"""The optional synthcity adapter: labels, the missing-environment message, and the whole path
(host → isolated runner → adapter → synthcity's plugin API → ledger re-accounted) against a
stand-in synthcity in a throwaway environment that sees numpy and pandas."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from dpgym import Budget, Guarantee
from dpgym.cli import main
from dpgym.plugins.generators.synthcity import SPECS, SYNTHCITY
from dpgym.registry import Registry
from dpgym.results.store import RunStore
from dpgym.engine.grid import expand
from dpgym.engine.isolation import EnvironmentUnavailable
from dpgym.engine.runner import run_suite
from dpgym.engine.suite import MethodConfig, Settings, Suite
from dpgym.testing import CONFORMANCE_SCHEMA, conformance_table

FAKE_SYNTHCITY = Path(__file__).resolve().parents[2] / "harness" / "engine" / "isolated" / "fake_synthcity"
LABELS = {"synthcity_aim": Guarantee.NOMINAL, "synthcity_dpgan": Guarantee.NOMINAL,
          "synthcity_privbayes": Guarantee.NONE, "synthcity_pategan": Guarantee.NONE,
          "synthcity_adsgan": Guarantee.NONE}


def test_the_five_plugins_carry_their_labels():
    assert {spec.name: spec.guarantee for spec in SPECS} == LABELS


def test_without_the_environment_fit_and_list_name_the_command_that_creates_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(SYNTHCITY.env_var, str(tmp_path / "absent" / "python"))
    monkeypatch.setenv("COLUMNS", "250")
    with pytest.raises(EnvironmentUnavailable, match="create it with `bash scripts/setup-synthcity.sh`"):
        SPECS[0].build({}).fit(conformance_table(), CONFORMANCE_SCHEMA, Budget(1.0), 0)
    assert main(["list"]) == 0
    assert "synthcity_aim (unavailable): environment 'synthcity' not found" in capsys.readouterr().out


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    """A throwaway environment seeing this venv's packages (numpy, pandas) and the stand-in synthcity."""
    venv = tmp_path_factory.mktemp("env") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (site,) = venv.glob("lib/python*/site-packages")
    # an "import" line runs: addsitedir also processes this venv's .pth files (dpgym's editable install)
    (site / "host.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n"
                                   f"{FAKE_SYNTHCITY}\n")
    log = tmp_path_factory.mktemp("log") / "calls.jsonl"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SYNTHCITY.env_var, str(venv / "bin" / "python"))
        patch.setenv("FAKE_SYNTHCITY_LOG", str(log))
        yield Registry.discover(), log


@pytest.mark.slow
@pytest.mark.parametrize("generator, verdict", [("synthcity_aim", "ok"), ("synthcity_privbayes", "ok")])
def test_a_cell_runs_through_the_adapter_and_its_ledger_is_reaccounted(stand_in, tmp_path, generator, verdict):
    registry, log = stand_in
    suite = Suite("synthcity", (MethodConfig(generator),), ("adult",), (1.0,), (0,), 1e-5, metrics=())
    summary = run_suite(suite, RunStore(tmp_path), registry, show_progress=False, settings=Settings(executor="serial"))
    (cell,) = expand(suite, registry)
    result = json.loads((tmp_path / "cells" / cell.key / "result.json").read_text())
    assert summary.ok == 1, result.get("error")
    ledger = json.loads((tmp_path / "cells" / cell.key / "ledger.json").read_text())
    assert ledger["guarantee"] == str(LABELS[generator]) and ledger["reaccounted"]["verdict"] == verdict
    call = json.loads(log.read_text().splitlines()[-1])
    assert call["device"] == "cpu" and call["epsilon"] == 1.0
    if generator == "synthcity_aim":
        assert ledger["entries"][0]["event"]["type"] == "zcdp" and call["delta"] == 1e-5 and call["degree"] == 2
        assert ledger["reaccounted"]["epsilon"] == pytest.approx(1.0, abs=1e-3)
    else:
        assert "delta" not in call and call["n_bins"] == 100
