"""The code of `dpgym.plugins.learners.via_synthetic`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.learners.via_synthetic`, which holds the spec."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpgym import Budget, GeneratorSpec, Ledger, Schema
from dpgym.plugins.learners.features import Design
from dpgym.plugins.learners.logistic import LogisticModel, OneModelLearner
from dpgym.plugins.learners.nonprivate_lr.model import fit_logistic


class ViaSynthetic(OneModelLearner):
    def __init__(self, generator: GeneratorSpec | None = None, generator_params: dict | None = None, loss: str = "bce",
                 device: str | None = None):
        if generator is None:
            raise ValueError("name the generator: via_synthetic:<generator>")
        # `device` is the runner's resolved device, passed on to a generator that can use a GPU
        self.generator_params = {**dict(generator_params or {}), **({"device": device} if device else {})}
        generator.build(self.generator_params)  # bad generator_params are a user error before any cell runs
        self.generator, self.loss = generator, loss

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        generator = self.generator.build(self.generator_params)
        ledger = generator.fit(train, schema, budget, seed)
        synthetic = schema.conform(generator.sample(len(train), seed + 1), f"synthetic rows of {self.generator.name}")
        design = Design(schema)
        y = design.labels(synthetic)
        if y.min() == y.max():  # one class only: the LR cannot rank, the model scores every row alike
            theta = np.zeros(design.width + 1)
        else:
            theta = fit_logistic(design.features(synthetic), y, self.loss, 1e-6, 100, seed)
        self.model_ = LogisticModel(design, theta)
        return ledger
