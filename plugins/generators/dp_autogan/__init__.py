"""DP-auto-GAN (Tantipongpipat et al., "Differentially Private Synthetic Mixed-Type Data Generation
for Unsupervised Learning"): a DP-SGD autoencoder, then a WGAN whose generator works in the
autoencoder's latent space; only the decoder and the generator are released.

What the paper fixes and what dpgym chose: docs/methods/dp-auto-gan.md.

- Encoding: `dpgym.plugins.nn.mixed.MixedEncoding`, from the public schema only
  (docs/methods/dp-auto-gan.md#encoding).
- Phase 1: encoder and decoder trained together by DP-SGD, the concatenated
  (encoder ∥ decoder) per-example gradient clipped to C1 (flat clipping), BCE loss
  (`encoder_mode="joint_dp"`); or the encoder left at its seeded random initialisation and only
  the decoder trained (`"frozen_random"`, as the authors' MIMIC code). Both are DP; the paper code's
  non-private encoder is not offered (its per-example sensitivity is unbounded; see
  docs/methods/dp-auto-gan.md#autoencoder-phase).
- Phase 2: critic loss D(De(G(z))) − D(x) per real row with one fresh fake
  inside each clipped per-example gradient, noised by DP-SGD; weights clamped to ±c afterwards
  (post-processing). Every `d_per_g` critic steps, one non-private generator step on
  −D(De(G(z))) that never reads a real row. The released generator is the last iterate, as in
  the authors' code, or with `generator_ema` > 0 an exponential moving average of the iterates:
  post-processing of the DP critic's outputs, so free. See docs/methods/dp-auto-gan.md#gan-phase.
- Generator normalisation: LayerNorm as in the authors' code (default), or the paper's BatchNorm1d
  (`generator_norm="batch"`), whose running statistics are then set from noise through the
  released weights.
- Accounting (the paper's Lemma 4): both phases are planned on one `DPSGD` and composed jointly,
  never by adding ε's: by default (`accountant="prv"`) their privacy random variables are convolved,
  the tightest composition the harness re-accounts, so a cell spends its whole ε; `accountant="rdp"`
  sums their RDP curves per order and converts once with the paper's classic conversion, which
  at CI-sized step counts spends a fraction of the budget it claims. The noise
  multipliers keep the preset's published ratio ψ1 : ψ3 and are scaled together to the budget
  (`noise="calibrate"`), or are exactly the published pair (`noise="published"`), whose ε must
  then be within the budget. See docs/methods/dp-auto-gan.md#accounting.
- ε = ∞: the same two phases without clipping or noise, ledger `non_private`.

Defaults and where they come from ("tuned on" marks a value chosen from rows that a suite scores; Adult is
scored by golden and the paper-dp-hflow suites, and as `adult_autogan` by paper-dp-auto-gan):
- preset "adult": the paper's App. E.1 (docs/methods/dp-auto-gan.md#hyper-parameters): latent_dim 15, noise_dim
  64, the encoder, residual generator and (2n/3, n/3) critic, ae_steps 10,000, ae_batch_size 64, ae_lr 0.005,
  d_per_g 15, disc_batch_size 128, gen_lr 0.005, disc_clip_norm 0.022 and the published (ψ1, ψ3, critic steps)
  settings. From the authors' code, where the paper is silent: loss_reduction "mean", ae_weight_decay 0,
  disc_lr 0.005, weight_clamp 0.01.
- ae_clip_norm 0.012: App. E.1's decoder-only C1, applied to the joint (encoder ∥ decoder) gradient. That
  reading was checked on public tuning data (`randhie`, which no benchmark suite scores) by
  scripts/autogan_clip_norms.py, its rule written before it ran (the joint reading stands if at every checkpoint
  both readings' median per-example norms are at least 3× C1 and the decoder carries at least 0.8 of the joint
  norm): in non-private runs of the adult preset, seeds 0–1, steps 0–10,000, the median norm is 0.076–0.320
  joint and 0.5–5 % less decoder-only, and every row's norm exceeds C1 under both readings (the smallest 0.022),
  so both clip every example and Adam's scale invariance makes them act alike (comment in PRESETS;
  docs/measurements.md#dp-auto-gan-joint-clip). It had first been decided from the same reading on Adult's
  training rows (medians ≈0.06–0.19 joint, ≈5 % less decoder-only).
- private_disc_lr 5e-4: chosen on public tuning data (`randhie`, which no benchmark suite scores) by the
  `tuning-dp-auto-gan` suite, its levers and rule written before it ran: against the authors' 5e-3 it raised
  mean TSTR AUROC from 0.516 to 0.568 over 3 seeds at ε = 1 (docs/measurements.md#tuning-dp-auto-gan). It was
  first chosen from diagnostics on Adult's training rows; the tuning run replaced that provenance and kept
  the value.
- preset "mimic": the paper's App. D at latent 64 (its serialised private networks); ae_weight_decay 0.001,
  loss_reduction "sum" and weight_clamp 0.01 from the authors' code. No private_disc_lr.
- noise "calibrate": the published ψ1 : ψ3 ratio scaled to the budget (docs/methods/dp-auto-gan.md#accounting).
  accountant "prv": harness convention, the tightest composition the harness re-accounts
  (docs/privacy.md#fair-budgets). device "auto": set by the harness.
- decoding "argmax", generator_norm "layer": the authors' code (docs/methods/dp-auto-gan.md#encoding,
  #gan-phase). encoder_mode "joint_dp": the DP reading of the paper's §3.1 (#autoencoder-phase).
- generator_ema 0 (the last iterate, as the authors' code releases it): the `tuning-dp-auto-gan` suite on
  `randhie` found no gain from averaging (decay 0.99: mean TSTR AUROC 0.549 against 0.568 for the last
  iterate at critic lr 5e-4), so the authors' choice stands. Averaging with 0.99 had been the default,
  chosen from salary accuracy on Adult's test rows.
- The overridable hyper-parameters (latent_dim … weight_clamp) default to None: the preset's values.

Known gap. Salary accuracy of the 800-tree forest trained on samples (ADULT preset at the suite's
published noise; majority rate 76.4 %, real rows 85.2 %; paper 74.7 / 78.7 / 79.2 % at
ε = 0.36 / 0.51 / 1.01):
- 2026-11-23: the noisy critic at the authors' RMSprop lr 0.005 inside the ±0.01 clamp learned nothing
  (D(real) − D(fake), averaged over 1,500-step windows, fell from 1.2e-3 to 1e-5; ε = ∞: 1e-2 →
  4e-3), the samples had 2 % salary ones (train 24 %) and the forest scored the majority rate.
  Private fits now use the preset's `private_disc_lr` (5e-4, see PRESETS); ε = ∞, seed 0: 79.7 %.
- Last iterate released (`generator_ema = 0`), seeds 0–4: ε = 1.01 → 78.5 / 77.8 / 80.4 / 80.1 /
  76.8 % (mean 78.7 %); 0.51 → 76.5 / 76.9 / 78.0 / 79.2 / 77.5 % (77.6 %); 0.36 → 78.8 / 77.4 /
  66.4 / 78.7 / 77.4 % (75.7 %).
- Averaged generator (`generator_ema = 0.99`, the default until 2026-11-28; seeds 0–9 measured
  2026-11-25/26 before the warm-up, which moves ~1e-4 of the weight on this preset, seeds 10–19
  after it): ε = 1.01, seeds 0–19 → mean 78.49 %
  (sd 1.2, se 0.26, median 78.71, 76.4–79.9); 0.51, seeds 0–19 → mean 77.26 % (median 77.97; seeds
  0–9 77.98 %, 10–19 76.54 %, two of which collapsed to 67.0 and 70.5 % with a sound salary marginal
  of 19–22 %); 0.36, seeds 0–4 → 76.6 % (72.8–78.4; the 66.4 % seed gives 72.8 %). Paired by seed
  the averaging moves accuracy by −1.0 to +1.5 points, except on that collapsed last iterate: it
  guards against a bad final iterate more than it raises the mean. Over 20 seeds the ε = 1.01 target
  (78.5 %) sits on the mean; the 0.51 target (78 %) is not met.
  Summed smoothed KL over the 8 categorical columns: 0.56 / 0.48 / 0.24 (paper 0.81 / 0.48 at
  0.36 / 0.51). ε = ∞, seeds 0–1: 78.9 / 79.6 %.
- The paper's BatchNorm generator (`generator_norm="batch"`), ε = 0.51, seeds 0–9 decided
  before running (2026-11-26): 77.8 / 77.3 / 81.5 / 79.1 / 72.8 / 76.4 / 76.9 / 76.4 / 77.4 / 80.0 %,
  mean 77.56 % (sd 2.4, median 77.4), summed KL 0.49; LayerNorm on the same seeds 77.98 %. No gain.
- The paper's own 13 columns (`adult_autogan`: fnlwgt and education dropped, education-num 16 levels,
  the paper's 106-wide encoding; the figures above are on the 15-column `adult`), ε = 0.51,
  seeds 0–19 decided before running (2026-11-27): mean 77.89 % (sd 1.05, se 0.24, median 77.88,
  76.1–80.0; no collapsed seed), KL 0.495 (paper 0.48); the paper's DP-VAE (`dp_vae` architecture
  "sap") KL 1.25 at 0.51 and 1.93 at 0.36 over seeds 0–2 (paper 1.17 / 2.52). Still under 78 %.
  Same view, seeds decided before running: ε = 1.01, seeds 0–9 → mean 78.36 % (sd 1.03, se 0.33,
  median 78.33, 77.0–80.1), KL 0.24; seeds 10–19 (2026-11-27, decided before running) → 78.44 % (sd 1.47,
  median 78.85, 75.2–80.5); seeds 0–19 → 78.40 % (se 0.28), under the 78.5 % target by less than its
  standard error; ε = 0.36, seeds 0–4 → 79.14 % (77.3–81.3; paper 74.66), KL 0.58 (paper 0.81; the
  paper's DP-VAE 1.93). Across ε the seed spread dominates.
- The autoencoder released as a moving average of its private iterates (decay 0.999, post-processing,
  as the generator's; tried 2026-11-27 and not kept): ε = 1.01, seeds 10–14 → 76.5 / 78.6 / 77.5 /
  79.4 / 77.7 %, mean 77.94 % against 78.24 % for the last iterate on the same seeds (paired
  differences −2.2 to +1.4 points). No gain.
- What remains is mostly the DP autoencoder: at ε = 0.51 its reconstruction of the training rows gets
  salary right 93.6 % of the time, occupation 73 %, age off by 14 years on average (ε = ∞: ≥ 99.6 % on
  every categorical column); lower autoencoder learning rates did not help, a frozen random encoder
  (`encoder_mode`) scored 74.5 % at 0.51 (61–82 %), and the paper code's non-private encoder, tried as
  a diagnostic only, 77.6 %.
"""

from __future__ import annotations

from dpgym import Capability, Deferred, GeneratorSpec, Guarantee, hookimpl

# Hyper-parameters that default to the preset's value when left None.
OVERRIDABLE = ("latent_dim", "noise_dim", "ae_steps", "ae_batch_size", "ae_lr", "ae_clip_norm", "disc_steps",
               "d_per_g", "disc_batch_size", "disc_lr", "gen_lr", "disc_clip_norm", "weight_clamp")

SPEC = GeneratorSpec(
    name="dp_autogan",
    version="1",
    factory=Deferred("dpgym.plugins.generators.dp_autogan.model:DPAutoGAN"),
    guarantee=Guarantee.FORMAL,
    capabilities=frozenset({Capability.DEVICE}),
    defaults={"preset": "adult", "noise": "calibrate", "accountant": "prv", "decoding": "argmax",
              "encoder_mode": "joint_dp", "generator_ema": 0.0, "generator_norm": "layer",
              **{name: None for name in OVERRIDABLE}},
    quick_params={"ae_steps": 20, "disc_steps": 20, "d_per_g": 5},
    description="DP-auto-GAN: DP-SGD autoencoder + latent WGAN with a DP critic, its two phases composed jointly (Tantipongpipat et al.)",
)


@hookimpl
def dpgym_generators() -> list[GeneratorSpec]:
    return [SPEC]
