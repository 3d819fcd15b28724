"""The DP-NF 2-D sets: 30,000 seeded points inside their generator-derived bounds, KFold(10) split."""

from __future__ import annotations

import numpy as np
import pytest

from dpgym.plugins.datasets import toy2d

NAMES = ["half_moons", "pinwheel", "eight_gaussians"]


@pytest.mark.parametrize("name", NAMES)
def test_set_has_30000_points_split_27000_3000_within_its_schema(registry, name):
    split = registry.dataset(name).load()
    assert (len(split.train), len(split.test)) == (27_000, 3_000)
    assert toy2d.schema(name).violations(split.train) == [] and toy2d.schema(name).violations(split.test) == []


@pytest.mark.parametrize("name", NAMES)
def test_generation_is_seeded(name):
    np.testing.assert_array_equal(toy2d.GENERATORS[name](0), toy2d.GENERATORS[name](0))
    assert not np.array_equal(toy2d.GENERATORS[name](0), toy2d.GENERATORS[name](1))


def test_eight_gaussians_has_3750_points_around_each_centre():
    points = toy2d.eight_gaussians(0)
    offsets = np.array([(0, -2), (-1.414, -1.414), (-2, 0), (-1.414, 1.414), (0, 2), (1.414, 1.414), (2, 0), (1.414, -1.414)])
    nearest = np.argmin(((points[:, None, :] - (3 + offsets)[None]) ** 2).sum(-1), axis=1)
    # neighbouring centres are 1.53 apart (7.7 std), so a handful of points lie nearer the next one
    assert np.abs(np.bincount(nearest, minlength=8) - 3750).max() <= 5


def test_other_folds_by_name(registry):
    fold2 = registry.dataset("pinwheel:fold=2")
    assert fold2.name == "pinwheel:fold=2" and fold2.checksum == registry.dataset("pinwheel").checksum
    assert not fold2.load().test.equals(registry.dataset("pinwheel").load().test)
