"""Logistic regression over a flat parameter vector θ = (w, b): scoring, AUC, and the losses every
learner of the track shares (ℓ2 on the sigmoid output, BCE)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from sklearn.metrics import roc_auc_score
from torch import Tensor
from torch.nn import functional as F

from dpgym.plugins.learners.features import Design


@dataclass(frozen=True)
class LogisticModel:
    """A released LR model: θ = (w, b) over the design's features."""

    design: Design
    theta: np.ndarray

    def decision_function(self, frame: pd.DataFrame) -> np.ndarray:
        return self.design.features(frame) @ self.theta[:-1] + self.theta[-1]


class OneModelLearner:
    """A learner whose fit yields one model: the release is that model, and it is also the only
    evaluation model (no further draws exist, so the audit pools such learners over seeds)."""

    model_: LogisticModel | None = None

    def release(self) -> LogisticModel:
        if self.model_ is None:
            raise RuntimeError("fit() first")
        return self.model_

    def evaluation_models(self, k: int, seed: int) -> list[LogisticModel]:
        return [self.release()]


def batched_logits(x: Tensor, thetas: Tensor) -> Tensor:
    """Logits of every row under every parameter vector in one matmul: (rows, N)."""
    return x @ thetas[:, :-1].T + thetas[:, -1]


def summed_l2(x: Tensor, y: Tensor, thetas: Tensor) -> Tensor:
    """Σ_rows (sigmoid(logit) − y)² for each θ: (N,). Each row's term lies in [0, 1], so this
    summed loss has sensitivity 1 under replace-one neighbours (docs/methods/expm-nf.md#mechanism)."""
    return ((torch.sigmoid(batched_logits(x, thetas)) - y[:, None]) ** 2).sum(dim=0)


def per_example_loss(logits: Tensor, y: Tensor, loss: str) -> Tensor:
    if loss == "bce":
        return F.binary_cross_entropy_with_logits(logits, y, reduction="none")
    if loss == "l2":
        return (torch.sigmoid(logits) - y) ** 2
    raise ValueError(f"loss must be 'bce' or 'l2', got {loss!r}")


def auc(y: np.ndarray, scores: np.ndarray) -> float:
    return float(roc_auc_score(y, scores))


def aucs_of_directions(x: Tensor, y: np.ndarray, thetas: Tensor, chunk: int = 512) -> np.ndarray:
    """Test AUC (Mann–Whitney U) of many random parameter vectors at once.

    Identical rows are merged first, keeping their counts of positives and negatives; a random
    (continuous) direction then ties two distinct rows with probability zero, so one sort per
    direction gives the exact AUC, ties between identical rows counted as half, without rank averaging.
    """
    rows, inverse = torch.unique(x.double(), dim=0, return_inverse=True)
    positive = torch.as_tensor(y > 0.5, dtype=torch.float64)
    pos = torch.zeros(len(rows), dtype=torch.float64).index_add_(0, inverse, positive)
    neg = torch.zeros(len(rows), dtype=torch.float64).index_add_(0, inverse, 1 - positive)
    out = []
    for start in range(0, len(thetas), chunk):
        # one row per direction: sorting along contiguous memory is ~4× faster than down columns
        order = batched_logits(rows, thetas[start:start + chunk].double()).T.contiguous().argsort(dim=1)
        p, n = pos[order], neg[order]
        u = (p * (n.cumsum(dim=1) - n / 2)).sum(dim=1)  # positives × negatives scored below (+ half the ties)
        out.append((u / (pos.sum() * neg.sum())).numpy())
    return np.concatenate(out) if out else np.zeros(0)
