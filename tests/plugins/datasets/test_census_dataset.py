"""census: official split, published label counts, instance weight left out, schema conformity."""

from __future__ import annotations

from dpgym.plugins.datasets import census


def test_census_has_the_official_split_and_label_counts(census_split):
    assert len(census_split.train) == 199_523 and len(census_split.test) == 99_762
    assert census_split.train["income"].value_counts().to_dict() == {"- 50000": 187_141, "50000+": 12_382}
    assert census_split.test["income"].value_counts().to_dict() == {"- 50000": 93_576, "50000+": 6_186}


def test_census_passes_its_schema_without_the_instance_weight(census_split):
    schema = census.schema()
    assert len(schema.features) == 40 and "instance weight" not in schema.names
    for frame in (census_split.train, census_split.test):
        assert schema.violations(frame) == []
        assert list(frame.columns) == schema.names


def test_census_keeps_question_marks_and_the_na_category(census_split):
    assert (census_split.train["migration code-change in msa"] == "?").any()
    assert (census_split.train["hispanic origin"] == "NA").any()  # a category, not a missing value
    assert not census_split.train.isna().any().any()
