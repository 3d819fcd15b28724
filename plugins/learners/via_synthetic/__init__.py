"""`via_synthetic:<generator>`: a DP synthetic-data generator as a private learner
(docs/methods/expm-nf.md#via-synthetic).

Fits the generator on the private training rows under the cell's budget, samples as many rows,
and trains the non-private LR on the synthetic rows only. The LR is post-processing of the
generator's output, so the released model inherits the generator's ledger and guarantee, and every
generator lands on the same AUC-versus-ε axis as the learners.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from dpgym import Capability, Deferred, Guarantee, LearnerSpec, SpecLookup, hookimpl


def resolve(generator: str, plugins: SpecLookup) -> LearnerSpec:
    """The learner for one installed generator: its guarantee, its hyper-parameters as `generator_params`,
    and the device capability if it has it. The LR reads only synthetic rows, so the learner reads no
    training row when the generator reads none."""
    provided = plugins.generator(generator)
    return replace(SPEC, name=f"via_synthetic:{generator}", guarantee=provided.guarantee,
                   factory=partial(SPEC.factory, provided),
                   defaults={"generator_params": {}, "loss": "bce"},
                   capabilities=provided.capabilities & {Capability.DEVICE, Capability.READS_NO_ROWS}, resolve=None,
                   version=f"{SPEC.version}+{provided.name}-{provided.version}")


SPEC = LearnerSpec(
    name="via_synthetic",
    version="1",
    factory=Deferred("dpgym.plugins.learners.via_synthetic.model:ViaSynthetic"),
    guarantee=Guarantee.NONE,
    defaults={"generator": None, "generator_params": {}, "loss": "bce"},
    description="non-private LR trained on a DP generator's synthetic rows (name it via_synthetic:<generator>)",
    resolve=resolve,
)


@hookimpl
def dpgym_learners() -> list[LearnerSpec]:
    return [SPEC]
