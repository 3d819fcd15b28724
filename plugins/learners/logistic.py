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

from plugins.learners.features import Design


@dataclass(frozen=True)
class LogisticModel:
    """A released LR model: θ = (w, b) over the design's features."""

    design: Design
    theta: np.ndarray

    def decision_function(self, frame: pd.DataFrame) -> np.ndarray:
        return self.design.features(frame) @ self.theta[:-1] + self.theta[-1]


def batched_logits(x: Tensor, thetas: Tensor) -> Tensor:
    """Logits of every row under every parameter vector in one matmul: (rows, N)."""
    return x @ thetas[:, :-1].T + thetas[:, -1]


def summed_l2(x: Tensor, y: Tensor, thetas: Tensor) -> Tensor:
    """Σ_rows (sigmoid(logit) − y)² for each θ: (N,). Each row's term lies in [0, 1], so this
    summed loss has sensitivity 1 under replace-one neighbours (expm-nf spec §1.3)."""
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
    """Test AUC of many parameter vectors at once (Mann–Whitney U from ranks; ties averaged)."""
    pos = torch.as_tensor(y > 0.5)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    out = []
    for start in range(0, len(thetas), chunk):
        scores = batched_logits(x, thetas[start:start + chunk]).double()
        ranks = _average_ranks(scores)
        u = ranks[pos].sum(dim=0) - n_pos * (n_pos + 1) / 2
        out.append((u / (n_pos * n_neg)).numpy())
    return np.concatenate(out) if out else np.zeros(0)


def _average_ranks(scores: Tensor) -> Tensor:
    """1-based ranks per column with ties averaged."""
    order = scores.argsort(dim=0)
    sorted_scores = scores.gather(0, order)
    n = scores.shape[0]
    position = torch.arange(1, n + 1, dtype=torch.float64)[:, None].expand_as(scores)
    new_group = torch.ones_like(sorted_scores, dtype=torch.bool)
    new_group[1:] = sorted_scores[1:] != sorted_scores[:-1]
    group = new_group.cumsum(dim=0) - 1
    size = torch.zeros_like(sorted_scores).scatter_add_(0, group, torch.ones_like(sorted_scores))
    first = torch.zeros_like(sorted_scores).scatter_reduce_(0, group, position, "amin", include_self=False)
    mean_rank = first + (size - 1) / 2
    ranks = torch.empty_like(scores)
    ranks.scatter_(0, order, mean_rank.gather(0, group))
    return ranks
