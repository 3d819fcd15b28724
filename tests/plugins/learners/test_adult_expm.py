"""The paper's Adult: both files, '?' rows dropped, 102 features from public bounds, stratified split."""

import pytest

from dpgym.plugins.datasets import adult_expm
from dpgym.plugins.learners.features import Design


@pytest.fixture(scope="module")
def three_way():
    return adult_expm.three_way()


def test_pooled_rows_without_missing_values_number_45222(three_way):
    assert sum(len(part) for part in three_way) == 45_222


def test_split_is_stratified_64_16_20(three_way):
    train, dev, test = three_way
    assert (len(train), len(dev), len(test)) == (28_941, 7_236, 9_045)
    rates = [(part["income"] == ">50K").mean() for part in three_way]
    assert max(rates) - min(rates) < 0.002 and abs(rates[0] - 0.2478) < 0.002


def test_design_has_the_papers_102_features_in_unit_range(three_way):
    design = Design(adult_expm.schema())
    x = design.features(three_way[2])
    assert x.shape == (9_045, 102) and x.min() >= 0 and x.max() <= 1


def test_load_trains_on_train_plus_dev():
    split = adult_expm.load()
    assert (len(split.train), len(split.test)) == (36_177, 9_045)
