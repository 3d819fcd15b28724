"""The code of `dpgym.plugins.learners.dpsgd_lr`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.learners.dpsgd_lr`, which holds the spec."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from torch import nn

from dpgym import Budget, Ledger, Schema
from dpgym.privacy import DPSGD, PRVAccountant
from dpgym.plugins.learners.features import Design
from dpgym.plugins.learners.logistic import LogisticModel, OneModelLearner, per_example_loss


class DPSGDLR(OneModelLearner):
    def __init__(self, loss: str = "bce", epochs: float = 5.0, batch_size: int = 256, lr: float = 0.01,
                 clip_norm: float = 1.0, weight_decay: float = 0.0):
        self.loss, self.epochs, self.batch_size, self.lr = loss, float(epochs), int(batch_size), float(lr)
        self.clip_norm, self.weight_decay = float(clip_norm), float(weight_decay)
        self.noise_multiplier_: float | None = None

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        design = Design(schema)
        x, y = torch.as_tensor(design.features(train)), torch.as_tensor(design.labels(train))
        torch.manual_seed(seed)
        linear = nn.Linear(design.width, 1)
        optimizer = torch.optim.RMSprop(linear.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        steps = max(1, math.ceil(self.epochs * len(x) / self.batch_size))
        accountant = PRVAccountant.for_target(budget.epsilon) if budget.is_private else "prv"
        dp = DPSGD(budget, accountant=accountant, seed=seed)
        phase = dp.add_phase("logistic_regression", linear, optimizer, n_rows=len(x), batch_size=self.batch_size,
                             steps=steps, clip_norm=self.clip_norm, clipping="flat")
        for idx in phase.batches():
            phase.step(per_example_loss(linear(x[idx]).squeeze(1), y[idx], self.loss))
        self.noise_multiplier_ = phase.noise_multiplier
        theta = np.concatenate([linear.weight.detach().numpy()[0], linear.bias.detach().numpy()]).astype(np.float64)
        self.model_ = LogisticModel(design, theta)
        return dp.ledger()
