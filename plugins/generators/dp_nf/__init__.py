"""DP-NF (Waites & Cummings 2021): a masked autoregressive flow trained by maximum likelihood with
DP-SGD through the harness's engine, with exact log_prob (docs/methods/dp-nf.md).

Model: `dpgym.plugins.nn.flows.MAF`, [MADE(D→100→100→2D), reverse, ActNorm(identity init)] × 5 over
N(0, I) (docs/methods/dp-nf.md#model), trained in a public working space (`dpgym.plugins.nn.space`;
for Life Science "box" is the identity, i.e. the paper's max-norm space). Optimiser
Adam(β = 0.9, 0.999), lr 7e-4, no weight decay; flat (global-norm) clipping at C = 12
(docs/methods/dp-nf.md#training). α is unbounded by default (`alpha_bound = 0`), as the paper's
code; `alpha_bound = B > 0` soft-clamps it to |α| < B (α ← B·tanh(α/B)), a deviation offered for
data on which unbounded α overflows to non-finite parameters (seen within ~100 steps on 8 Gaussians).

Privacy (docs/methods/dp-nf.md#privacy). The engine samples Poisson batches (expected B = 100;
add/remove adjacency), clips every per-example gradient of the whole flow, adds N(0, σ²C²) to the
sum and calibrates σ before training. The number of steps follows the paper's one-run protocol:
with the target noise multiplier σ* = 2.1, train the largest T whose spend at σ* stays within ε
(T_max(ε), docs/methods/dp-nf.md#stopping), capped at `max_steps` for the compute budget; the
engine then sets σ ≤ σ* exactly to the budget. The claim uses a rigorous accountant (PRV by default, or RDP); the paper's GDP-CLT figure
for the same run is recorded beside it, labelled as an approximation.

Optional prior "dp_mog": a K-component Gaussian mixture fitted with DP-EM (`dpgym.plugins.generators.dp_mog`)
on the same working-space rows, frozen, replacing N(0, I) (docs/methods/dp-nf.md#gmm-prior). Its 3J
Gaussian releases are composed with DP-SGD on the accountant's curve: the prior gets a fixed noise
multiplier chosen for `prior_epsilon_share` of ε alone, and the engine calibrates σ for the
remaining steps against the joint composition, so the whole model spends at most ε.

Defaults and where they come from ("tuned on" marks a value chosen from rows that a suite scores):
- blocks 5: the paper. hidden 100, actnorm True, batch_size 100, noise_multiplier 2.1 (σ*), clip_norm 12,
  lr 7e-4: the authors' code, its final Life Science configuration (docs/methods/dp-nf.md#training). Published
  values, but the authors tuned them without privacy on Life Science itself, which paper-dp-nf and golden score.
- alpha_bound 0 (α unbounded, the paper's code): chosen on public tuning data (`checkerboard`, which no
  benchmark suite scores) by the `tuning-2d` suite, its levers and rule written before it ran: unbounded, 7
  or 3 at ε = 1 over 3 seeds; no fit diverged, unbounded had the best mean held-out log-likelihood (−4.61,
  sd 0.12; 7: −4.72, 3: −4.77, both within a seed sd), and ties go to the paper's code
  (docs/measurements.md#tuning-2d). Seen after the choice and not acted on (the set is scored): on
  8 Gaussians at ε = 1, seed 0, the unbounded default's held-out log-likelihood is not finite, as the
  paper's code's was there; at ε = ∞ it is finite (−2.86).
- max_steps 15,000: a compute cap (about 10 ms a step, docs/measurements.md); no tuning run recorded.
- scaling "box": derived from the public schema (for Life Science the paper's max-norm space).
- prior "normal": the paper's default. prior_components 5: the paper's App. B.2 (Pinwheel). prior_iterations 10:
  DP-MoG's J = 10 (the paper). prior_epsilon_share 0.1: not recorded (the paper's split is lost in the text).
- accountant "prv": harness convention, the tightest composition the harness re-accounts
  (docs/privacy.md#fair-budgets). engine "fast" and the harness's device "auto" set cost, not the mechanism.
"""

from __future__ import annotations

from dpgym import Capability, Deferred, GeneratorSpec, Guarantee, hookimpl


SPEC = GeneratorSpec(
    name="dp_nf",
    version="2",
    factory=Deferred("dpgym.plugins.generators.dp_nf.model:DPNF"),
    guarantee=Guarantee.FORMAL,
    capabilities=frozenset({Capability.DEVICE, Capability.LOG_PROB}),
    defaults={
        "blocks": 5, "hidden": 100, "actnorm": True, "alpha_bound": 0.0, "batch_size": 100,
        "noise_multiplier": 2.1, "max_steps": 15_000, "clip_norm": 12.0, "lr": 7e-4, "accountant": "prv",
        "scaling": "box", "prior": "normal", "prior_components": 5, "prior_iterations": 10,
        "prior_epsilon_share": 0.1, "engine": "fast",
    },
    quick_params={"blocks": 1, "hidden": 8, "max_steps": 5, "accountant": "rdp"},
    description=("DP-NF: masked autoregressive flow trained with DP-SGD (Poisson, flat clipping), exact log_prob; "
                 "models the numeric columns only, draws categorical ones uniformly from their public categories"),
)


@hookimpl
def dpgym_generators() -> list[GeneratorSpec]:
    return [SPEC]
