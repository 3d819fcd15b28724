"""Fidelity: how closely synthetic marginals and pairwise rank dependence match the real training rows.

Values (all lower is better):
- ``marginal_tvd``: mean over all columns of the total-variation distance between the real-train
  and synthetic marginal. Discrete columns use their schema categories; numeric columns use
  ``TVD_BINS`` equal-width bins over the schema's public bounds, except integer columns spanning
  at most ``EXACT_INTEGER_VALUES`` values, which get one bin per value. A missing value is a bin.
- ``marginal_ks``: mean two-sample Kolmogorov–Smirnov statistic over numeric columns (NaN if the
  schema has none).
- ``kendall_rmse`` / ``kendall_mae``: root-mean-square and mean absolute difference between the
  real and synthetic Kendall τ-b matrices over all columns, off-diagonal upper triangle
  (docs/methods/dp-hflow.md#evaluation). Discrete columns enter by their schema category codes, so nominal
  columns get the schema's (data-independent) order.

Bins come from the public schema, never from the real rows, so the histograms of real and
synthetic data are comparable without tuning to either.
"""

from __future__ import annotations

from dpgym import Deferred, Direction, MetricSpec, hookimpl

SPEC_VERSION = "1"


SPEC = MetricSpec(
    name="fidelity",
    version=SPEC_VERSION,
    evaluate=Deferred("dpgym.plugins.metrics.fidelity.compute:evaluate"),
    directions={name: Direction.LOWER for name in ("marginal_tvd", "marginal_ks", "kendall_rmse", "kendall_mae")},
    description=(
        "Marginal total-variation distance and KS statistic on public bins, and RMSE/MAE between the "
        "real-train and synthetic Kendall τ matrices (subsampled to 50k rows)."
    ),
    default=True,
    ranked_value="marginal_tvd",
)


@hookimpl
def dpgym_metrics() -> list[MetricSpec]:
    return [SPEC]
