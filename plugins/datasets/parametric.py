"""Helpers for datasets that take an argument in their name, e.g. ``lifesci:fold=3``, ``csv:data.csv``
or ``census:undersample=0.4,test=0.2`` (a rebalanced variant, `rebalanceable`).

Such a dataset's spec has a `resolve(argument, plugins)` function that builds the spec of
``NAME:ARGUMENT``; the registry lists the spec under its plain name and asks `resolve` when it
meets a name with a ``:``. Arguments are ``key=value`` pairs joined by ``,`` (`parse_options`); the
csv plugin also takes a leading file path.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np

from dpgym import DatasetSpec, SpecLookup, Split, combined_checksum, split_rows


class DatasetArgumentError(ValueError):
    """A ``NAME:ARGUMENT`` dataset name has an argument its plugin cannot use; the message says which."""


def parse_options(argument: str, allowed: dict[str, Callable[[str], object]], dataset: str) -> dict[str, object]:
    """``"a=1,b=x"`` -> ``{"a": 1, "b": "x"}``, converting each value with `allowed[key]`."""
    options: dict[str, object] = {}
    for item in filter(None, argument.split(",")):
        key, sep, value = item.partition("=")
        if not sep or key not in allowed:
            raise DatasetArgumentError(
                f"{dataset}: cannot use {item!r} (takes {', '.join(f'{k}=...' for k in allowed)})"
            )
        try:
            options[key] = allowed[key](value)
        except ValueError as err:
            raise DatasetArgumentError(f"{dataset}: bad value for {key}: {value!r} ({err})") from None
    return options


def fold_number(folds: int) -> Callable[[str], int]:
    """A converter accepting 1..folds, for ``fold=k`` arguments."""

    def convert(value: str) -> int:
        k = int(value)
        if not 1 <= k <= folds:
            raise ValueError(f"folds are numbered 1..{folds}")
        return k

    return convert


# ---------------------------------------------------------------------------------------------
# Rebalanced variants: NAME:undersample=r[,test=f]
# ---------------------------------------------------------------------------------------------

REBALANCE_SEED = 0  # fixed: a variant is one dataset, the same in every cell


def share(value: str) -> float:
    """A converter accepting a fraction in (0, 1)."""
    number = float(value)
    if not 0 < number < 1:
        raise ValueError("must lie strictly between 0 and 1")
    return number


def rebalance(split: Split, target: str, undersample: float, test: float | None) -> Split:
    """Keep a seeded random `undersample` share of the majority class's training rows; with `test`,
    pool what is left and re-split it (stratified on the target) with that test share, else keep
    the official test part. This is how DP-MERF's tabular code prepares its data (undersampling
    rate and re-split per dataset); DP-HFlow may have reused it, which is not known
    (docs/methods/dp-hflow.md#datasets). The variant is the dataset: the generator's DP guarantee is
    with respect to the training part it receives."""
    rng = np.random.default_rng(REBALANCE_SEED)
    labels = split.train[target]
    majority = np.flatnonzero((labels == labels.value_counts().idxmax()).to_numpy())
    dropped = rng.permutation(majority)[int(len(majority) * undersample):]
    kept = split.train.drop(index=split.train.index[dropped]).reset_index(drop=True)
    if test is None:
        return Split(train=kept, test=split.test)
    return split_rows(kept, test, REBALANCE_SEED, stratify=target, what=f"the rows kept by undersample={undersample!r}")


def rebalanceable(base: DatasetSpec) -> DatasetSpec:
    """`base` listed under its own name, also resolving ``NAME:undersample=r[,test=f]`` to a
    rebalanced variant (see `rebalance`)."""
    return dataclasses.replace(base, resolve=functools.partial(_rebalanced_variant, base))


@functools.cache  # one spec object per variant, so the runner's per-process load cache is hit
def _variant(base: DatasetSpec, undersample: float, test: float | None) -> DatasetSpec:
    # repr: the shortest text that reads back as the same float, so distinct shares never share a name
    argument = f"undersample={undersample!r}" + ("" if test is None else f",test={test!r}")

    def load() -> Split:
        return rebalance(base.load(), base.schema().target, undersample, test)

    held_out = "the official test part" if test is None else f"re-split {1 - test:.0%} / {test:.0%}"
    return dataclasses.replace(
        base, name=f"{base.name}:{argument}", load=load,
        checksum=combined_checksum([base.checksum, f"{argument},seed={REBALANCE_SEED}"]),
        description=f"{base.name}, majority class undersampled to {undersample:.0%} of its training rows; {held_out}",
    )


def _rebalanced_variant(base: DatasetSpec, argument: str, plugins: SpecLookup) -> DatasetSpec:
    options = parse_options(argument, {"undersample": share, "test": share}, base.name)
    if "undersample" not in options:
        raise DatasetArgumentError(f"{base.name}: a variant needs undersample=r (the majority class's kept share)")
    return _variant(base, options["undersample"], options.get("test"))
