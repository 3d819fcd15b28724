"""dpgym from Python (`dpgym.run`, `dpgym.open`, `dpgym.score`) and `dpgym score`: the same commands
as the CLI's, the CLI's errors raised, and synthetic rows made elsewhere scored beside a run's
generators, exactly as the cell that made them scored them."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import dpgym
from dpgym.api import CELL_COLUMNS
from dpgym.cli import main
from dpgym.engine.preflight import InputError
from dpgym.engine.suite import SuiteError
from dpgym.schema import SchemaError

pytestmark = pytest.mark.slow

METRICS = ["fidelity", "utility", "privacy"]  # the smoke suite's


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """An independent cell on Adult at ε = 1 (the smoke suite's metrics), and its rows as a CSV file."""
    out = tmp_path_factory.mktemp("api") / "run"
    results = dpgym.run(generators=["independent"], datasets=["adult"], epsilons=[1], seeds=1, metrics=METRICS,
                        out=out, executor="serial", progress=False)
    rows = out.parent / "rows.csv"
    pd.read_parquet(out / "cells" / results.cells.key[0] / "synthetic.parquet").to_csv(rows, index=False)
    return results, rows


def values(cells: pd.DataFrame, generator: str) -> pd.Series:
    row = cells.set_index("generator").loc[generator]
    return row[[c for c in cells.columns if c not in CELL_COLUMNS]].astype(float)


def test_run_returns_the_leaderboard_cells_and_ledger_of_its_directory(finished):
    results, _ = finished
    board = results.leaderboard
    assert set(board.columns) >= {"generator", "dataset", "epsilon", "metric", "mean", "ci_low", "ci_high", "rank",
                                  "eps_spent", "guarantee"}
    assert set(board.metric) >= {"tvd_2way", "tstr_auroc", "dcr_share"}
    assert (board.generator == "independent").all() and (board.guarantee == "formal").all()
    cell = results.cells.iloc[0]
    assert cell.status == "ok" and cell.total_seconds > 0 and 0 < cell.tvd_2way < 1
    assert results.ledger(cell).epsilon == pytest.approx(board.eps_spent.iloc[0])
    assert "<table" in results._repr_html_()
    reopened = dpgym.open(results.path)
    pd.testing.assert_frame_equal(reopened.leaderboard, board)
    assert results.report(results.path / "elsewhere.html").read_text().startswith("<!DOCTYPE html>")


def test_scored_rows_of_a_cell_get_the_cells_metric_values_and_sit_beside_it_unranked(finished, tmp_path):
    results, rows = finished
    scored = dpgym.score(dataset="adult", synthetic=rows, label="vendor-x", epsilon=1, out=results.path)
    cells = scored.cells
    expected = values(cells, "independent")
    assert len(expected) == 14
    pd.testing.assert_series_equal(values(cells, "vendor-x"), expected, check_names=False, rtol=1e-12)
    row = cells.set_index("generator").loc["vendor-x"]
    assert row.guarantee == "nominal" and math.isnan(row.reaccounted_epsilon)
    board = scored.leaderboard.set_index("generator")
    assert board.loc["vendor-x"]["rank"].isna().all() and board.loc["independent"]["rank"].notna().all()
    assert "vendor-x" not in set(scored.ranking.generator)
    assert "Scored rows, shown and not ranked: vendor-x" in (results.path / "leaderboard.md").read_text()
    assert "claim dpgym has not verified" in (results.path / "report.html").read_text()
    with pytest.raises(Exception, match="no ledger"):
        scored.ledger(row)


def test_rows_scored_without_an_epsilon_claim_nothing(finished):
    results, rows = finished
    assert main(["score", "--dataset", "adult", "--synthetic", str(rows), "--label", "vendor-y",
                 "--out", str(results.path)]) == 0
    row = dpgym.open(results.path).cells.set_index("generator").loc["vendor-y"]
    assert row.guarantee == "none" and math.isinf(row.epsilon)


def broken(rows, tmp_path, name: str, change) -> str:
    frame = pd.read_csv(rows, dtype=str, keep_default_na=False)
    path = tmp_path / name
    change(frame, path)
    return str(path)


BAD_ROWS = {
    "a missing column": (lambda f, p: f.drop(columns="age").to_csv(p, index=False), "missing columns ['age']"),
    "a column not in the schema": (lambda f, p: f.assign(vendor_id=1).to_csv(p, index=False),
                                   "columns not in the schema ['vendor_id']"),
    "categories outside the domain": (lambda f, p: f.assign(sex=["Martian"] * 3 + list(f.sex[3:])).to_csv(p, index=False),
                                      "column 'sex': unknown categories: 3 rows (first: 1='Martian'"),
    "values outside the bounds": (lambda f, p: f.assign(age=["500", "-1"] + list(f.age[2:])).to_csv(p, index=False),
                                  "column 'age': values outside the public bounds [17, 90]: 2 rows"),
    "an empty file": (lambda f, p: p.write_text(""), "the file is empty"),
    "a header only": (lambda f, p: f.head(0).to_csv(p, index=False), "no data rows"),
    "semicolons": (lambda f, p: f.to_csv(p, index=False, sep=";"), "separated by semicolons"),
}


@pytest.mark.parametrize("case", BAD_ROWS)
def test_bad_rows_are_one_error_and_leave_the_run_directory_as_it_was(finished, tmp_path, capsys, case):
    results, rows = finished
    change, message = BAD_ROWS[case]
    path = broken(rows, tmp_path, f"{case}.csv", change)
    before = {p: p.stat().st_mtime_ns for p in results.path.rglob("*")}
    code = main(["score", "--dataset", "adult", "--synthetic", path, "--label", "bad", "--out", str(results.path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("dpgym: error:") and len(err.splitlines()) == 1, err
    assert message in err, err
    assert {p: p.stat().st_mtime_ns for p in results.path.rglob("*")} == before
    with pytest.raises((InputError, SchemaError), match=message.replace("[", "\\[").replace("(", "\\(")):
        dpgym.score(dataset="adult", synthetic=path, label="bad", out=results.path)


def test_python_raises_the_clis_errors(tmp_path):
    with pytest.raises(SuiteError, match="give --suite, or an ad-hoc grid with --datasets"):
        dpgym.run(generators=["independent"], epsilons=[1], out=tmp_path / "run")
    with pytest.raises(InputError, match="not a run directory"):
        dpgym.score(dataset="adult", synthetic=tmp_path / "rows.csv", label="x", out=tmp_path / "nothing")
    assert not (tmp_path / "run").exists()


def test_a_run_resumed_after_scoring_keeps_the_scored_rows_and_warns_of_nothing(finished, capsys):
    results, rows = finished
    dpgym.score(dataset="adult", synthetic=rows, label="vendor-r", out=results.path)
    capsys.readouterr()
    again = dpgym.run(generators=["independent"], datasets=["adult"], epsilons=[1], seeds=1, metrics=METRICS,
                      out=results.path, executor="serial", progress=False)
    out = capsys.readouterr().out
    assert "1 cells: 0 ran ok, 1 already done" in out and "not part of this suite" not in out, out
    assert "vendor-r" in set(again.cells.generator)


def test_scored_rows_cannot_take_a_generators_label(finished):
    results, rows = finished
    with pytest.raises(InputError, match="--label 'independent': name the scored rows with a label of their own"):
        dpgym.score(dataset="adult", synthetic=rows, label="independent", out=results.path)
