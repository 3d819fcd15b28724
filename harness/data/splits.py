"""Datasets' fixed splits: made once by a dataset plugin (`split_rows`, refusing rows too few to split),
and loaded once per process: by the driver's checks before a run, by the cells a serial run runs in
the driver, by the report's figures, and by each worker (warmed in its server)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from functools import cache

import pandas as pd

from dpgym.specs import Split


class SplitError(ValueError):
    """Rows too few to split into a training and a test part (or, stratified, a class too small to be in
    both); the message says how many rows the split needs."""


@cache
def load_split(load: Callable[[], Split]) -> Split:
    """Each dataset is loaded once per process and shared by its users (read-only)."""
    return load()


def rows_needed(test_fraction: float, classes: int = 1) -> int:
    """The fewest rows whose split by `test_fraction` leaves `classes` rows in each part (a stratified
    split puts every class in both): scikit-learn's `train_test_split` puts ceil(fraction · n) rows in
    the test part."""
    return next(n for n in itertools.count(2 * classes)
                if min(math.ceil(test_fraction * n), n - math.ceil(test_fraction * n)) >= classes)


def split_rows(rows: pd.DataFrame, test_fraction: float, seed: int, stratify: str | None = None,
               what: str = "the rows") -> Split:
    """A seeded random split of `rows` (scikit-learn's `train_test_split`), stratified on the column
    `stratify` when given; rows too few for it are a `SplitError` naming how many it needs, raised
    before scikit-learn's own error, which names neither the file nor the remedy."""
    from sklearn.model_selection import train_test_split  # here, not at the top: `dpgym list` imports plugins

    need = rows_needed(test_fraction)
    if len(rows) < need:
        raise SplitError(f"{what}: {len(rows)} row{'s' if len(rows) != 1 else ''} cannot be split with a test share "
                         f"of {test_fraction:g}: the split needs at least {need} rows (one in each part)")
    labels = None
    if stratify is not None:
        labels = rows[stratify]
        counts = labels.value_counts(dropna=False)
        small = counts[counts < 2]
        if len(small):
            listed = ", ".join(f"{value!r} ({count} row)" for value, count in small.items())
            raise SplitError(f"{what}: a split stratified on {stratify!r} needs at least 2 rows of each class "
                             f"(one in each part); {listed} has fewer")
        needed = rows_needed(test_fraction, len(counts))
        if len(rows) < needed:
            raise SplitError(f"{what}: a split stratified on {stratify!r} puts each of its {len(counts)} classes in "
                             f"both parts, so with a test share of {test_fraction:g} it needs at least {needed} rows, "
                             f"not {len(rows)}")
    train, test = train_test_split(rows, test_size=test_fraction, stratify=labels, random_state=seed)
    return Split(train=train.reset_index(drop=True), test=test.reset_index(drop=True))
