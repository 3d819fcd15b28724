"""randhie: the RAND HIE person-years, split by person, with the four-level health target."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpgym.plugins.datasets import randhie


def test_persons_split_80_20_and_every_row_fits_the_schema(registry):
    split = registry.dataset("randhie").load()
    assert (len(split.train), len(split.test)) == (16_172, 4_018)
    assert randhie.schema().violations(split.train) == [] and randhie.schema().violations(split.test) == []


def test_health_is_the_files_dummies_with_excellent_omitted():
    dummies = pd.DataFrame({"hlthg": [0, 1, 0, 0], "hlthf": [0, 0, 1, 0], "hlthp": [0, 0, 0, 1]})
    assert randhie._health(dummies).tolist() == ["excellent", "good", "fair", "poor"]


def test_no_person_is_on_both_sides_of_the_split():
    persons = randhie.read()["zper"]
    train, test = randhie.person_split(persons)
    assert len(train) + len(test) == len(persons) == 20_190
    assert set(persons.iloc[train]).isdisjoint(persons.iloc[test])


def test_every_value_of_a_stepped_column_lies_on_its_grid():
    rows = randhie.read()
    stepped = [c for c in randhie.schema().columns if c.step is not None]
    assert [c.name for c in stepped] == ["ghindx", "mdeoff", "pioff"]
    for c in stepped:
        cells = (rows[c.name].dropna() - c.min) / c.step
        assert np.allclose(cells, cells.round(), rtol=0, atol=1e-6), c.name


def test_steps_none_is_the_same_rows_without_the_step_grids(registry):
    variant = registry.dataset("randhie:steps=none")
    assert variant.name == "randhie:steps=none"
    assert all(c.step is None for c in variant.schema().columns)
    assert [c.name for c in variant.schema().columns] == randhie.schema().names
    pd.testing.assert_frame_equal(variant.load().train, registry.dataset("randhie").load().train)
