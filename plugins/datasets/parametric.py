"""Dataset specs that take an argument in their name, e.g. ``lifesci:fold=3`` or ``csv:data.csv``.

A `ParametricDatasetSpec` is an ordinary `DatasetSpec` (the registry lists it under its plain name,
``lifesci`` or ``csv``) that also knows how to build the spec for ``NAME:ARGUMENT``. The registry
asks it through `resolve` when it meets a name with a ``:``. Arguments are ``key=value`` pairs
joined by ``,`` (`parse_options`); the csv plugin also takes a leading file path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness import DatasetSpec


class DatasetArgumentError(ValueError):
    """A ``NAME:ARGUMENT`` dataset name has an argument its plugin cannot use; the message says which."""


@dataclass(frozen=True)
class ParametricDatasetSpec(DatasetSpec):
    # Builds the spec of "name:argument" from "argument"; raises DatasetArgumentError on a bad one.
    resolve: Callable[[str], DatasetSpec] | None = None


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
