"""csv:PATH user datasets: the happy paths, the split rules, and each way a file breaks its schema."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

from dpgym import SchemaError
from dpgym.data.datafiles import DatasetUnavailable
from dpgym.data.inference import UnreviewedSchemaWarning, draft_toml, infer_schema, read_table
from dpgym.plugins.datasets import user_csv
from dpgym.registry import PluginError

SCHEMA = """\
name = "people"
target = "smoker"
citation = "Our 2026 survey"
license = "internal"

[[columns]]
name = "age"
kind = "integer"
min = 0
max = 120

[[columns]]
name = "colour"
kind = "categorical"
categories = ["red", "green", "blue"]

[[columns]]
name = "height"
kind = "continuous"
min = 0.5
max = 2.5
nullable = true

[[columns]]
name = "smoker"
kind = "binary"
categories = ["no", "yes"]
"""


def people(n: int = 20) -> pd.DataFrame:
    return pd.DataFrame({
        "age": [20 + i % 80 for i in range(n)],
        "colour": [("red", "green", "blue")[i % 3] for i in range(n)],
        "height": [1.5 + (i % 100) / 100 for i in range(n)],
        "smoker": [("no", "yes")[i % 2] for i in range(n)],
    })


@pytest.fixture
def folder(tmp_path) -> Path:
    people().to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "people.schema.toml").write_text(SCHEMA)
    return tmp_path


def test_a_csv_beside_its_schema_loads_with_a_seeded_80_20_split(folder, registry):
    spec = registry.dataset(f"csv:{folder / 'people.csv'}")
    split = spec.load()
    assert (len(split.train), len(split.test)) == (16, 4)
    assert list(split.train.columns) == ["age", "colour", "height", "smoker"]
    assert split.train["age"].dtype == "int64" and split.train["colour"].dtype == "category"
    pd.testing.assert_frame_equal(split.test, spec.load().test)
    assert (spec.citation, spec.license) == ("Our 2026 survey", "internal")


def test_parquet_and_options_in_the_name(folder, registry):
    people().to_parquet(folder / "people.parquet")
    spec = registry.dataset(f"csv:{folder / 'people.parquet'},test_fraction=0.5,seed=3")
    assert len(spec.load().test) == 10


def test_a_second_file_is_the_test_set(folder, registry):
    people(5).to_csv(folder / "later.csv", index=False)
    split = registry.dataset(f"csv:{folder / 'people.csv'},test={folder / 'later.csv'}").load()
    assert (len(split.train), len(split.test)) == (20, 5)


def test_a_split_column_assigns_rows(folder, registry):
    frame = people().assign(part=["train"] * 15 + ["test"] * 5)
    frame.to_csv(folder / "people.csv", index=False)
    split = registry.dataset(f"csv:{folder / 'people.csv'},split_column=part").load()
    assert (len(split.train), len(split.test)) == (15, 5) and "part" not in split.train.columns


def test_an_explicit_schema_path(folder, registry):
    (folder / "people.schema.toml").rename(folder / "elsewhere.toml")
    split = registry.dataset(f"csv:{folder / 'people.csv'},schema={folder / 'elsewhere.toml'}").load()
    assert len(split.train) == 16


def test_a_missing_height_is_allowed_where_the_schema_says_nullable(folder):
    frame = people()
    frame.loc[3, "height"] = None
    frame.to_csv(folder / "people.csv", index=False)
    split = user_csv.spec(str(folder / "people.csv")).load()
    assert pd.concat([split.train, split.test])["height"].isna().sum() == 1


@pytest.mark.parametrize(
    ("column", "value", "fault"),
    [
        ("age", "forty", "non-numeric values"),
        ("colour", "purple", "unknown categories"),
        ("smoker", None, "missing values in a non-nullable column"),
        ("age", "200", "values outside the public bounds"),
    ],
)
def test_a_row_breaking_the_schema_is_rejected_naming_file_column_and_row(folder, column, value, fault):
    frame = people().astype(object)
    frame.loc[6, column] = value  # the 7th data row
    frame.to_csv(folder / "people.csv", index=False)
    with pytest.raises(SchemaError) as caught:
        user_csv.spec(str(folder / "people.csv")).load()
    message = str(caught.value)
    assert str(folder / "people.csv") in message and f"column {column!r}: {fault}" in message
    assert "rows numbered from 1 after the header" in message and "(first: 7=" in message


def test_rows_are_numbered_as_records_when_blank_lines_shift_the_lines(folder):
    frame = people().astype(object)
    frame.loc[6, "colour"] = "purple"
    lines = frame.to_csv(index=False).splitlines()
    lines[2:2] = ["", ""]  # blank lines the reader skips
    (folder / "people.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(SchemaError, match=r"unknown categories: 1 rows \(first: 7='purple'\)"):
        user_csv.spec(str(folder / "people.csv")).load()


@pytest.mark.parametrize(("text", "fault"), [
    ("", "the file is empty"),
    ("age,colour,smoker\n", "no data rows"),
    ("age,age,smoker\n40,41,yes\n", r"the header names columns \['age'\] more than once"),
])
def test_empty_files_and_repeated_column_names_are_refused_naming_the_file(folder, text, fault):
    (folder / "people.csv").write_text(text)
    with pytest.raises(SchemaError, match=fault) as caught:
        user_csv.spec(str(folder / "people.csv")).load()
    assert str(folder / "people.csv") in str(caught.value)


def test_a_bad_split_column_value_is_rejected(folder):
    people().assign(part=["train"] * 19 + ["validation"]).to_csv(folder / "people.csv", index=False)
    with pytest.raises(SchemaError, match=r"split column 'part' must hold train or test: 1 rows \(first: 20='validation'\)"):
        user_csv.spec(f"{folder / 'people.csv'},split_column=part").load()


@pytest.mark.parametrize(("missing", "named"), [("data", "data file .*absent.csv does not exist"),
                                                 ("schema", "schema file .*absent.schema.toml does not exist")])
def test_a_missing_file_is_refused_when_the_name_is_resolved_naming_it(tmp_path, registry, missing, named):
    if missing == "schema":
        (tmp_path / "absent.csv").write_text("x\n1\n")
    with pytest.raises(PluginError, match=named):
        registry.dataset(f"csv:{tmp_path / 'absent.csv'}")
    with pytest.raises(DatasetUnavailable, match="csv:PATH"):
        registry.dataset("csv").load()


def test_an_unknown_option_is_a_plugin_error(folder, registry):
    with pytest.raises(PluginError, match="takes schema=.*test="):
        registry.dataset(f"csv:{folder / 'people.csv'},sheet=2")


@pytest.mark.parametrize("fraction", ["0", "1.5", "-0.2"])
def test_a_test_fraction_outside_0_1_is_a_plugin_error(folder, registry, fraction):
    with pytest.raises(PluginError, match=f"bad value for test_fraction: '{fraction}'.*strictly between 0 and 1"):
        registry.dataset(f"csv:{folder / 'people.csv'},test_fraction={fraction}")


def test_an_unreviewed_inferred_schema_warns_on_load(folder):
    draft = infer_schema(read_table(folder / "people.csv"), "people")
    (folder / "people.schema.toml").write_text(draft_toml(draft, "people.csv"))
    with pytest.warns(UnreviewedSchemaWarning, match="not reviewed"):
        user_csv.spec(str(folder / "people.csv")).load()


def test_a_reviewed_schema_loads_without_warning(folder):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        user_csv.spec(str(folder / "people.csv")).load()


def test_the_checksum_follows_the_data_and_the_schema(folder):
    before = user_csv.spec(str(folder / "people.csv")).checksum
    (folder / "people.schema.toml").write_text(SCHEMA.replace("max = 120", "max = 130"))
    assert user_csv.spec(str(folder / "people.csv")).checksum != before


def test_the_same_name_gives_the_same_spec_until_a_file_changes(folder, registry):
    name = f"csv:{folder / 'people.csv'}"
    first = registry.dataset(name)
    assert registry.dataset(name) is first  # the runner loads each dataset once per process
    people(30).to_csv(folder / "people.csv", index=False)
    assert registry.dataset(name).checksum != first.checksum
