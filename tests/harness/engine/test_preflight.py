"""Bad input stops a run before its first cell: one `dpgym: error:` line naming the file and the key,
column or line at fault, exit code 2, and nothing written. A dry run checks the same."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from dpgym.cli import main
from tests.plugins.datasets.test_user_csv_dataset import SCHEMA, people

CSV = people(60).to_csv(index=False)


def write_dataset(folder, rows: str | bytes = CSV, schema: str = SCHEMA, name: str = "people"):
    data = folder / f"{name}.csv"
    if isinstance(rows, bytes):
        data.write_bytes(rows)
    else:
        data.write_text(rows)
    (folder / f"{name}.schema.toml").write_text(schema)
    return data


def run(data, out, *extra: str, dry_run: bool = False) -> int:
    return main(["run", "--generators", "independent", "--datasets", f"csv:{data}", "--epsilons", "1",
                 "--executor", "serial", "--no-progress", "--out", str(out), *extra,
                 *(["--dry-run"] if dry_run else [])])


def refused(capsys, code: int, *named: str) -> str:
    """The run exited 2 with one error line that names each of `named`."""
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("dpgym: error:") and len(err.splitlines()) == 1, err
    for text in named:
        assert text in err, err
    return err


MALFORMED_SCHEMAS = {
    "misspelt key": (SCHEMA.replace("target =", "targte ="), "unknown keys ['targte']"),
    "categories as a string": (SCHEMA.replace('["red", "green", "blue"]', '"abc"'),
                               "column 'colour': 'categories' must be a list"),
    "nullable as a string": (SCHEMA.replace('kind = "binary"', 'kind = "binary"\nnullable = "no"'),
                             "column 'smoker': 'nullable' must be true or false, got 'no'"),
    "a boolean bound": (SCHEMA.replace("min = 0\n", "min = true\n"), "column 'age': 'min' must be a number, got True"),
    "reviewed as a string": (SCHEMA.replace('target = "smoker"', 'target = "smoker"\nreviewed = "false"'),
                             "'reviewed' must be true or false, got 'false'"),
    "a one-category target": (SCHEMA.replace('kind = "binary"\ncategories = ["no", "yes"]',
                                             'kind = "categorical"\ncategories = ["no"]'),
                              "target 'smoker' must be a discrete column with two or more categories"),
    "a bound whose square overflows": (SCHEMA.replace("max = 2.5", "max = 1.7e308"),
                                       "column 'height': bounds [0.5, 1.7e+308] go beyond ±1e+150"),
}


@pytest.mark.parametrize("case", MALFORMED_SCHEMAS)
@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_a_malformed_schema_file_stops_the_run_naming_the_file_and_key(tmp_path, capsys, case, dry_run):
    schema, fault = MALFORMED_SCHEMAS[case]
    data = write_dataset(tmp_path, schema=schema)
    refused(capsys, run(data, tmp_path / "out", dry_run=dry_run), "people.schema.toml", fault)
    assert not (tmp_path / "out").exists()


UNREADABLE = {
    "latin-1 text": ("age,colour,height,smoker\n30,r\xe9d,1.5,yes\n".encode("latin-1"), "not UTF-8 text (line 2: byte 0xe9"),
    "binary bytes": (bytes(range(128, 256)) * 8, "not UTF-8 text (line 1"),
    "a ragged row": (CSV + "40,red,1.5,no,extra\n", "line 62 has 5 fields where the header has 4"),
    "an empty file": ("", "the file is empty"),
}


@pytest.mark.parametrize("case", UNREADABLE)
def test_an_unreadable_file_stops_the_run_naming_the_file_and_line(tmp_path, capsys, case):
    rows, fault = UNREADABLE[case]
    data = write_dataset(tmp_path, rows=rows)
    refused(capsys, run(data, tmp_path / "out"), "people.csv", fault)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_a_mistyped_path_or_a_folder_is_refused_naming_the_path(tmp_path, capsys, dry_run):
    refused(capsys, run(tmp_path / "nope.csv", tmp_path / "out", dry_run=dry_run),
            "data file", "nope.csv does not exist")
    (tmp_path / "folder.csv").mkdir()
    (tmp_path / "folder.schema.toml").write_text(SCHEMA)
    refused(capsys, run(tmp_path / "folder.csv", tmp_path / "out", dry_run=dry_run), "folder.csv is a directory")
    assert not (tmp_path / "out").exists()


def test_rows_breaking_the_schema_stop_the_run_naming_column_and_rows(tmp_path, capsys):
    data = write_dataset(tmp_path, rows=CSV.replace("\n22,blue,", "\n220,blue,").replace("\n23,red,", "\n23,purple,"))
    refused(capsys, run(data, tmp_path / "out"), "people.csv", "column 'age': values outside the public bounds",
            "first: 3='220'", "column 'colour': unknown categories", "4='purple'")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_a_target_with_one_class_in_the_rows_is_refused(tmp_path, capsys, dry_run):
    data = write_dataset(tmp_path, rows=CSV.replace(",no\n", ",yes\n"))
    refused(capsys, run(data, tmp_path / "out", dry_run=dry_run), "csv:", "people.csv", "target column 'smoker'",
            "only 'yes' in the training rows")


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_a_hyper_parameter_of_the_wrong_type_is_refused_before_the_run(tmp_path, capsys, dry_run):
    data = write_dataset(tmp_path)
    refused(capsys, run(data, tmp_path / "out", "--set", "independent.numeric_bins=2.5", dry_run=dry_run),
            "generator 'independent'", "numeric_bins=2.5 (the default is 32)")


@pytest.mark.parametrize("setting", ["independent.numeric_bins=0", "independent.mechanism=bogus"])
def test_a_hyper_parameter_value_the_plugin_refuses_is_the_only_line_printed(tmp_path, capsys, setting):
    data = write_dataset(tmp_path)
    refused(capsys, run(data, tmp_path / "out", "--set", setting), "generator 'independent'",
            setting.split(".")[1].split("=")[0])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_a_csv_too_small_to_split_is_refused_saying_how_many_rows_the_split_needs(tmp_path, capsys, dry_run):
    data = write_dataset(tmp_path, rows=people(1).to_csv(index=False))
    refused(capsys, run(data, tmp_path / "out", dry_run=dry_run), str(data), "1 row cannot be split",
            "needs at least 2 rows")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_an_unusable_out_is_refused_naming_it(tmp_path, capsys, dry_run):
    data = write_dataset(tmp_path)
    (tmp_path / "a-file").write_text("not a run directory")
    refused(capsys, run(data, tmp_path / "a-file", dry_run=dry_run), "--out", "a-file: is a file, not a directory")
    refused(capsys, run(data, tmp_path / "a-file" / "run", dry_run=dry_run), "a-file is a file")
    assert (tmp_path / "a-file").read_text() == "not a run directory"


def test_a_valid_csv_passes_the_dry_run_and_then_runs(tmp_path, capsys):
    data = write_dataset(tmp_path)
    assert run(data, tmp_path / "out", dry_run=True) == 0
    assert "1 to run" in capsys.readouterr().out and not (tmp_path / "out").exists()
    assert run(data, tmp_path / "out") == 0
    assert "1 ran ok, 0 already done, 0 failed, 0 unavailable" in capsys.readouterr().out


def test_an_unreviewed_schema_makes_its_cells_nominal_and_warns_once(tmp_path, capsys):
    """A draft schema's bounds and categories were read off the private rows: the cell runs, but is
    labelled nominal with the reason, and the terminal says so once, not once per cell."""
    draft = SCHEMA.replace('target = "smoker"', 'target = "smoker"\ninferred_from_data = true\nreviewed = false')
    data = write_dataset(tmp_path, schema=draft)
    code = main(["run", "--generators", "independent,uniform", "--datasets", f"csv:{data}", "--epsilons", "1,2",
                 "--executor", "serial", "--no-progress", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 0 and err.count("not reviewed") == 1, err
    results = [json.loads(p.read_text()) for p in (tmp_path / "out" / "cells").glob("*/result.json")]
    assert len(results) == 4 and {r["method"]["guarantee"] for r in results} == {"nominal"}
    assert all("drafted from the private rows and is not reviewed" in r["method"]["guarantee_reason"] for r in results)
    board = pd.read_csv(tmp_path / "out" / "leaderboard.csv")
    assert set(board.guarantee) == {"nominal"}
    assert "Nominal, not formal" in (tmp_path / "out" / "report.html").read_text()
