"""Running one private-learning cell: fit a learner on the private training split, check its ledger
as for a generator, score the released model by AUC on the real test split, and audit the claim.

Metrics written to ``result.json``:
- ``auc``: test AUC of the ONE released model (what a user would get);
- ``auc_draws_median``: median AUC over `EVALUATION_DRAWS` models from the same fitted mechanism
  (ExpM+NF: flow draws, the paper's statistic; other learners: the released model itself);
- ``audit`` (beside the metrics, not among them): the privacy plausibility audit
  (plugins/learners/audit.py), run where it can bite: ε·n ≤ `AUDIT_MAX_LOG_FACTOR`. The learner is
  refitted on the training rows with labels permuted, and its AUCs there bound what an ε-DP learner
  may reach on the real labels (`dpgym.audit`); a learner may add its own checks with an
  `audit_findings` method. The median permuted-label AUC is kept there as a diagnostic: it has no
  better direction, so nothing ranks it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from dpgym import audit
from dpgym.registry import Provided
from dpgym.schema import Schema
from dpgym.specs import DatasetSpec, Direction, Split

# The directions of the metrics in the module docstring, declared as metric plugins declare theirs.
DIRECTIONS = {"auc": Direction.HIGHER, "auc_draws_median": Direction.HIGHER}
EVALUATION_DRAWS = 1000
AUDIT_MAX_LOG_FACTOR = 50.0  # e^{nε} above e^50 makes the group-privacy bound vacuous for any AUC


def execute_learner(cell: Any, provided: Provided, dataset: DatasetSpec, result: dict[str, Any]) -> dict[str, Any]:
    from dpgym.runner import _load_split, _stage, _timed, check_ledger

    spec = provided.spec
    seeds = result["seeds"]
    split: Split = _timed(result, "load_seconds", "load", lambda: _load_split(dataset.load))
    schema = dataset.schema()
    params = dict(cell.generator.params)
    if "device" in spec.defaults:  # as for generators: the learner gets the device resolved for it
        params["device"] = result["device"]
    learner = _stage("build", lambda: spec.build(params))
    ledger = _timed(result, "fit_seconds", "fit", lambda: learner.fit(split.train.copy(), schema, cell.budget, seeds["fit"]))
    ledger_json = check_ledger(ledger, spec, cell, result)
    y_test = _stage("evaluate", lambda: positive_labels(split.test, schema))
    released = _stage("evaluate", lambda: audit_auc(learner.release(), split.test, y_test))
    draws = _stage("evaluate", lambda: evaluation_aucs(learner, split.test, y_test, seeds["sample"]))
    result["metrics"] = {"auc": released, "auc_draws_median": float(np.median(draws))}
    result["metric_detail"] = {"auc_draws": [float(a) for a in draws]}
    n, epsilon = len(split.train), cell.epsilon
    group = {"delta": ledger.delta, "replace_one": all(e.params.get("adjacency") == "replace_one" for e in ledger.entries)}
    findings, diagnostics = [], {}
    if math.isfinite(epsilon) and spec.guarantee.is_private and n * epsilon <= AUDIT_MAX_LOG_FACTOR:
        permuted = split.train.copy()
        rng = np.random.default_rng(seeds["evaluate"])
        permuted = permuted.reset_index(drop=True)
        permuted[schema.target] = permuted[schema.target].take(rng.permutation(n)).reset_index(drop=True)
        twin = spec.build(cell.generator.params)
        _timed(result, "audit_seconds", "audit", lambda: twin.fit(permuted, schema, cell.budget, seeds["fit"]))
        perm_draws = _stage("audit", lambda: evaluation_aucs(twin, split.test, y_test, seeds["sample"]))
        result["metric_detail"]["auc_permuted_draws"] = [float(a) for a in perm_draws]
        diagnostics["auc_permuted_median"] = float(np.median(perm_draws))
        findings.append(audit.group_privacy(np.array(draws), np.array(perm_draws), epsilon, n, **group))
        extra = getattr(learner, "audit_findings", None)
        if extra is not None:
            findings.extend(_stage("audit", lambda: extra(split, schema, cell.budget, np.array(draws))))
    result["audit"] = {"verdict": audit.combine(findings), "findings": [f.to_dict() for f in findings],
                       "n_rows": n, "log_factor": n * epsilon if math.isfinite(epsilon) else "inf", **group,
                       **diagnostics}
    return ledger_json


def evaluation_aucs(learner: Any, test: pd.DataFrame, y_test: np.ndarray, seed: int) -> list[float]:
    """Test AUC of each model the learner draws for evaluation; none is a fault of the learner (the
    median and the audit would be taken over nothing)."""
    aucs = [audit_auc(m, test, y_test) for m in learner.evaluation_models(EVALUATION_DRAWS, seed)]
    if not aucs:
        raise ValueError("evaluation_models() returned no model")
    return aucs


def positive_labels(frame, schema: Schema) -> np.ndarray:
    """1 where the binary target takes its second category (the positive class), else 0."""
    target = schema.require_binary_target("the private-learning track")
    return (frame[target.name].astype(str) == target.categories[1]).to_numpy().astype(np.float64)


def audit_auc(model: Any, test, y_test: np.ndarray) -> float:
    return float(roc_auc_score(y_test, np.asarray(model.decision_function(test))))
