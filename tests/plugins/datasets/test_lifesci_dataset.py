"""lifesci: dp-flows' ten folds, the labels joined from lifesci.csv, the unit-ball bounds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpgym.registry import PluginError
from dpgym.plugins.datasets import lifesci


def test_fold_one_is_the_plain_dataset(registry):
    split = registry.dataset("lifesci").load()
    assert (len(split.train), len(split.test)) == (24_060, 2_673)
    assert lifesci.schema().violations(split.train) == [] and lifesci.schema().violations(split.test) == []


def test_the_ten_test_folds_partition_all_rows_with_the_published_labels():
    tests = [lifesci.load_fold(k).test for k in range(1, 11)]
    everything = pd.concat(tests)
    assert len(everything) == 26_733
    assert everything["label"].value_counts().to_dict() == {"0": 25_929, "1": 804}
    assert sorted(len(t) for t in tests) == [2673] * 7 + [2674] * 3
    for k in (1, 5, 10):
        split = lifesci.load_fold(k)
        assert len(split.train) + len(split.test) == 26_733


def test_rows_lie_in_the_unit_ball():
    rows = lifesci.load_fold(1).train
    features = rows[[c.name for c in lifesci.schema().features]].to_numpy()
    assert np.linalg.norm(features, axis=1).max() <= 1 + 1e-12


def test_a_fold_is_picked_by_name(registry):
    spec = registry.dataset("lifesci:fold=3")
    assert spec.name == "lifesci:fold=3"
    pd.testing.assert_frame_equal(spec.load().test, lifesci.load_fold(3).test)
    assert not spec.load().test.equals(registry.dataset("lifesci").load().test)


@pytest.mark.parametrize("name", ["lifesci:fold=0", "lifesci:fold=11", "lifesci:fold=x", "lifesci:k=2"])
def test_a_bad_fold_is_a_plugin_error_naming_it(registry, name):
    with pytest.raises(PluginError, match="lifesci"):
        registry.dataset(name)


def test_the_licence_caveat_travels_with_the_spec():
    assert "none stated" in lifesci.spec().license
