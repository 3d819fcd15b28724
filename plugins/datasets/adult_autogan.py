"""UCI Adult as DP-auto-GAN prepares it (Tantipongpipat et al., App. E.1; docs/methods/dp-auto-gan.md#datasets):
the official split, `fnlwgt` and `education` dropped (education-num carries the same levels), and
education-num a 16-level discrete column, one-hot encoded, as in the paper's code. Thirteen columns,
whose mixed-type encoding is the paper's 106 coordinates (the full `adult` schema gives 108, with a
census weight and the education levels twice).

education-num is `ordinal`: the paper's summed diversity skips it (its 8 unordered columns), and
the salary forest reads its codes 0–15 in their order, as the reference code does. The view is
public (which columns, which levels), so it costs no privacy.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from dpgym import Column, ColumnKind, DatasetSpec, Schema, Split, hookimpl
from dpgym.plugins.datasets import adult

DROPPED = ("fnlwgt", "education")
EDUCATION_NUM = "education-num"


@cache
def schema() -> Schema:
    """Adult's public schema without the dropped columns, education-num as 16 ordered levels."""
    def paper_column(column: Column) -> Column:
        if column.name != EDUCATION_NUM:
            return column
        levels = tuple(str(level) for level in range(int(column.min), int(column.max) + 1))
        return replace(column, kind=ColumnKind.ORDINAL, categories=levels, min=None, max=None)

    columns = tuple(paper_column(c) for c in adult.schema().columns if c.name not in DROPPED)
    return replace(adult.schema(), name="adult_autogan", columns=columns)


def load() -> Split:
    frames = (adult._read("adult/adult.data.xz", skiprows=0), adult._read("adult/adult.test.xz", skiprows=1))
    train, test = (schema().conform(frame.drop(columns=list(DROPPED)), source)
                   for frame, source in zip(frames, ("adult.data", "adult.test"), strict=True))
    return Split(train=train, test=test)


SPEC = adult.paper_view(
    "adult_autogan", load, schema, "Tantipongpipat et al., DP-auto-GAN (2021)",
    "dp-auto-gan view: -fnlwgt -education, education-num ordinal",
    "Adult as DP-auto-GAN prepares it: official split, fnlwgt and education dropped, education-num 16 ordered "
    "levels (13 columns, 106 encoded)")


@hookimpl
def dpgym_datasets() -> list[DatasetSpec]:
    return [SPEC]
