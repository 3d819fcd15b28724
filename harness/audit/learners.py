"""The private-learning track: what a learner's cell measures, and the plausibility audit of its
claim (`dpgym.engine.cell.run_learner` runs the stages; docs/methods/expm-nf.md#audit). Empirical: the
audit can show a claim impossible, never prove one.

Metrics written to ``result.json``:
- ``auc``: test AUC of the ONE released model (what a user would get);
- ``auc_draws_median``: median AUC over `EVALUATION_DRAWS` models from the same fitted mechanism
  (ExpM+NF: flow draws, the paper's statistic; other learners: the released model itself);
- ``audit`` (beside the metrics, not among them): the privacy plausibility audit, run where it can
  bite (`auditable`). The learner is refitted on the training rows with labels permuted, and its
  AUCs there bound what an ε-DP learner may reach on the real labels (`group_privacy`); a learner
  whose spec declares `Capability.AUDIT_FINDINGS` adds its own checks (e.g. the exact-ExpM bound
  of `dpgym.plugins.learners.expm_nf_lr.audit`), returning the same `Finding`s. The median
  permuted-label AUC is kept there as a diagnostic: it has no better direction, so nothing ranks it.

**Group-privacy check** (any ε-DP learner). Labels permuted make a dataset D' at replace-distance
≤ n from D, so P[M(D) ∈ A] ≤ e^{nε}·P[M(D') ∈ A] for every event A (under add/remove adjacency
the distance is 2n, and a δ adds k·e^{(k−1)ε}·δ for a group of k). With A = "test AUC ≥ t" at
t = the median AUC on real labels, P_real(A) ≥ 1/2; a Clopper–Pearson upper bound on P_perm(A)
times e^{nε} below the lower bound on P_real(A) is impossible for a true ε-DP learner.

Verdicts: ``implausible`` (a check fires), ``consistent`` (a check could have fired and did not),
``vacuous`` (it could not have fired: the bound is too loose at this ε·n, or too few models were
drawn to show even perfect separation), ``not_audited``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from dpgym.audit.statistics import clopper_pearson
from dpgym.schema import Schema
from dpgym.specs import Direction

# The directions of the metrics in the module docstring, declared as metric plugins declare theirs.
DIRECTIONS = {"auc": Direction.HIGHER, "auc_draws_median": Direction.HIGHER}
# The value the private learners are ranked on among themselves.
RANKED_VALUE = "auc"
EVALUATION_DRAWS = 1000
AUDIT_MAX_LOG_FACTOR = 50.0  # e^{nε} above e^50 makes the group-privacy bound vacuous for any AUC


def auditable(spec: Any, epsilon: float, n: int) -> bool:
    """Whether the permuted-label audit can say anything: a private learner at a finite ε with
    ε·n ≤ `AUDIT_MAX_LOG_FACTOR`."""
    return math.isfinite(epsilon) and spec.guarantee.is_private and n * epsilon <= AUDIT_MAX_LOG_FACTOR


def permuted_labels(train: pd.DataFrame, schema: Schema, seed: int) -> pd.DataFrame:
    """The training rows with the target column randomly permuted (`seed`): a table on which no
    model can learn the real labels."""
    rng = np.random.default_rng(seed)
    permuted = train.copy().reset_index(drop=True)
    permuted[schema.target] = permuted[schema.target].take(rng.permutation(len(train))).reset_index(drop=True)
    return permuted


def evaluation_aucs(learner: Any, test: pd.DataFrame, y_test: np.ndarray, seed: int) -> list[float]:
    """Test AUC of each model the learner draws for evaluation; none is a fault of the learner (the
    median and the audit would be taken over nothing)."""
    aucs = [audit_auc(m, test, y_test) for m in learner.evaluation_models(EVALUATION_DRAWS, seed)]
    if not aucs:
        raise ValueError("evaluation_models() returned no model")
    return aucs


def positive_labels(frame: pd.DataFrame, schema: Schema) -> np.ndarray:
    """1 where the binary target takes its second category (the positive class), else 0."""
    target = schema.require_binary_target("the private-learning track")
    return (frame[target.name].astype(str) == target.categories[1]).to_numpy().astype(np.float64)


def audit_auc(model: Any, test: pd.DataFrame, y_test: np.ndarray) -> float:
    return float(roc_auc_score(y_test, np.asarray(model.decision_function(test))))


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
