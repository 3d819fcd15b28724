"""Learners with a fault after their fit, to check that it fails their cell and not the run."""

from __future__ import annotations

from dpgym import Guarantee, LaplaceEvent, LearnerSpec, Ledger, hookimpl
from dpgym.plugins.learners.nonprivate_lr.model import NonPrivateLR


class ClaimsLaplace(NonPrivateLR):
    """A plausible ledger (one Laplace release) over the exact fit, so only the fault stops the cell."""

    def fit(self, train, schema, budget, seed):
        super().fit(train, schema, budget, seed)
        ledger = Ledger(Guarantee.PURE)
        ledger.record(LaplaceEvent(l1_sensitivity=1.0, scale=1.0 / budget.epsilon), accountant="basic")
        return ledger


class NoModels(ClaimsLaplace):
    def evaluation_models(self, k, seed):
        return []


class TwinFails(ClaimsLaplace):
    """Its evaluation raises on every second fit: the audit's permuted-label twin."""

    fits = 0

    def fit(self, train, schema, budget, seed):
        type(self).fits += 1
        self.twin = type(self).fits % 2 == 0
        return super().fit(train, schema, budget, seed)

    def evaluation_models(self, k, seed):
        if self.twin:
            raise RuntimeError("evaluation of the permuted-label twin broke")
        return super().evaluation_models(k, seed)


@hookimpl
def dpgym_learners() -> list[LearnerSpec]:
    return [LearnerSpec(name, "1", factory, Guarantee.PURE) for name, factory in
            (("no_models", NoModels), ("twin_fails", TwinFails))]
