"""infer_schema: a draft read off the rows, marked unreviewed, that round-trips through its TOML."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.pandas import column, data_frames, range_indexes

from dpgym import ColumnKind, Schema, SchemaError
from dpgym.data.inference import draft_toml, infer_schema, read_table


def frame() -> pd.DataFrame:
    return pd.DataFrame({
        "age": ["31", "45", "27", "60"],
        "income": ["1200.5", "800", "", "2500.25"],
        "city": ["Oslo", "Lima", "Oslo", "Pune"],
        "member": ["yes", "no", "no", "yes"],
        "flag": ["0", "1", "1", "0"],
        "constant": ["7", "7", "7", "7"],
    })


def test_kinds_categories_and_bounds_come_from_the_rows():
    schema = infer_schema(frame().replace("", None), "survey")
    kinds = {c.name: c.kind for c in schema.columns}
    assert kinds == {
        "age": ColumnKind.INTEGER, "income": ColumnKind.CONTINUOUS, "city": ColumnKind.CATEGORICAL,
        "member": ColumnKind.BINARY, "flag": ColumnKind.BINARY, "constant": ColumnKind.INTEGER,
    }
    assert (schema["age"].min, schema["age"].max) == (27, 60)
    assert schema["city"].categories == ("Lima", "Oslo", "Pune")
    assert schema["income"].nullable and not schema["age"].nullable
    assert (schema["constant"].min, schema["constant"].max) == (7, 8)  # widened: bounds need min < max


def test_integers_beyond_exact_float_range_are_drafted_continuous_and_a_header_alone_is_refused():
    """An integer column bounded beyond ±2^53 would round in float64 and, past 2^63, wrap in int64."""
    schema = infer_schema(pd.DataFrame({"bytes": ["0", "10000000000000000000"], "n": ["1", "2"]}), "t")
    assert schema["bytes"].kind is ColumnKind.CONTINUOUS and schema["n"].kind is ColumnKind.INTEGER
    with pytest.raises(SchemaError, match=r"no rows to draft schema 't' from \(the file has 2 columns, 0 rows\)"):
        infer_schema(pd.DataFrame({"a": [], "b": []}), "t")


def test_booleans_with_missing_values_are_binary_and_dates_are_refused_naming_the_column():
    flags = pd.DataFrame({"ok": pd.array([True, None, False], dtype="boolean"), "raw": [True, None, False]})
    schema = infer_schema(flags, "t")
    assert [(c.kind, c.categories, c.nullable) for c in schema.columns] == [(ColumnKind.BINARY, ("False", "True"), True)] * 2
    with pytest.raises(SchemaError, match=r"column 'when' holds dates or times"):
        infer_schema(pd.DataFrame({"when": pd.to_datetime(["2020-01-01", "2021-06-30"])}), "t")


def test_the_draft_is_marked_and_says_why_it_must_be_reviewed():
    schema = infer_schema(frame(), "survey")
    assert schema.inferred_from_data and not schema.reviewed
    text = draft_toml(schema, "survey.csv")
    assert text.startswith("# DRAFT SCHEMA derived from the private rows of survey.csv")
    assert "NOT public" in text and "reviewed = false" in text


def test_round_trip_through_toml_and_the_same_file(tmp_path):
    frame().to_csv(tmp_path / "survey.csv", index=False)
    rows = read_table(tmp_path / "survey.csv")
    schema = infer_schema(rows, "survey", target="member")
    (tmp_path / "survey.schema.toml").write_text(draft_toml(schema, "survey.csv"))
    again = Schema.from_toml(tmp_path / "survey.schema.toml")
    assert again == schema and again.target == "member"
    conformed = again.conform(rows, "survey.csv")
    assert conformed["income"].isna().sum() == 1 and conformed["age"].tolist() == [31, 45, 27, 60]


def test_typed_frames_are_inferred_too():
    typed = pd.DataFrame({"x": [0.5, 1.5], "n": [1, 3], "b": [True, False]})
    schema = infer_schema(typed, "typed")
    assert [c.kind for c in schema.columns] == [ColumnKind.CONTINUOUS, ColumnKind.INTEGER, ColumnKind.BINARY]
    assert schema.violations(typed) == []


def test_cli_schema_infer_writes_a_draft_and_never_overwrites(tmp_path, capsys):
    from dpgym.cli import main

    frame().to_csv(tmp_path / "survey.csv", index=False)
    out = tmp_path / "survey.schema.toml"
    assert main(["schema", "infer", str(tmp_path / "survey.csv"), "--out", str(out)]) == 0
    assert Schema.from_toml(out) == infer_schema(read_table(tmp_path / "survey.csv"), "survey")
    assert main(["schema", "infer", str(tmp_path / "survey.csv"), "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["schema", "infer", str(tmp_path / "survey.csv")]) == 0
    assert capsys.readouterr().out.startswith("# DRAFT SCHEMA")



@settings(max_examples=60, deadline=None)
@given(data_frames([
    column("i", elements=st.integers(-10**6, 10**6)),
    column("x", elements=st.floats(-1e6, 1e6, allow_nan=False)),
    column("word", elements=st.sampled_from(["a", "b", "c", "d"])),
    column("maybe", elements=st.one_of(st.none(), st.sampled_from(["p", "q", "r"]))),
], index=range_indexes(min_size=1)))  # a frame without rows is refused
def test_a_draft_accepts_the_rows_it_was_drawn_from(rows):
    schema = infer_schema(rows, "drawn")
    assert schema.violations(rows) == []
