"""DP-CGAN (Torkzadehmahani, Kairouz & Paten, CVPR-W 2019): a label-conditioned GAN whose
discriminator is trained with DP-SGD; the generator only ever sees the discriminator, so it is
post-processing.

Accounting (the public tabular port hard-codes MNIST's n = 60,000 in q = batch/n and passes
σ·C to the accountant as the noise multiplier; neither happens here):
- The discriminator is one DP-SGD phase of `dpgym.privacy.dpsgd.DPSGD` over the true number of
  training rows n, Poisson sampling at q = batch_size / n, flat per-example clipping at
  `clip_norm` (DP-CGAN's 1.1), Gaussian noise σ·C with σ calibrated on the accountant before
  training; add/remove adjacency.
- Each discriminator step sums clipped per-example gradients of the real rows in the Poisson batch
  and of a fixed number m = round(q·n) of generated rows, conditioned on classes drawn from the
  released class proportions (DP-CGAN clips the real and the fake loss separately). The generated
  rows depend only on the generator, i.e. on earlier noisy releases, and their number does not
  depend on the batch, so adding or removing one training row changes the sum by at most C: the
  subsampled Gaussian mechanism's sensitivity is unchanged. (Conditioning the fakes on the real
  batch's labels, as the reference code does, would add a second data-dependent term.)
- The class proportions used for the fakes and for sampling come from the class counts released
  once with the Gaussian mechanism (L2 sensitivity 1 under add/remove), with the noise that
  would alone spend the fraction `label_share` of ε and of δ. The release and the DP-SGD phase
  are composed jointly on the accountant (`DPSGD.add_release`), and the phase's noise is
  calibrated to what the budget leaves, so the cell spends its whole ε: splitting ε between the
  two and adding them up (basic composition) left about 7% of it unspent.

Encoding is one-hot / min-max by the public schema (`dpgym.plugins.nn.tabular`). Networks as in the
DP-CGAN paper's MNIST model at tabular width: generator (z ∈ R^100, class) → 128 ReLU → sigmoid per
number, softmax per categorical block; discriminator (row, class) → 128 LeakyReLU(0.2) → logit;
non-saturating GAN loss, one discriminator step per generator step; the discriminator uses plain
SGD with DP-CGAN's learning rate decaying linearly from 0.1 to 0.052, the generator Adam.

Defaults and where they come from ("tuned on" marks a value chosen from rows that a suite scores):
- clip_norm 1.1, d_learning_rate 0.1 → d_final_learning_rate 0.052: DP-CGAN's reference code (its MNIST run).
- noise_dim 100, hidden 128: DP-CGAN's MNIST networks (above).
- steps 3000, batch_size 256, g_learning_rate 1e-3, label_share 0.05: not recorded (the reference runs 100k
  steps on MNIST).
- accountant "prv": harness convention, the tightest composition the harness re-accounts
  (docs/privacy.md#fair-budgets). device "auto": set by the harness.
"""

from __future__ import annotations

from dpgym import Capability, Deferred, GeneratorSpec, Guarantee, hookimpl


SPEC = GeneratorSpec(
    name="dp_cgan",
    version="1",
    factory=Deferred("dpgym.plugins.generators.dp_cgan.model:DPCGAN"),
    guarantee=Guarantee.FORMAL,
    capabilities=frozenset({Capability.DEVICE}),
    defaults={"steps": 3000, "batch_size": 256, "clip_norm": 1.1, "noise_dim": 100, "hidden": 128,
              "d_learning_rate": 0.1, "d_final_learning_rate": 0.052, "g_learning_rate": 1e-3,
              "label_share": 0.05, "accountant": "prv"},
    quick_params={"steps": 6, "batch_size": 32, "hidden": 16, "noise_dim": 8},
    description="DP-CGAN: conditional GAN, discriminator by DP-SGD over the true n with Poisson sampling",
)


@hookimpl
def dpgym_generators() -> list[GeneratorSpec]:
    return [SPEC]
