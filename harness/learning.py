"""What a private-learning cell measures, and the audit of its claim (`dpgym.cell.run_learner`
runs the stages).

Metrics written to ``result.json``:
- ``auc``: test AUC of the ONE released model (what a user would get);
- ``auc_draws_median``: median AUC over `EVALUATION_DRAWS` models from the same fitted mechanism
  (ExpM+NF: flow draws, the paper's statistic; other learners: the released model itself);
- ``audit`` (beside the metrics, not among them): the privacy plausibility audit
  (plugins/learners/audit.py), run where it can bite (`auditable`). The learner is refitted on the
  training rows with labels permuted, and its AUCs there bound what an ε-DP learner may reach on
  the real labels (`dpgym.audit`); a learner whose spec declares `Capability.AUDIT_FINDINGS` adds
  its own checks. The median permuted-label AUC is kept there as a diagnostic: it has no better
  direction, so nothing ranks it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from dpgym.schema import Schema
from dpgym.specs import Direction

# The directions of the metrics in the module docstring, declared as metric plugins declare theirs.
DIRECTIONS = {"auc": Direction.HIGHER, "auc_draws_median": Direction.HIGHER}
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
