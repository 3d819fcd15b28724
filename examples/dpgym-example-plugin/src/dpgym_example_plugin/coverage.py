"""A metric: how many of the real test split's categories the synthetic rows contain."""

from __future__ import annotations

from dpgym import Direction, MetricContext, MetricResult

DIRECTIONS = {"category_coverage": Direction.HIGHER}


def category_coverage(ctx: MetricContext) -> MetricResult:
    per_column = {}
    for col in ctx.schema.columns:
        if col.is_numeric:
            continue
        real = set(ctx.test[col.name].dropna().astype(str))
        per_column[col.name] = len(real & set(ctx.synthetic[col.name].dropna().astype(str))) / max(len(real), 1)
    value = sum(per_column.values()) / len(per_column) if per_column else float("nan")
    return MetricResult({"category_coverage": value}, {"per_column": per_column})
