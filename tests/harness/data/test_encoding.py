"""Schema-driven encoders: no fitting, exact inverse, output always inside the public domain."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgym import Column, ColumnKind, Schema
from dpgym.data.encoding import TableEncoder


@pytest.mark.slow
def test_onehot_round_trip_is_exact_on_adult(adult_split, adult_schema):
    encoder = TableEncoder(adult_schema)
    matrix = encoder.encode(adult_split.train)
    assert matrix.shape == (32561, encoder.width)
    assert matrix.min() >= 0.0 and matrix.max() <= 1.0
    pd.testing.assert_frame_equal(encoder.decode(matrix), adult_split.train)


def test_ordinal_round_trip_is_exact(small_schema, small_frame):
    frame = small_schema.conform(small_frame)
    encoder = TableEncoder(small_schema, discrete="ordinal", numeric_range=(-1.0, 1.0))
    assert encoder.width == 5
    decoded = encoder.decode(encoder.encode(frame))
    pd.testing.assert_frame_equal(decoded, frame, check_exact=False, rtol=1e-12)


def test_encoding_depends_on_the_schema_only(small_schema, small_frame):
    frame = small_schema.conform(small_frame)
    encoder = TableEncoder(small_schema)
    first = encoder.encode(frame.iloc[:1])
    assert np.array_equal(first, encoder.encode(frame)[:1])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=11, max_size=11), st.integers(1, 50))
def test_decode_of_any_model_output_lies_in_the_domain(values, rows):
    schema = Schema("s", (
        Column("n", ColumnKind.INTEGER, min=0, max=10),
        Column("c", ColumnKind.CATEGORICAL, categories=("a", "b", "c")),
        Column("o", ColumnKind.ORDINAL, categories=("lo", "mid", "hi")),
        Column("x", ColumnKind.CONTINUOUS, min=-2.0, max=2.0),
    ))
    for discrete in ("onehot", "ordinal"):
        encoder = TableEncoder(schema, discrete=discrete)
        matrix = np.resize(np.array(values), (rows, encoder.width))
        decoded = encoder.decode(matrix)
        assert schema.violations(decoded) == []



@pytest.mark.parametrize("offset", [120, 130])  # codes + offset wrap past 127; the offset itself exceeds int8
def test_onehot_blocks_past_offset_127_round_trip(wide_table, offset):
    """Category codes are int8 for < 128 categories; an offset past 127 must not wrap or overflow."""
    schema, frame = wide_table(offset)
    encoder = TableEncoder(schema)
    pd.testing.assert_frame_equal(encoder.decode(encoder.encode(frame)), frame)


NULLABLE = Schema("gaps", (
    Column("h", ColumnKind.CONTINUOUS, min=0.0, max=2.0, nullable=True),
    Column("n", ColumnKind.INTEGER, min=0, max=10, nullable=True),
    Column("c", ColumnKind.CATEGORICAL, categories=("r", "g", "b"), nullable=True),
    Column("d", ColumnKind.BINARY, categories=("x", "y"), nullable=True),
    Column("y", ColumnKind.BINARY, categories=("no", "yes")),
), target="y")
GAPS = NULLABLE.conform(pd.DataFrame({"h": [0.5, None, 1.5], "n": [3, None, 10], "c": ["r", None, "b"],
                                      "d": [None, "y", "x"], "y": ["no", "yes", "no"]}))


def test_missing_values_of_nullable_columns_have_a_place_and_round_trip():
    encoder = TableEncoder(NULLABLE)
    # h: value + [present, missing]; n: the same; c: 3 categories + missing; d: 2 + missing; y: 2
    assert [b.width for b in encoder.blocks] == [1, 2, 1, 2, 4, 3, 2]
    matrix = encoder.encode(GAPS)
    assert matrix[1, encoder.block("h").start] == 0.0  # a missing number is written at the low end
    assert matrix[:, encoder.blocks[1].start + 1].tolist() == [0.0, 1.0, 0.0]
    pd.testing.assert_frame_equal(encoder.decode(matrix), GAPS)
    ordinal = TableEncoder(NULLABLE, discrete="ordinal", columns=["c", "d", "y"])
    assert ordinal.encode(GAPS)[:, 0].tolist() == [0.0, 3.0, 2.0]
    pd.testing.assert_frame_equal(ordinal.decode(ordinal.encode(GAPS)), GAPS[["c", "d", "y"]])


def test_a_missing_value_in_a_column_not_declared_nullable_is_refused_by_column_and_row():
    frame = GAPS.assign(y=pd.Categorical([None, "yes", "no"], categories=["no", "yes"]))
    with pytest.raises(ValueError, match=r"column 'y': missing value at row 0, and the schema does not declare it nullable"):
        TableEncoder(NULLABLE).encode(frame)
    with pytest.raises(ValueError, match=r"ordinal TableEncoder cannot encode nullable numeric columns \['h', 'n'\]"):
        TableEncoder(NULLABLE, discrete="ordinal")
