"""The 2-D sets (DP-NF's and the checkerboard tuning set): 30,000 seeded points inside their
generator-derived bounds, KFold(10) split, the recorded checksum checked on generation."""

from __future__ import annotations

import numpy as np
import pytest

from dpgym import DatasetUnavailable
from dpgym.plugins.datasets import toy2d

NAMES = ["half_moons", "pinwheel", "eight_gaussians", "checkerboard"]


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


def test_checkerboard_fills_the_8_dark_squares_of_a_4_by_4_board_on_minus_4_to_4():
    points = toy2d.checkerboard(0)
    assert (-4 <= points).all() and (points < 4).all()
    cells = np.floor(points / 2).astype(int)  # column and row of the board, -2 … 1
    assert ((cells.sum(axis=1) % 2) == 0).all()  # every point on a dark square
    counts = np.unique(cells, axis=0, return_counts=True)[1]
    assert len(counts) == 8 and np.abs(counts - 3750).max() < 5 * np.sqrt(3750)  # about 3,750 each


def test_checkerboard_is_generated_with_its_recorded_checksum(monkeypatch):
    toy2d.points.cache_clear()
    assert len(toy2d.points("checkerboard")) == 30_000  # the recorded checksum matched
    monkeypatch.setitem(toy2d.CHECKSUMS, "checkerboard", "0" * 64)
    toy2d.points.cache_clear()
    with pytest.raises(DatasetUnavailable, match="checkerboard.*sha256"):
        toy2d.points("checkerboard")
    toy2d.points.cache_clear()


def test_other_folds_by_name(registry):
    fold2 = registry.dataset("pinwheel:fold=2")
    assert fold2.name == "pinwheel:fold=2" and fold2.checksum == registry.dataset("pinwheel").checksum
    assert not fold2.load().test.equals(registry.dataset("pinwheel").load().test)
