"""`split_rows`: a dataset's seeded split, refusing rows too few to split with how many it needs."""

from __future__ import annotations

import pandas as pd
import pytest

from dpgym import SplitError, split_rows
from dpgym.data.splits import rows_needed


def labelled(counts: dict[str, int]) -> pd.DataFrame:
    return pd.DataFrame({"y": [label for label, n in counts.items() for _ in range(n)]})


def test_rows_needed_leaves_each_part_a_row_of_every_class():
    assert rows_needed(0.2) == 2
    assert rows_needed(0.2, classes=2) == 6  # ceil(0.2 · 6) = 2 test rows, 4 training rows
    assert rows_needed(0.5, classes=3) == 6


def test_one_row_is_refused_naming_the_rows_the_split_needs():
    with pytest.raises(SplitError, match="people.csv: 1 row cannot be split .* needs at least 2 rows"):
        split_rows(labelled({"a": 1}), 0.2, 0, what="people.csv")


def test_a_stratified_split_refuses_a_class_of_one_row_naming_it():
    with pytest.raises(SplitError, match="stratified on 'y' needs at least 2 rows of each class.*'rare' \\(1 row\\)"):
        split_rows(labelled({"common": 40, "rare": 1}), 0.2, 0, stratify="y")


def test_a_stratified_split_refuses_too_few_rows_for_its_classes():
    with pytest.raises(SplitError, match="its 3 classes in both parts.* needs at least 11 rows, not 6"):
        split_rows(labelled({"a": 2, "b": 2, "c": 2}), 0.2, 0, stratify="y")


def test_a_split_is_scikit_learns_seeded_split():
    from sklearn.model_selection import train_test_split

    rows = labelled({"a": 30, "b": 20}).assign(i=range(50))
    split = split_rows(rows, 0.2, 3, stratify="y")
    train, test = train_test_split(rows, test_size=0.2, stratify=rows.y, random_state=3)
    assert split.train.i.tolist() == train.i.tolist() and split.test.i.tolist() == test.i.tolist()
