"""The mixed-type encoding: layout from the schema alone, exact round trip, valid decoding."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgym import Column, ColumnKind, Schema
from dpgym.plugins.nn.mixed import MixedEncoding


def test_adult_layout_one_column_per_two_level_and_numeric_column(adult_schema):
    enc = MixedEncoding(adult_schema)
    # 6 integer columns, sex and income one each, one-hot: 9+16+7+15+6+5+42 (paper: 106 without
    # fnlwgt and education-num, docs/methods/dp-auto-gan.md#datasets)
    assert enc.width == 6 + 2 + 100
    assert {s.column.name: s.coding for s in enc.spans}["sex"] == "binary"


def test_encoding_round_trips_real_rows(adult_split, adult_schema):
    enc = MixedEncoding(adult_schema)
    rows = adult_split.train.iloc[:2000].reset_index(drop=True)
    matrix = enc.encode(rows)
    assert matrix.min() >= 0 and matrix.max() <= 1
    assert enc.decode(matrix).equals(rows)


def test_encoding_does_not_depend_on_the_rows(adult_split, adult_schema):
    enc = MixedEncoding(adult_schema)
    one = enc.encode(adult_split.train.iloc[:5])
    both = enc.encode(adult_split.train.iloc[:500])[:5]
    assert np.array_equal(one, both)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(["argmax", "sample"]))
def test_any_decoder_output_decodes_into_the_schema(adult_schema, seed, mode):
    rng = np.random.default_rng(seed)
    enc = MixedEncoding(adult_schema)
    raw = rng.uniform(-0.2, 1.2, size=(40, enc.width))
    adult_schema.validate(enc.decode(raw, mode, rng))



@pytest.mark.parametrize("offset", [120, 130])
def test_one_hot_spans_past_offset_127_round_trip(wide_table, offset):
    """int8 category codes added to an offset past 127 must neither wrap nor overflow."""
    schema, frame = wide_table(offset)
    enc = MixedEncoding(schema)
    assert enc.decode(enc.encode(frame)).equals(frame)


def test_missing_values_of_nullable_columns_round_trip():
    schema = Schema("gaps", (
        Column("h", ColumnKind.CONTINUOUS, min=0.0, max=2.0, nullable=True),
        Column("c", ColumnKind.CATEGORICAL, categories=("r", "g", "b"), nullable=True),
        Column("d", ColumnKind.CATEGORICAL, categories=("only",), nullable=True),
        Column("y", ColumnKind.BINARY, categories=("no", "yes")),
    ), target="y")
    frame = schema.conform(pd.DataFrame({"h": [0.5, None, 1.5], "c": ["r", None, "b"], "d": [None, "only", "only"],
                                         "y": ["no", "yes", "no"]}))
    encoding = MixedEncoding(schema)
    # h: value, then its missing coordinate; c: 3 categories + missing; d: one category or missing, a 0/1
    assert [(s.coding, s.stop - s.start) for s in encoding.spans] == [
        ("numeric", 1), ("missing", 1), ("onehot", 4), ("binary", 1), ("binary", 1)]
    matrix = encoding.encode(frame)
    assert matrix[:, 1].tolist() == [0.0, 1.0, 0.0] and matrix[:, 6].tolist() == [1.0, 0.0, 0.0]
    pd.testing.assert_frame_equal(encoding.decode(matrix), frame)
    drawn = encoding.decode(matrix, "sample", np.random.default_rng(0))
    pd.testing.assert_frame_equal(drawn, frame)  # a 0/1 coordinate is a certain draw
