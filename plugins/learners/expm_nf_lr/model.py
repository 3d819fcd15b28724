"""The code of `dpgym.plugins.learners.expm_nf_lr`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.learners.expm_nf_lr`, which holds the spec."""

from __future__ import annotations


import numpy as np
import pandas as pd
import torch

from dpgym import Adjacency, Budget, ExponentialEvent, Guarantee, Ledger, Schema
from dpgym.plugins.learners.features import Design
from dpgym.plugins.learners.logistic import LogisticModel, summed_l2
from dpgym.plugins.nn.param_flows import LAYERS, Affine, ParameterFlow

MODES = ("paper", "proper")
AUDIT_DIRECTIONS = 50_000  # random directions estimating the base measure π(AUC ≥ t)


class ExpMNFLR:
    def __init__(self, mode: str = "paper", flow: str = "planar", flows: int = 4, base_sigma: float = 0.5,
                 prior_scale: float = 30.0, l2: float = 0.0, nf_batch: int = 64, data_batch: int = 4096,
                 iterations: int = 1500, lr: float = 0.01, patience: int = 1000, sylvester_m: int = 4,
                 weight_column: str = "", weight_cap: float = 0.0):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if flow not in LAYERS:
            raise ValueError(f"flow must be one of {sorted(LAYERS)}, got {flow!r}")
        if weight_column and not weight_cap > 0:
            raise ValueError(f"a loss weighted by {weight_column!r} has sensitivity max(weight), not 1: give a public "
                             "weight_cap (weights are clipped to it and divided by it, so Δu stays 1)")
        self.mode, self.flow, self.flows, self.base_sigma = mode, flow, int(flows), float(base_sigma)
        self.prior_scale, self.l2, self.nf_batch, self.data_batch = float(prior_scale), float(l2), int(nf_batch), int(data_batch)
        self.iterations, self.lr, self.patience, self.sylvester_m = int(iterations), float(lr), int(patience), int(sylvester_m)
        self.weight_column, self.weight_cap = weight_column, float(weight_cap)
        self.flow_: ParameterFlow | None = None
        self.design_: Design | None = None
        self.release_seed_: int | None = None

    # --- the target density ---------------------------------------------------------------
    def log_prior(self, thetas: torch.Tensor) -> torch.Tensor:
        if self.mode == "proper":
            return -0.5 * (thetas / self.prior_scale).pow(2).sum(dim=1)
        return torch.zeros(thetas.shape[0])

    def utility(self, x: torch.Tensor, y: torch.Tensor, weights: torch.Tensor | None, thetas: torch.Tensor,
                scale: float) -> torch.Tensor:
        """u(θ) for every θ: −(n/b)·Σ_batch w_i (sigmoid(θ·x_i) − y_i)² − λ‖w‖² (unbiased for the sum)."""
        if weights is None:
            loss = summed_l2(x, y, thetas)
        else:
            loss = ((torch.sigmoid(x @ thetas[:, :-1].T + thetas[:, -1]) - y[:, None]) ** 2 * weights[:, None]).sum(0)
        return -scale * loss - self.l2 * thetas[:, :-1].pow(2).sum(dim=1)

    # --- fitting -----------------------------------------------------------------------------
    def build_flow(self, dim: int) -> ParameterFlow:
        layers = [LAYERS[self.flow](dim) if self.flow == "planar" else LAYERS[self.flow](dim, m=self.sylvester_m)
                  for _ in range(self.flows)]
        if self.mode == "proper":
            return ParameterFlow(dim, [Affine(dim), *layers], base_sigma=1.0)
        return ParameterFlow(dim, layers, base_sigma=self.base_sigma)

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        if not budget.is_private:
            raise ValueError("ExpM+NF needs a finite ε (its inverse temperature is ε/2)")
        self.design_ = design = Design(schema)
        x, y = torch.as_tensor(design.features(train)), torch.as_tensor(design.labels(train))
        weights = None
        if self.weight_column:
            raw = torch.as_tensor(train[self.weight_column].to_numpy(dtype=np.float32))
            weights = raw.clamp(max=self.weight_cap) / self.weight_cap  # each row's term stays in [0, 1]
        self.flow_ = fit_flow(self, x, y, weights, beta=budget.epsilon / 2, seed=seed)
        self.release_seed_ = int(np.random.SeedSequence([seed, 1]).generate_state(1)[0])  # the one released z
        return self.ledger(budget, len(x))

    def ledger(self, budget: Budget, n_rows: int) -> Ledger:
        ledger = Ledger(Guarantee.NOMINAL)
        ledger.record(
            ExponentialEvent(inverse_temperature=budget.epsilon / 2, utility_sensitivity=1.0,
                             adjacency=Adjacency.REPLACE_ONE),
            epsilon=budget.epsilon,
            accountant="none: ε-DP holds for exact ExpM sampling only (nominal for the flow)",
            description="one parameter vector drawn from the fitted flow",
            details={"utility": "-sum_rows (sigmoid(theta.x) - y)^2" + (f" weighted by {self.weight_column} "
                                f"clipped to {self.weight_cap:g} and divided by it" if self.weight_column else ""),
                     "n_rows": n_rows, "mode": self.mode,
                     "prior": f"N(0, {self.prior_scale:g}^2 I)" if self.mode == "proper" else "none (improper target)",
                     "sampler": f"normalizing flow ({self.flows} {self.flow}) fitted by reverse KL: approximate, "
                                "no proof that its output is the ExpM density"},
        )
        return ledger

    # --- audit ----------------------------------------------------------------------------------
    def audit_findings(self, split, schema: Schema, budget: Budget, real_aucs: np.ndarray) -> list:
        """The exact-ExpM bound on the released models' median AUC (plugins/learners/expm_nf_lr/audit.py)."""
        from dpgym.plugins.learners.expm_nf_lr import audit
        from dpgym.plugins.learners.nonprivate_lr.model import fit_logistic

        design = self.design_
        x, y = torch.as_tensor(design.features(split.train)), torch.as_tensor(design.labels(split.train))
        candidates = np.vstack([fit_logistic(x.numpy(), y.numpy(), loss, 0.0, 100, seed=0) for loss in ("l2", "bce")]
                               + [self.draw(1000, seed=1)])
        x_test = torch.as_tensor(design.features(split.test))
        directions = audit.random_direction_aucs(x_test, design.labels(split.test), AUDIT_DIRECTIONS, seed=0)
        return [audit.exact_expm_bound(real_aucs, directions, budget.epsilon, len(x), audit.min_summed_l2(x, y, candidates))]

    # --- release -------------------------------------------------------------------------------
    def draw(self, k: int, seed: int) -> np.ndarray:
        if self.flow_ is None:
            raise RuntimeError("fit() first")
        with torch.no_grad():
            thetas, _ = self.flow_.sample(k, torch.Generator().manual_seed(seed))
        return thetas.double().numpy()

    def release(self) -> LogisticModel:
        """ONE draw θ = g(z), z from the fit's seed: the only model that counts as the release."""
        return LogisticModel(self.design_, self.draw(1, self.release_seed_)[0])

    def evaluation_models(self, k: int, seed: int) -> list[LogisticModel]:
        return [LogisticModel(self.design_, t) for t in self.draw(k, seed)]


def fit_flow(learner: ExpMNFLR, x: torch.Tensor, y: torch.Tensor, weights: torch.Tensor | None, beta: float,
             seed: int) -> ParameterFlow:
    """Reverse KL E_q[log q(θ) − log π(θ) − β·u(θ)] by RMSProp with a plateau scheduler (Algorithm 1)."""
    torch.manual_seed(seed)
    n = len(x)
    flow = learner.build_flow(x.shape[1] + 1)
    optimizer = torch.optim.RMSprop(flow.parameters(), lr=learner.lr)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=learner.patience)
    rows = torch.Generator().manual_seed(seed + 1)
    batch = min(learner.data_batch, n)
    for _ in range(learner.iterations):
        idx = torch.randint(n, (batch,), generator=rows) if batch < n else slice(None)
        thetas, log_q = flow.sample(learner.nf_batch)
        w = None if weights is None else weights[idx]
        target = learner.log_prior(thetas) + beta * learner.utility(x[idx], y[idx], w, thetas, n / batch)
        rkl = (log_q - target).mean()
        optimizer.zero_grad()
        rkl.backward()
        optimizer.step()
        scheduler.step(rkl.item())
    return flow
