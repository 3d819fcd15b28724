"""Privacy plausibility audit of a learner's reported accuracy, generic part
(docs/methods/expm-nf.md#audit). Empirical: it can show a claim impossible, never prove one.

**Group-privacy check** (any ε-DP learner). Labels permuted make a dataset D' at replace-distance
≤ n from D, so P[M(D) ∈ A] ≤ e^{nε}·P[M(D') ∈ A] for every event A (under add/remove adjacency
the distance is 2n, and a δ adds k·e^{(k−1)ε}·δ for a group of k). With A = "test AUC ≥ t" at
t = the median AUC on real labels, P_real(A) ≥ 1/2; a Clopper–Pearson upper bound on P_perm(A)
times e^{nε} below the lower bound on P_real(A) is impossible for a true ε-DP learner.

Learner-specific checks (e.g. the exact-ExpM bound in plugins/learners/audit.py) return the same
`Finding`s. Verdicts: ``implausible`` (a check fires), ``consistent`` (a check could have fired and
did not), ``vacuous`` (it could not have fired: the bound is too loose at this ε·n, or too few models
were drawn to show even perfect separation), ``not_audited``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import beta as beta_dist

CONFIDENCE = 0.95
VERDICT_ORDER = ("implausible", "consistent", "vacuous", "not_audited")


@dataclass(frozen=True)
class Finding:
    check: str
    verdict: str
    threshold_auc: float
    bound: float  # the largest P(AUC ≥ threshold) the check allows (upper confidence)
    observed: float  # lower confidence bound on P_real(AUC ≥ threshold)
    detail: str

    def to_dict(self) -> dict:
        return asdict(self)


def clopper_pearson(hits: Any, trials: Any, confidence: float = CONFIDENCE) -> tuple[Any, Any]:
    """Two-sided exact binomial interval for a proportion: floats, or arrays for arrays of counts
    (the empirical audit bounds every threshold of a test at once)."""
    hits, trials = np.asarray(hits), np.asarray(trials)
    alpha = 1 - confidence
    with np.errstate(invalid="ignore"):  # the parameters are 0 exactly where np.where replaces the value
        lo = np.where(hits == 0, 0.0, beta_dist.ppf(alpha / 2, hits, trials - hits + 1))
        hi = np.where(hits == trials, 1.0, beta_dist.ppf(1 - alpha / 2, hits + 1, trials - hits))
    return (float(lo), float(hi)) if lo.ndim == 0 else (lo, hi)


def group_privacy(real_aucs: np.ndarray, permuted_aucs: np.ndarray, epsilon: float, n: int, delta: float = 0.0,
                  replace_one: bool = True) -> Finding:
    """Check 1: real-label AUCs against permuted-label AUCs of the same learner at the same ε.

    Permuting labels changes up to n rows: a group of k = n replace-one neighbours, or k = 2n under
    add/remove adjacency (DP-SGD's). An (ε, δ) guarantee allows e^{kε}·P + k·e^{(k−1)ε}·δ."""
    real, perm = np.asarray(real_aucs, float), np.asarray(permuted_aucs, float)
    t = float(np.median(real))
    observed, _ = clopper_pearson(int((real >= t).sum()), len(real))
    _, p_perm = clopper_pearson(int((perm >= t).sum()), len(perm))
    group = n if replace_one else 2 * n
    log_factor = group * epsilon
    slack = math.log(group) + (group - 1) * epsilon + math.log(delta) if delta > 0 else -math.inf

    def allowed(p: float) -> float:  # the largest P_real a guarantee allows given P_perm ≤ p
        return math.exp(min(np.logaddexp(log_factor + math.log(max(p, 1e-300)), slack), 0.0))

    bound = allowed(p_perm)
    # With few models even perfect separation (every real AUC at the threshold, no permuted one)
    # cannot beat the bound: one model per fit, as DP-SGD releases, needs ~15 seeds. Such a check
    # could not have fired, so passing it says nothing ("consistent" would claim it did).
    can_fire = clopper_pearson(len(real), len(real))[0] > allowed(clopper_pearson(0, len(perm))[1])
    if bound >= 1.0 or log_factor > 700 or not can_fire:
        verdict = "vacuous"
    else:
        verdict = "implausible" if observed > bound else "consistent"
    allowance = f"e^(kε) = e^{log_factor:.3g}" + (f" plus k·e^((k−1)ε)·δ, δ = {delta:g}" if delta > 0 else "")
    power = "" if can_fire else (f"; with {len(real)} real and {len(perm)} permuted-label models not even "
                                 "perfect separation could fire the check")
    return Finding("group_privacy", verdict, t, bound, observed,
                   f"k = {group} ({'replace-one' if replace_one else 'add/remove'}); {allowance}; "
                   f"P_perm(AUC ≥ {t:.3f}) ≤ {p_perm:.3g} over {len(perm)} permuted-label models; "
                   f"P_real ≥ {observed:.3g} over {len(real)}{power}")


def combine(findings: list[Finding]) -> str:
    """The cell's verdict: the most severe finding (implausible > consistent > vacuous)."""
    if not findings:
        return "not_audited"
    return min((f.verdict for f in findings), key=VERDICT_ORDER.index)
