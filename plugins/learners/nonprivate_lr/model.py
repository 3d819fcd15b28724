"""The code of `dpgym.plugins.learners.nonprivate_lr`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.learners.nonprivate_lr`, which holds the spec."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from dpgym import Budget, Guarantee, Ledger, Schema
from dpgym.plugins.learners.features import Design
from dpgym.plugins.learners.logistic import LogisticModel, OneModelLearner, per_example_loss


class NonPrivateLR(OneModelLearner):
    def __init__(self, loss: str = "bce", weight_decay: float = 1e-6, iterations: int = 100):
        self.loss, self.weight_decay, self.iterations = loss, float(weight_decay), int(iterations)

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        design = Design(schema)
        self.model_ = LogisticModel(design, fit_logistic(design.features(train), design.labels(train), self.loss,
                                                          self.weight_decay, self.iterations, seed))
        return Ledger.non_private(Guarantee.NONE, f"non-private LR ({self.loss}) on the training rows")


def fit_logistic(x: np.ndarray, y: np.ndarray, loss: str, weight_decay: float, iterations: int, seed: int) -> np.ndarray:
    """Mean loss + weight_decay·‖w‖² minimised by L-BFGS from a small random start; returns θ."""
    xt, yt = torch.as_tensor(x), torch.as_tensor(y)
    theta = (0.01 * torch.randn(x.shape[1] + 1, generator=torch.Generator().manual_seed(seed))).requires_grad_()
    optimizer = torch.optim.LBFGS([theta], max_iter=iterations, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        value = per_example_loss(xt @ theta[:-1] + theta[-1], yt, loss).mean() + weight_decay * theta[:-1].pow(2).sum()
        value.backward()
        return value

    optimizer.step(closure)
    return theta.detach().numpy().astype(np.float64)
