"""The smoke suite end to end on real Adult: the reference generators order as they must, and every
cell's metric values are those recorded in smoke_values.json."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from dpgym.data.cache import digest
from dpgym.registry import Registry
from dpgym.results.store import RunStore
from dpgym.engine.pipeline import Run
from dpgym.engine.runner import run_suite
from dpgym.engine.suite import load_suite

pytestmark = pytest.mark.slow  # every test here shares one run of the smoke suite (minutes)


RECORDED = Path(__file__).with_name("smoke_values.json")


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke")
    summary = run_suite(load_suite("smoke"), RunStore(out), Registry.discover(), show_progress=False)
    assert summary.failed == 0 and summary.ok == summary.total
    return out


@pytest.fixture(scope="module")
def smoke_board(smoke_run):
    return Run.open(RunStore(smoke_run), Registry.discover()).leaderboard().board.set_index("generator")


# A learned generator's synthetic rows depend on the CPU's floating-point path (torch and XLA pick
# kernels by instruction set: AVX-512 or not), so on another machine they may differ from the
# recorded ones, and a metric of other rows says nothing about the evaluation. The reference
# generators draw with numpy's generators alone: their rows must be the recorded ones anywhere.
REFERENCE_GENERATORS = {"uniform", "independent", "real"}


def synthetic_rows_digest(cell_dir: Path) -> str:
    return digest([pd.read_parquet(cell_dir / "synthetic.parquet")])


def test_every_metric_value_is_the_recorded_one(smoke_run):
    """Evaluation that got faster must still measure the same: a metric whose version did not change
    gives the recorded value to 1e-9 on the recorded synthetic rows (a metric's version is in the
    cell key, so a new version is a new cell, absent from the record). When a generator's output
    changes on purpose, run `dpgym run --suite smoke --out DIR` and rewrite the record from DIR's
    cells/*/result.json and synthetic.parquet (`python tests/leaderboard/test_smoke_suite.py DIR`)."""
    recorded = json.loads(RECORDED.read_text())
    differ, unrecorded, other_rows = [], [], []
    for path in sorted((smoke_run / "cells").glob("*/result.json")):
        result = json.loads(path.read_text())
        if result["cell"]["key"] not in recorded:
            unrecorded.append(result["cell"]["method"])
            continue
        expected = recorded[result["cell"]["key"]]
        if synthetic_rows_digest(path.parent) != expected["rows"]:
            other_rows.append(result["cell"]["method"])
            continue
        for name, value in result["metrics"].items():
            want = expected["metrics"].get(name)
            same = want is not None and (math.isclose(value, want, rel_tol=0, abs_tol=1e-9)
                                         or (math.isnan(value) and math.isnan(want)))
            if not same:
                differ.append(f"{expected['cell']}: {name} {want} → {value}")
    assert not unrecorded, f"cells not in {RECORDED.name} (a new generator or metric version?): {unrecorded}"
    assert not REFERENCE_GENERATORS & set(other_rows), f"reference generators drew other rows: {other_rows}"
    assert not differ, "metric values changed:\n" + "\n".join(differ)


def record(run_dir: Path) -> dict:
    """The record of a smoke run's cells: each cell's name, metric values and synthetic rows' digest."""
    cells = {}
    for path in sorted((run_dir / "cells").glob("*/result.json")):
        result = json.loads(path.read_text())
        cell = result["cell"]
        cells[cell["key"]] = {
            "cell": f"{cell['method']} × {cell['dataset']} × ε={cell['epsilon']:g} × seed {cell['seed']}",
            "metrics": dict(sorted(result["metrics"].items())),
            "rows": synthetic_rows_digest(path.parent),
        }
    return cells


def test_real_beats_independent_beats_uniform_on_auroc(smoke_board):
    auroc = smoke_board["tstr_auroc_mean"]
    assert auroc["real"] > auroc["independent"] > auroc["uniform"]


def test_real_data_auroc_is_in_the_published_train_real_test_real_range(smoke_board):
    assert 0.85 <= smoke_board.loc["real", "tstr_auroc_mean"] <= 0.92


def test_independent_keeps_marginals_that_uniform_loses(smoke_board):
    tvd = smoke_board["marginal_tvd_mean"]
    assert tvd["real"] < tvd["independent"] < 0.05 < tvd["uniform"]
    assert smoke_board.loc["independent", "claimed_epsilon_max"] == pytest.approx(1.0)


if __name__ == "__main__":  # rewrite the record from a finished smoke run: python THIS_FILE RUN_DIR
    import sys
    RECORDED.write_text(json.dumps(record(Path(sys.argv[1])), indent=1) + "\n")
