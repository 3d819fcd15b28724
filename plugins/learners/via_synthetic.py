"""`via_synthetic:<generator>`: a DP synthetic-data generator as a private learner
(docs/methods/expm-nf.md#via-synthetic).

Fits the generator on the private training rows under the cell's budget, samples as many rows,
and trains the non-private LR on the synthetic rows only. The LR is post-processing of the
generator's output, so the released model inherits the generator's ledger and guarantee, and every
generator lands on the same AUC-versus-ε axis as the learners.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from dpgym import Budget, Capability, GeneratorSpec, Guarantee, Ledger, LearnerSpec, Schema, SpecLookup, hookimpl
from dpgym.plugins.learners.features import Design
from dpgym.plugins.learners.logistic import LogisticModel, OneModelLearner
from dpgym.plugins.learners.nonprivate_lr import fit_logistic


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


def resolve(generator: str, plugins: SpecLookup) -> LearnerSpec:
    """The learner for one installed generator: its guarantee, its hyper-parameters as `generator_params`,
    and the device capability if it has it. The LR reads only synthetic rows, so the learner reads no
    training row when the generator reads none."""
    provided = plugins.generator(generator)
    return replace(SPEC, name=f"via_synthetic:{generator}", guarantee=provided.guarantee,
                   factory=lambda **params: ViaSynthetic(provided, **params),
                   defaults={"generator_params": {}, "loss": "bce"},
                   capabilities=provided.capabilities & {Capability.DEVICE, Capability.READS_NO_ROWS}, resolve=None,
                   version=f"{SPEC.version}+{provided.name}-{provided.version}")


SPEC = LearnerSpec(
    name="via_synthetic",
    version="1",
    factory=ViaSynthetic,
    guarantee=Guarantee.NONE,
    defaults={"generator": None, "generator_params": {}, "loss": "bce"},
    description="non-private LR trained on a DP generator's synthetic rows (name it via_synthetic:<generator>)",
    resolve=resolve,
)


@hookimpl
def dpgym_learners() -> list[LearnerSpec]:
    return [SPEC]
