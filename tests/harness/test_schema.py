"""The public schema: files, validation messages that name the fault, canonical dtypes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from dpgym import Column, ColumnKind, Schema, SchemaError


def test_valid_frame_conforms_to_canonical_dtypes(small_schema, small_frame):
    out = small_schema.conform(small_frame)
    assert out["age"].dtype == np.int64
    assert out["score"].dtype == np.float64
    assert list(out["colour"].cat.categories) == ["red", "green", "blue"]
    assert out["size"].cat.ordered


def test_missing_value_in_non_nullable_column_names_column_and_rows(small_schema, small_frame):
    small_frame.loc[2, "score"] = np.nan
    with pytest.raises(SchemaError, match=r"column 'score': missing values .*2="):
        small_schema.validate(small_frame)


def test_unknown_category_is_named(small_schema, small_frame):
    small_frame.loc[1, "colour"] = "purple"
    with pytest.raises(SchemaError, match=r"column 'colour': unknown categories: 1 rows \(first: 1='purple'\)"):
        small_schema.validate(small_frame)


def test_out_of_bounds_and_wrong_type_are_both_reported(small_schema, small_frame):
    small_frame["age"] = small_frame["age"].astype(object)
    small_frame.loc[0, "age"] = 140
    small_frame.loc[3, "age"] = "old"
    with pytest.raises(SchemaError) as err:
        small_schema.validate(small_frame)
    message = str(err.value)
    assert "non-numeric values: 1 rows (first: 3='old')" in message
    assert "outside the public bounds [0, 100]: 1 rows (first: 0=140)" in message


def test_fractional_value_in_integer_column(small_schema, small_frame):
    small_frame["age"] = small_frame["age"].astype(float)
    small_frame.loc[1, "age"] = 20.5
    with pytest.raises(SchemaError, match="non-integer values"):
        small_schema.validate(small_frame)


def test_missing_and_extra_columns(small_schema, small_frame):
    frame = small_frame.drop(columns=["size"]).assign(extra=1)
    problems = small_schema.violations(frame)
    assert "missing columns ['size']" in problems
    assert "columns not in the schema ['extra']" in problems


def test_toml_round_trip(small_schema, tmp_path):
    age, score, *rest = small_schema.columns
    schema = Schema(small_schema.name, (replace(age, heavy_tailed=True), replace(score, step=0.25), *rest),
                    target=small_schema.target)
    path = tmp_path / "schema.toml"
    path.write_text(schema.to_toml())
    read = Schema.from_toml(path)
    assert read == schema and read["age"].heavy_tailed and read["score"].step == 0.25


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "x", "kind": "integer", "min": 0}, "need public bounds"),
        ({"name": "x", "kind": "colour"}, "unknown kind 'colour'"),
        ({"name": "x", "kind": "binary", "categories": ["a", "b", "c"]}, "exactly 2 categories"),
        ({"name": "x", "kind": "continuous", "min": 1, "max": 0}, "min < max"),
        ({"name": "x", "kind": "categorical"}, "non-empty 'categories'"),
        ({"name": "x", "kind": "categorical", "categories": ["a"], "heavy_tailed": True}, "only numeric"),
        ({"name": "x", "kind": "integer", "min": 0, "max": 1e19}, "beyond ±2\\^53"),
        ({"name": "x", "kind": "continuous", "min": -1e308, "max": 1e308}, "column 'x': .* go beyond ±1e\\+150"),
        ({"name": "x", "kind": "continuous", "min": 0, "max": 1.7e308}, "column 'x': .* go beyond ±1e\\+150"),
        ({"name": "x", "kind": "continuous", "min": -1e151, "max": 0}, "go beyond ±1e\\+150"),
        ({"name": "x", "kind": "integer", "min": 0, "max": 9, "step": 2}, "only continuous columns take a 'step'"),
        ({"name": "x", "kind": "continuous", "min": 0, "max": 1, "step": 0}, "'step' must be positive"),
        ({"name": "x", "kind": "continuous", "min": 0, "max": 1, "step": 2}, "at most max − min"),
        ({"name": "x", "kind": "categorical", "categories": ["a"], "step": 1}, "take a 'step'"),
        ({"name": "x", "kind": "categorical", "categories": "abc"}, "'categories' must be a list"),
        ({"name": "x", "kind": "categorical", "categories": [1.5, True]}, "must be strings \\(or integers\\)"),
        ({"name": "x", "kind": "binary", "categories": ["a", "b"], "nullable": "no"}, "'nullable' must be true or false"),
        ({"name": "x", "kind": "integer", "min": True, "max": 9}, "'min' must be a number, got True"),
        ({"name": "x", "kind": "integer", "min": 0, "max": "9"}, "'max' must be a number"),
        ({"name": "x", "kind": "integer", "min": 0, "max": 9, "nullabel": True}, "did you mean 'nullable'"),
    ],
)
def test_malformed_schema_entries_are_rejected_with_the_column(entry, message):
    with pytest.raises(SchemaError, match=message) as err:
        Schema.from_dict({"name": "s", "columns": [entry]}, source="s.toml")
    assert "column 'x'" in str(err.value) and "s.toml" in str(err.value)


@pytest.mark.parametrize(("top", "message"), [
    ({"targte": "x"}, "unknown keys \\['targte'\\].*did you mean 'target'"),
    ({"reviewed": "false"}, "'reviewed' must be true or false, got 'false'"),
    ({"inferred_from_data": 1}, "'inferred_from_data' must be true or false"),
    ({"target": 3}, "'target' must be a column name"),
    ({"columns": {"name": "x"}}, "'columns' must be a list"),
])
def test_malformed_top_level_keys_are_rejected_with_the_file(top, message):
    raw = {"name": "s", "columns": [{"name": "x", "kind": "binary", "categories": ["a", "b"]}], **top}
    with pytest.raises(SchemaError, match=message) as err:
        Schema.from_dict(raw, source="s.toml")
    assert str(err.value).startswith("s.toml: ")


def test_integer_categories_read_as_text():
    column = Column.from_dict({"name": "x", "kind": "categorical", "categories": [1, 2, 3]})
    assert column.categories == ("1", "2", "3")


@pytest.mark.parametrize("target", [
    Column("y", ColumnKind.CONTINUOUS, min=0, max=1), Column("y", ColumnKind.CATEGORICAL, categories=("only",))])
def test_a_target_must_be_discrete_with_two_categories(target):
    with pytest.raises(SchemaError, match="target 'y' must be a discrete column with two or more categories"):
        Schema("s", (Column("x", ColumnKind.CONTINUOUS, min=0, max=1), target), target="y")


def test_target_must_be_a_column():
    with pytest.raises(SchemaError, match="target 'y' is not a column"):
        Schema("s", (Column("x", ColumnKind.CONTINUOUS, min=0, max=1),), target="y")


def test_adult_official_split_matches_its_schema(adult_split, adult_schema):
    assert len(adult_split.train) == 32561 and len(adult_split.test) == 16281
    assert adult_split.train["income"].value_counts()[">50K"] == 7841
    assert adult_split.test["income"].value_counts()[">50K"] == 3846
    assert (adult_split.train["workclass"] == "?").sum() > 0  # '?' kept as an explicit category
    assert adult_schema.violations(adult_split.train) == []


def test_schema_mismatch_with_data_is_one_clear_error(adult_schema):
    frame = pd.DataFrame({"age": [30]})
    with pytest.raises(SchemaError, match="missing columns"):
        adult_schema.validate(frame, "user.csv")


WITHHELD_TOML = """
name = "t"
target = "y"

[[columns]]
name = "x"
kind = "integer"
min = 0
max = 10

[[columns]]
name = "y"
kind = "binary"
categories = ["no", "yes"]

[[withheld]]
name = "weight"
reason = "a sampling weight; no documented bound"
"""


def test_withheld_columns_are_read_kept_out_of_the_table_and_written_back(tmp_path):
    (tmp_path / "s.toml").write_text(WITHHELD_TOML)
    schema = Schema.from_toml(tmp_path / "s.toml")
    assert schema.names == ["x", "y"]
    assert [(w.name, w.reason) for w in schema.withheld] == [("weight", "a sampling weight; no documented bound")]
    import tomllib
    assert Schema.from_dict(tomllib.loads(schema.to_toml())) == schema


def test_conform_drops_withheld_columns_and_still_refuses_undeclared_ones(tmp_path):
    (tmp_path / "s.toml").write_text(WITHHELD_TOML)
    schema = Schema.from_toml(tmp_path / "s.toml")
    rows = pd.DataFrame({"weight": [1e9, 3.5], "x": [1, 2], "y": ["no", "yes"]})
    assert list(schema.conform(rows).columns) == ["x", "y"]
    with pytest.raises(SchemaError, match=r"columns not in the schema \['caseid'\]"):
        schema.conform(rows.assign(caseid=["a", "b"]))


@pytest.mark.parametrize(("entry", "message"), [
    ('name = "x"\nreason = "no bound"', r"columns \['x'\] are both public columns and withheld"),
    ('name = "w"', r"withheld column 'w': needs a 'reason'"),
    ('name = "w"\nreason = "r"\nmin = 0', r"withheld column 'w': unknown keys \['min'\]"),
])
def test_a_withheld_entry_must_be_a_named_reasoned_column_outside_the_table(entry, message):
    import tomllib
    raw = tomllib.loads(WITHHELD_TOML + f"\n[[withheld]]\n{entry}\n")
    with pytest.raises(SchemaError, match=message):
        Schema.from_dict(raw)


def test_a_numeric_column_without_public_bounds_points_to_withheld_not_the_rows():
    with pytest.raises(SchemaError, match=r"need public bounds 'min' and 'max'; .*\[\[withheld\]\], never given bounds read off"):
        Column("wage", ColumnKind.CONTINUOUS)
