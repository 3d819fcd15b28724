"""`adult_autogan`: Adult as DP-auto-GAN prepares it (docs/methods/dp-auto-gan.md#datasets)."""

from __future__ import annotations

import pandas as pd
import pytest

from dpgym import ColumnKind
from dpgym.plugins.datasets import adult_autogan
from dpgym.plugins.metrics.dpautogan.compute import diversity_columns, label_features
from dpgym.plugins.nn.mixed import MixedEncoding


@pytest.fixture(scope="module")
def split():
    return adult_autogan.load()


def test_the_papers_thirteen_columns_encode_to_its_106_coordinates():
    schema = adult_autogan.schema()
    assert "fnlwgt" not in schema.names and "education" not in schema.names
    assert len(schema.names) == 13
    assert MixedEncoding(schema).width == 106


@pytest.mark.slow
def test_education_num_is_sixteen_ordered_levels_holding_the_official_values(split, adult_split):
    column = adult_autogan.schema()["education-num"]
    assert column.kind is ColumnKind.ORDINAL and column.categories == tuple(str(k) for k in range(1, 17))
    for ours, official in ((split.train, adult_split.train), (split.test, adult_split.test)):
        assert len(ours) == len(official)
        assert (ours["education-num"].astype(int).to_numpy() == official["education-num"].to_numpy()).all()
        kept = [n for n in ours.columns if n != "education-num"]
        pd.testing.assert_frame_equal(ours[kept], official[kept], check_dtype=False, check_categorical=False)


def test_diversity_keeps_the_papers_eight_unordered_columns():
    assert diversity_columns(adult_autogan.schema()) == ["workclass", "marital-status", "occupation", "relationship",
                                                         "race", "sex", "native-country", "income"]


def test_the_salary_forest_reads_education_num_in_its_order(split):
    schema = adult_autogan.schema()
    codes = label_features(split.train.head(50), schema, ["education-num"])[:, 0]
    assert (codes == split.train["education-num"].head(50).astype(int).to_numpy() - 1).all()
