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
- ``tvd_2way`` / ``tvd_3way``: mean over every pair / every triple of columns of the
  total-variation distance between the real-train and synthetic joint histograms (each normalised
  to sum to 1) on the bins of ``marginal_tvd``, whose 1-way analogue it is. Above ``MAX_TRIPLES``
  (2,000) triples, ``tvd_3way`` averages over a uniform sample of that many, drawn with the context
  seed (the same triples for every generator at a seed); ``detail["tvd_3way_triples"]`` says how
  many were scored of how many. Over all triples, twice ``tvd_3way`` is the AIM paper's workload
  error for the 3-way workload (McKenna et al. 2022: mean L1 distance between normalised
  marginals), on these bins (docs/methods/aim-mst.md#evaluation).

Bins come from the public schema, never from the real rows, so the histograms of real and
synthetic data are comparable without tuning to either. The k-way counts are one ``np.bincount``
per column subset over the mixed-radix index of its cells. sdmetrics' ContingencySimilarity
(1 − TVD) covers pairs only and bins numeric columns on the real rows, so it is not used.
"""

from __future__ import annotations

from dpgym import Deferred, Direction, MetricSpec, hookimpl

SPEC_VERSION = "2"
VALUES = ("marginal_tvd", "marginal_ks", "kendall_rmse", "kendall_mae", "tvd_2way", "tvd_3way")


SPEC = MetricSpec(
    name="fidelity",
    version=SPEC_VERSION,
    evaluate=Deferred("dpgym.plugins.metrics.fidelity.compute:evaluate"),
    directions={name: Direction.LOWER for name in VALUES},
    description=(
        "Marginal total-variation distance and KS statistic on public bins, mean 2-way and 3-way "
        "marginal total-variation distance on the same bins (≤ 2,000 seeded triples), and RMSE/MAE "
        "between the real-train and synthetic Kendall τ matrices (subsampled to 50k rows)."
    ),
    default=True,
    ranked_value="tvd_2way",
)


@hookimpl
def dpgym_metrics() -> list[MetricSpec]:
    return [SPEC]
