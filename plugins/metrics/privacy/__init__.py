"""Empirical privacy-risk indicators: how much the synthetic rows give away about the training rows,
measured by distances, a membership-inference attack and exact copies.

These are empirical risk indicators, not differential-privacy guarantees. A DP generator's
guarantee is its ledger, checked by re-accounting (docs/privacy.md); these numbers measure what
particular tests find in one synthetic table. A low risk reading does not make a non-private
generator private (a stronger attack may succeed where these fail), and a DP generator may show
some signal at a large ε. They need no DP generator: `real` and `uniform` are scored too, as the two
ends of the scale.

Rows are compared in a space built from the public schema alone, never from the rows: numeric
columns scaled by their public bounds to [0, 1] (`dpgym.TableEncoder`), heavy-tailed ones on the
log1p(x − min) scale dpgym's generators use, discrete columns one-hot with each slot scaled by 1/√2,
so that a category mismatch is as far (1) as the two ends of a numeric range. A missing value is
one more category; in a nullable numeric column it also sits at the low end of the range, so missing
against present costs between 1 and √2. Euclidean distance, rounded to 1e-6.

The test split is shuffled with the cell's seed and cut in two: the holdout (half of it, at most
5,000 rows) and the attacker's reference (the rest, at most 5,000 rows). The training rows are
subsampled to the holdout's size, so that both sets the synthetic rows are compared with are
equally large; otherwise the larger would look closer by its size alone.

Values:
- ``dcr_share`` (lower is less risk): distance to closest record. For each of at most 5,000
  synthetic rows (a seeded subsample), its distance to the nearest training member and to the
  nearest holdout row; the share strictly closer to the training members, ties counted half. 0.5:
  the synthetic rows are no closer to the rows they were fitted on than to unseen rows of the same
  population. Only copies of the subsampled members can show: a generator that releases its training
  rows scores about 0.5 + members / (2 · training rows), not 1: 0.58 on Adult, 0.51 on Census
  (5,000 members of 199,523 rows), where the exact-match rate is the telling value.
- ``dcr_ratio`` (higher is less risk): median distance to the training members over median
  distance to the holdout; 1 is no more than chance. NaN when the holdout median is 0.
- ``mia_auc`` (lower is less risk): ROC AUC of a membership-inference attack in the style of DOMIAS
  (van Breugel et al., 2023). The attacker holds the synthetic rows (all of them, up to 40,000) and
  the reference sample from the population, and scores a record x by the density ratio
  p_synthetic(x) / p_reference(x): a generator that overfits puts more mass at its training rows
  than the population has. Both densities are k-NN estimates (k = 1) in the space above,
  p̂(x) ∝ 1 / (n · r(x)^d), r the distance to the nearest row. Why not a Gaussian KDE or a mixture:
  the overfitting DOMIAS looks for is local, at single records, and a kernel wide enough to be
  estimated in Adult's 110 dimensions or a mixture with a fixed number of components smooths it
  away (measured on `real`, Adult: KDE AUC 0.61 at bandwidth 0.03 against 0.81 for the k-NN
  ratio), and an exact KDE over 32,561 synthetic rows costs about 20 s of CPU, the k-NN ratio 3 s.
  Members are the subsampled training rows, non-members the holdout; 0.5 is no signal.
- ``exact_match_rate`` (lower is less risk): share of all synthetic rows equal on every column to
  some training row: category by category, integers exactly, a continuous column with a public
  ``step`` by its grid index, other continuous values exactly, missing matching missing.
- ``exact_match_rate_holdout`` (lower is less risk): the same share against the test split's rows,
  for reference: rows common in the population are matched by chance. It is a baseline, not a risk
  of its own; the detail gives the training share with the training rows cut to the test split's
  size, its fair partner.

dpgym's `Direction` has no "closest to a midpoint": ``dcr_share`` and ``mia_auc`` are declared
lower-is-better and ``dcr_ratio`` higher-is-better, the directions of less risk. A value below 0.5
(above 1 for the ratio) is not "more private" than 0.5: it is noise, or a synthetic table closer to
the test rows than to the training rows by distribution shift between the splits.

Cost on Adult (32,561 training and 16,281 test rows): 3.3–3.7 s of CPU on one thread, most of it the
attack's neighbour search (docs/privacy.md#empirical-privacy-risk-indicators); on Census (512
encoded dimensions against Adult's 110) 14 s.
"""

from __future__ import annotations

from dpgym import Deferred, Direction, MetricSpec, hookimpl

SPEC_VERSION = "1"


SPEC = MetricSpec(
    name="privacy",
    version=SPEC_VERSION,
    evaluate=Deferred("dpgym.plugins.metrics.privacy.compute:evaluate"),
    directions={
        "dcr_share": Direction.LOWER,
        "dcr_ratio": Direction.HIGHER,
        "mia_auc": Direction.LOWER,
        "exact_match_rate": Direction.LOWER,
        "exact_match_rate_holdout": Direction.LOWER,
    },
    description=(
        "Empirical privacy-risk indicators, not DP guarantees: distance to closest record (train against "
        "holdout), a DOMIAS-style density-ratio membership-inference AUC, and exact copies of training rows."
    ),
    default=True,
)


@hookimpl
def dpgym_metrics() -> list[MetricSpec]:
    return [SPEC]
