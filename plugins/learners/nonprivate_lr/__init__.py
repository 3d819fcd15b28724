"""`nonprivate_lr`: the non-private Adult LR baseline (BCE or ℓ2), full-batch L-BFGS.

The track's denominator is the better median of the BCE and ℓ2 runs
(docs/methods/expm-nf.md#non-private-baseline).

Defaults and where they come from ("tuned on" marks a value chosen from rows that a suite scores):
- loss "bce": one of the paper's two losses (paper-expm-nf runs both); why BCE is the default: not recorded.
- weight_decay 1e-6, iterations 100 (L-BFGS): not recorded. The paper trains its baseline with RMSProp and a
  plateau scheduler, so it offers no value for either.
"""

from __future__ import annotations

from dpgym import Deferred, Guarantee, LearnerSpec, hookimpl


SPEC = LearnerSpec(
    name="nonprivate_lr",
    version="1",
    factory=Deferred("dpgym.plugins.learners.nonprivate_lr.model:NonPrivateLR"),
    guarantee=Guarantee.NONE,
    defaults={"loss": "bce", "weight_decay": 1e-6, "iterations": 100},
    description="non-private logistic regression (BCE or ℓ2), the private-learning baseline",
)


@hookimpl
def dpgym_learners() -> list[LearnerSpec]:
    return [SPEC]
