"""Density-estimation metrics of DP-NF (docs/methods/dp-nf.md#metrics): held-out log-likelihood and
anomaly detection by likelihood threshold, for generators whose spec declares `Capability.LOG_PROB`
(they reach a metric as `MetricContext.density`; log-density of the numeric columns, nats per row,
in the data's own scale).

Values (omitted, not NaN, for generators without ``log_prob``; the detail says why):
- ``heldout_loglik``: mean log p(x) over the real test rows in the dataset's own scale. For Life
  Science that is DP-EM's max-norm space, the scale of DP-NF's Figure 1
  (docs/methods/dp-nf.md#working-space).
- ``heldout_loglik_zscored``: the same density after z-scoring each numeric column with the
  training fold's mean and std (log p_Z = log p_X + Σ log std_j), the scale DP-NF reports for the
  2-D sets, Power and Gowalla. The sum runs over the columns the
  log_prob is a density over: a generator whose log_prob is a probability mass in some numeric
  columns (DP-HFlow's dequantized integers) names the others in ``density_columns``; by default
  every numeric column. A column without spread in the training fold is left in its own scale
  (scale 1, as scikit-learn's StandardScaler has it), where log std would be −∞. A row missing a
  value (a nullable column) adds no log std for it: its log_prob has no density there.
- ``anomaly_auc``: ROC AUC of log p(x) separating the test rows from as many tail-box anomalies
  (DP-NF §5): each coordinate uniform in the test set's [5, 30] or [70, 95] percentile band,
  the band picked with probability ½ per anomaly and dimension. Omitted on a dataset without
  numeric columns, where no anomaly can be drawn (the held-out values are still given).

A second metric, ``dp_ad``, is the paper's private anomaly detector (Algorithm 2): k
non-private density models on a seeded random partition of the training rows vote whether
log p_j(x) > τ, and the Exponential Mechanism (utility = votes, sensitivity 1) answers "in" with
probability sigmoid(ε(2c − k)/2), so each answer is ε-DP. Its values
``dp_ad_{family}_accuracy_eps{ε}`` are the exact expected accuracy on the test rows and as many
tail-box anomalies, for a grid of per-query ε, per model family (option ``families``): "mog"
(3-component Gaussian mixtures) and "nf" (the MAF of DP-NF, 5 blocks, fitted by maximum likelihood
without noise for ``flow_steps`` Adam steps, 2,000 by default: 1,000 left it under-fitted on
Half-Moons). Both families vote on the same partition; each has the τ that maximises its own
non-private majority vote, as the paper tunes each family's τ (non-private tuning, like the paper).
It does not look at the generator: the detector is trained on the real rows, so it is one reference
curve per dataset and split. It models the numeric columns z-scored by the training fold (a column
without spread left unscaled, a missing value imputed with the training mean); a dataset without
numeric columns gets no ``dp_ad`` values. A flow ensemble costs about 3 minutes of CPU on a 2-D
set, so the default is "mog" alone; ``paper-dp-nf-ad.toml`` runs both (spec R10: NF ≥ MoG on
Half-Moons).

The metric sees real train and test rows (evaluation is not private); the generator only answers
log_prob queries, which is post-processing of its released model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpgym import Deferred, Direction, MetricSpec, hookimpl

DP_AD_EPSILONS = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0)
DP_AD_FAMILIES = ("mog", "nf")


DP_AD_OPTIONS = {"families": ["mog"], "flow_steps": 2000}


def check_dp_ad_options(options: Mapping[str, Any]) -> None:
    families = options["families"]
    if not isinstance(families, list | tuple) or not families or set(families) - set(DP_AD_FAMILIES):
        raise ValueError(f"'families' must be a non-empty list from {list(DP_AD_FAMILIES)}, got {families!r}")
    if not isinstance(options["flow_steps"], int) or options["flow_steps"] < 1:
        raise ValueError(f"'flow_steps' must be a positive integer, got {options['flow_steps']!r}")


DP_AD_SPEC = MetricSpec(
    name="dp_ad",
    version="2",
    evaluate=Deferred("dpgym.plugins.metrics.density.compute:evaluate_dp_ad"),
    directions={f"dp_ad_{family}_accuracy_eps{eps:g}": Direction.HIGHER
                for family in DP_AD_FAMILIES for eps in DP_AD_EPSILONS},
    description="DP-NF Algorithm 2: sample-and-aggregate ensemble (MoG, optionally NF) + Exponential Mechanism, "
                "expected accuracy per ε (generator-independent)",
    depends_on_generator=False,
    options=DP_AD_OPTIONS,
    validate_options=check_dp_ad_options,
)

SPEC = MetricSpec(
    name="density",
    version="3",
    evaluate=Deferred("dpgym.plugins.metrics.density.compute:evaluate"),
    directions={"heldout_loglik": Direction.HIGHER, "heldout_loglik_zscored": Direction.HIGHER,
                "anomaly_auc": Direction.HIGHER},
    description="held-out log-likelihood (data and z-scored scale) and tail-box anomaly ROC AUC, for generators with log_prob",
    requires_log_prob=True,
)


@hookimpl
def dpgym_metrics() -> list[MetricSpec]:
    return [SPEC, DP_AD_SPEC]
