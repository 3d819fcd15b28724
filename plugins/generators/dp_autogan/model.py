"""The code of `dpgym.plugins.generators.dp_autogan`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.generators.dp_autogan`, which holds the spec."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from functools import cache
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.optim.swa_utils import AveragedModel, update_bn

from dpgym import Budget, Guarantee, Ledger, Schema
from dpgym.privacy import DPSGD, Accountant, Phase, PRVAccountant, RDPAccountant
from dpgym.plugins.nn.mixed import MixedEncoding
from dpgym.plugins.nn.phases import PlainPhase
from dpgym.plugins.nn.runtime import resolve_device, single_thread
from dpgym.plugins.generators.dp_autogan import OVERRIDABLE


@dataclass(frozen=True)
class Setting:
    """One published privacy setting: noise multipliers of the two phases, critic steps, and the ε
    the paper reports for it (rounded up; the ledger reproduces the unrounded value)."""

    epsilon: float
    ae_noise: float
    disc_noise: float
    disc_steps: int


@dataclass(frozen=True)
class Preset:
    """Published architecture and hyper-parameters of one of the paper's experiments."""

    latent_dim: int
    noise_dim: int
    encoder: str  # "mlp": n → (n+d)//2 → d, LeakyReLU(0.2) (ADULT); "linear_tanh": n → d, Tanh (MIMIC)
    generator: str  # "residual": 3 normalised blocks (ADULT); "mlp_tanh": 2 layers, Tanh out (MIMIC)
    discriminator: tuple[float, ...]  # hidden widths as fractions of n (ADULT) or absolute (MIMIC, >1)
    loss_reduction: str  # BCE "mean" or "sum" over coordinates (docs/methods/dp-auto-gan.md#autoencoder-phase)
    ae_steps: int
    ae_batch_size: int
    ae_lr: float
    ae_weight_decay: float
    ae_clip_norm: float
    d_per_g: int
    disc_batch_size: int
    disc_lr: float
    gen_lr: float
    disc_clip_norm: float
    weight_clamp: float
    settings: tuple[Setting, ...] = field(default=())
    # Critic learning rate used instead of `disc_lr` in a private fit when `disc_lr` is not set;
    # None keeps `disc_lr` (see the ADULT preset's comment).
    private_disc_lr: float | None = None


PRESETS: dict[str, Preset] = {
    # App. E.1 (docs/methods/dp-auto-gan.md#hyper-parameters). C1 = 0.012 was the paper's
    # decoder-only clip; we apply it to the joint (encoder ∥ decoder) gradient. In non-private runs
    # on public tuning data (randhie, scripts/autogan_clip_norms.py) the median per-example norms
    # are 0.076–0.320 joint and 0.5–5 % less decoder-only over the 10,000 steps, and every row's norm
    # exceeds C1 under both readings, so both clip every example and Adam's scale invariance makes
    # the two readings act alike (on Adult's rows, where this was first read: ≈0.06–0.19, ≈5 % less).
    "adult": Preset(
        latent_dim=15, noise_dim=64, encoder="mlp", generator="residual", discriminator=(2 / 3, 1 / 3),
        loss_reduction="mean", ae_steps=10_000, ae_batch_size=64, ae_lr=0.005, ae_weight_decay=0.0,
        ae_clip_norm=0.012, d_per_g=15, disc_batch_size=128, disc_lr=0.005, gen_lr=0.005,
        disc_clip_norm=0.022, weight_clamp=0.01,
        settings=(Setting(0.36, 5.0, 8.0, 15_000), Setting(0.51, 2.5, 7.5, 15_000),
                  Setting(1.01, 1.5, 3.5, 15_000)),
        # Deviation from the authors' code: in a private fit the critic steps at lr 5e-4, not
        # 0.005. When ψ3·C3 noise dominates the critic's gradient, RMSprop moves each weight by
        # ≈ lr per step in a random direction, so at lr 0.005 inside the ±0.01 clamp a weight
        # random-walks across its whole box in ~4 steps and averages no noise; at 5e-4 the box is
        # ~20 steps wide. The value was chosen on public tuning data (the module docstring's
        # "Defaults and where they come from"). ε = ∞ keeps 0.005; `disc_lr=0.005` restores the
        # authors' private behaviour.
        private_disc_lr=5e-4,
    ),
    # App. D (docs/methods/dp-auto-gan.md#hyper-parameters): the paper's serialized private nets, latent 64.
    "mimic": Preset(
        latent_dim=64, noise_dim=64, encoder="linear_tanh", generator="mlp_tanh", discriminator=(256,),
        loss_reduction="sum", ae_steps=15_000, ae_batch_size=100, ae_lr=0.001, ae_weight_decay=0.001,
        ae_clip_norm=0.8157, d_per_g=2, disc_batch_size=128, disc_lr=0.001, gen_lr=0.001,
        disc_clip_norm=0.35, weight_clamp=0.01,
        settings=(Setting(0.81, 3.5, 3.5, 6_000), Setting(1.33, 2.3, 2.3, 7_000),
                  Setting(2.70, 1.3, 1.3, 7_000)),
    ),
}

# How phase 1 treats the encoder (docs/methods/dp-auto-gan.md#autoencoder-phase); both readings are DP.
ENCODER_MODES = ("joint_dp", "frozen_random")

# The residual generator's normalisation, LayerNorm as in the authors' code (the default: no train/eval
# mismatch at sampling) or BatchNorm1d as the paper's text. Neither sees a real row.
GENERATOR_NORMS = {"layer": nn.LayerNorm, "batch": nn.BatchNorm1d}

# Noise batches that set a batch-normalised generator's running statistics after training.
NORM_STAT_BATCHES = 100

# ---------------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------------

def build_autoencoder(preset: Preset, width: int, latent_dim: int) -> tuple[nn.Module, nn.Module]:
    """Encoder and decoder; the decoder returns logits (sigmoid applied by the loss and by sampling)."""
    if preset.encoder == "mlp":
        hidden = (width + latent_dim) // 2
        encoder = nn.Sequential(nn.Linear(width, hidden), nn.LeakyReLU(0.2),
                                nn.Linear(hidden, latent_dim), nn.LeakyReLU(0.2))
        decoder = nn.Sequential(nn.Linear(latent_dim, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, width))
    else:
        encoder = nn.Sequential(nn.Linear(width, latent_dim), nn.Tanh())
        decoder = nn.Sequential(nn.Linear(latent_dim, width))
    return encoder, decoder


class ResidualGenerator(nn.Module):
    """App. E.1: blocks Linear(no bias) → norm → LeakyReLU(0.2); h = b0(z)+z, h = b1(h)+h, b2(h)."""

    def __init__(self, noise_dim: int, latent_dim: int, norm: str = "layer"):
        super().__init__()
        layer = GENERATOR_NORMS[norm]
        block = lambda i, o: nn.Sequential(nn.Linear(i, o, bias=False), layer(o), nn.LeakyReLU(0.2))  # noqa: E731
        self.blocks = nn.ModuleList([block(noise_dim, noise_dim), block(noise_dim, noise_dim),
                                     block(noise_dim, latent_dim)])

    def forward(self, z: Tensor) -> Tensor:
        h = self.blocks[0](z) + z
        h = self.blocks[1](h) + h
        return self.blocks[2](h)


def build_generator(preset: Preset, noise_dim: int, latent_dim: int, norm: str = "layer") -> nn.Module:
    if preset.generator == "residual":
        return ResidualGenerator(noise_dim, latent_dim, norm)
    return nn.Sequential(nn.Linear(noise_dim, latent_dim), nn.LeakyReLU(0.2),
                         nn.Linear(latent_dim, latent_dim), nn.Tanh())


def build_discriminator(preset: Preset, width: int) -> nn.Module:
    """A critic with a linear output (no sigmoid), as in the paper's appendices D and E."""
    sizes = [width] + [max(1, round(h * width)) if h <= 1 else int(h) for h in preset.discriminator]
    layers: list[nn.Module] = []
    for i, o in zip(sizes[:-1], sizes[1:], strict=True):
        layers += [nn.Linear(i, o), nn.LeakyReLU(0.2)]
    return nn.Sequential(*layers, nn.Linear(sizes[-1], 1))


def reconstruction_loss(logits: Tensor, x: Tensor, reduction: str) -> Tensor:
    """Per-example BCE over the coordinates, mean or sum (docs/methods/dp-auto-gan.md#autoencoder-phase)."""
    bce = F.binary_cross_entropy_with_logits(logits, x, reduction="none")
    return bce.mean(dim=1) if reduction == "mean" else bce.sum(dim=1)


# ---------------------------------------------------------------------------------------------
# Privacy plan
# ---------------------------------------------------------------------------------------------

def make_plan_accountant(name: str, target_epsilon: float) -> Accountant:
    if name == "rdp":
        return RDPAccountant(conversion="classic")  # the paper's conversion (docs/methods/dp-auto-gan.md#accounting)
    if name == "prv":
        return PRVAccountant.for_target(target_epsilon)
    raise ValueError(f"accountant must be 'rdp' or 'prv', got {name!r}")


def published_phases(setting: Setting, n_rows: int, ae_batch_size: float, disc_batch_size: float,
                     ae_steps: int) -> list[Phase]:
    return [Phase(ae_batch_size / n_rows, setting.ae_noise, ae_steps),
            Phase(disc_batch_size / n_rows, setting.disc_noise, setting.disc_steps)]


def choose_setting(settings: tuple[Setting, ...], epsilon: float, noise: str,
                   published_epsilon=None) -> Setting:
    """`calibrate`: the published setting nearest the budget in log ε (its noise ratio and step
    counts); `published`: the one with the largest ε (as the ledger will account it) within budget."""
    if noise == "calibrate":
        return min(settings, key=lambda s: abs(math.log(s.epsilon / epsilon)))
    within = [s for s in settings if published_epsilon(s) <= epsilon]
    if not within:
        raise ValueError(f"no published setting fits ε = {epsilon:g}: the smallest spends "
                         f"ε = {min(published_epsilon(s) for s in settings):.4f}; use noise='calibrate'")
    return max(within, key=published_epsilon)


# ---------------------------------------------------------------------------------------------
# The generator
# ---------------------------------------------------------------------------------------------

class DPAutoGAN:
    def __init__(self, preset: str, noise: str, accountant: str, decoding: str, device: str, encoder_mode: str,
                 generator_ema: float, generator_norm: str,
                 latent_dim: int | None, noise_dim: int | None, ae_steps: int | None, ae_batch_size: int | None,
                 ae_lr: float | None, ae_clip_norm: float | None, disc_steps: int | None, d_per_g: int | None,
                 disc_batch_size: int | None, disc_lr: float | None, gen_lr: float | None,
                 disc_clip_norm: float | None, weight_clamp: float | None):
        if preset not in PRESETS:
            raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {preset!r}")
        if noise not in ("calibrate", "published"):
            raise ValueError(f"noise must be 'calibrate' or 'published', got {noise!r}")
        if accountant not in ("rdp", "prv"):
            raise ValueError(f"accountant must be 'rdp' or 'prv', got {accountant!r}")
        if decoding not in ("argmax", "sample"):
            raise ValueError(f"decoding must be 'argmax' or 'sample', got {decoding!r}")
        if encoder_mode not in ENCODER_MODES:
            raise ValueError(f"encoder_mode must be one of {ENCODER_MODES}, got {encoder_mode!r}")
        if not 0 <= generator_ema < 1:
            raise ValueError(f"generator_ema must be in [0, 1), got {generator_ema!r}")
        if generator_norm not in GENERATOR_NORMS:
            raise ValueError(f"generator_norm must be one of {sorted(GENERATOR_NORMS)}, got {generator_norm!r}")
        if generator_norm != "layer" and PRESETS[preset].generator != "residual":
            raise ValueError(f"generator_norm applies to the residual generator; preset {preset!r}'s has no norm layer")
        if noise == "published" and disc_steps is not None:
            raise ValueError("noise='published' uses the published critic step counts; leave disc_steps unset")
        self.preset, self.noise, self.accountant, self.decoding, self.device = preset, noise, accountant, decoding, device
        self.encoder_mode, self.generator_ema, self.generator_norm = encoder_mode, generator_ema, generator_norm
        self.latent_dim, self.noise_dim = latent_dim, noise_dim
        self.ae_steps, self.ae_batch_size, self.ae_lr, self.ae_clip_norm = ae_steps, ae_batch_size, ae_lr, ae_clip_norm
        self.disc_steps, self.d_per_g, self.disc_batch_size = disc_steps, d_per_g, disc_batch_size
        self.disc_lr, self.gen_lr, self.disc_clip_norm, self.weight_clamp = disc_lr, gen_lr, disc_clip_norm, weight_clamp
        for name in OVERRIDABLE:
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive, got {value!r}")

    def settings(self) -> dict[str, Any]:
        """The preset's values with this instance's overrides (disc_steps from the first setting)."""
        preset = PRESETS[self.preset]
        base = {name: getattr(preset, name) for name in OVERRIDABLE if hasattr(preset, name)}
        base["disc_steps"] = preset.settings[0].disc_steps
        return {**base, **{n: getattr(self, n) for n in OVERRIDABLE if getattr(self, n) is not None}}

    # --- fit ------------------------------------------------------------------------------------
    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        with single_thread():
            return self._fit(train, schema, budget, seed)

    def _fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        preset, hp = PRESETS[self.preset], self.settings()
        if budget.is_private and self.disc_lr is None and preset.private_disc_lr is not None:
            hp["disc_lr"] = preset.private_disc_lr
        self.encoding_ = MixedEncoding(schema)
        device = resolve_device(self.device)
        x = torch.as_tensor(self.encoding_.encode(train), device=device)
        n_rows, width = x.shape
        # An expected batch cannot exceed the table (q ≤ 1); only tiny tables are affected.
        hp["ae_batch_size"], hp["disc_batch_size"] = min(hp["ae_batch_size"], n_rows), min(hp["disc_batch_size"], n_rows)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed)
            encoder, decoder = (m.to(device) for m in build_autoencoder(preset, width, hp["latent_dim"]))
            autoencoder = {"encoder": encoder, "decoder": decoder}
            if self.encoder_mode == "frozen_random":
                encoder.requires_grad_(False)
                del autoencoder["encoder"]
            generator = build_generator(preset, hp["noise_dim"], hp["latent_dim"], self.generator_norm).to(device)
            critic = build_discriminator(preset, width).to(device)
            ae_opt = torch.optim.Adam([p for m in autoencoder.values() for p in m.parameters()], lr=hp["ae_lr"],
                                      betas=(0.9, 0.999), weight_decay=preset.ae_weight_decay)
            d_opt = torch.optim.RMSprop(critic.parameters(), lr=hp["disc_lr"], alpha=0.99)
            g_opt = torch.optim.RMSprop(generator.parameters(), lr=hp["gen_lr"], alpha=0.99)
            if budget.is_private:
                dp, ae_phase, d_phase, self.setting_ = self._plan_private(
                    budget, seed, n_rows, hp, autoencoder, critic, ae_opt, d_opt)
            else:
                dp, self.setting_ = None, None
                ae_phase = PlainPhase([ae_opt], n_rows=n_rows, batch_size=hp["ae_batch_size"],
                                      steps=hp["ae_steps"], seed=seed)
                d_phase = PlainPhase([d_opt], n_rows=n_rows, batch_size=hp["disc_batch_size"],
                                     steps=hp["disc_steps"], seed=seed + 1)
            train_autoencoder(ae_phase, encoder, decoder, x, preset.loss_reduction)
            decoder.requires_grad_(False)
            generator_steps = train_gan(d_phase, critic, generator, decoder, x, g_opt, d_per_g=hp["d_per_g"],
                                        noise_dim=hp["noise_dim"], gen_batch_size=hp["disc_batch_size"],
                                        weight_clamp=hp["weight_clamp"], ema_decay=self.generator_ema)
        # Released: decoder and generator only; encoder and critic are dropped here.
        self.decoder_, self.generator_ = decoder.eval(), generator.eval()
        self.noise_dim_, self.device_ = hp["noise_dim"], device
        self.generator_steps_ = generator_steps
        if dp is None:
            return Ledger.non_private(Guarantee.FORMAL, "DP-auto-GAN trained without clipping or noise (ε = ∞)")
        ledger = dp.ledger()
        ledger.check_within(budget)
        return ledger

    def _plan_private(self, budget, seed, n_rows, hp, autoencoder, critic, ae_opt, d_opt):
        preset = PRESETS[self.preset]
        accountant = make_plan_accountant(self.accountant, budget.epsilon)

        @cache
        def spent(s: Setting) -> float:
            return accountant.epsilon(published_phases(s, n_rows, hp["ae_batch_size"], hp["disc_batch_size"],
                                                       hp["ae_steps"]), budget.delta)

        setting = choose_setting(preset.settings, budget.epsilon, self.noise, spent)
        if self.noise == "published":
            disc_steps = setting.disc_steps
            # The published pair is the calibration anchor: a tolerance of 1e-6 · ε keeps the
            # calibrated multipliers within a millionth of (ψ1, ψ3), never below them.
            target, tolerance = Budget(spent(setting), budget.delta), 1e-6 * spent(setting)
        else:
            disc_steps = self.disc_steps if self.disc_steps is not None else setting.disc_steps
            target, tolerance = budget, None
        dp = DPSGD(target, accountant=accountant, seed=seed, tolerance=tolerance)
        ae_phase = dp.add_phase("autoencoder", autoencoder, ae_opt, n_rows=n_rows,
                                batch_size=hp["ae_batch_size"], steps=hp["ae_steps"], clip_norm=hp["ae_clip_norm"],
                                clipping="flat", noise_weight=setting.ae_noise)
        d_phase = dp.add_phase("discriminator", {"discriminator": critic}, d_opt, n_rows=n_rows,
                               batch_size=hp["disc_batch_size"], steps=disc_steps, clip_norm=hp["disc_clip_norm"],
                               clipping="flat", noise_weight=setting.disc_noise)
        dp.calibrate()
        return dp, ae_phase, d_phase, replace(setting, disc_steps=disc_steps)

    # --- sample ---------------------------------------------------------------------------------
    def sample(self, n: int, seed: int) -> pd.DataFrame:
        probabilities = self.sample_encoded(n, seed)
        return self.encoding_.decode(probabilities, self.decoding, np.random.default_rng(seed))

    @torch.no_grad()
    def sample_encoded(self, n: int, seed: int) -> np.ndarray:
        """Post(De(G(z))) before decoding: rows in [0, 1]^n."""
        noise = torch.Generator(device=self.device_).manual_seed(seed)
        chunks = []
        for start in range(0, n, 8192):
            z = torch.randn(min(8192, n - start), self.noise_dim_, generator=noise, device=self.device_)
            chunks.append(torch.sigmoid(self.decoder_(self.generator_(z))).cpu().numpy())
        return np.concatenate(chunks) if chunks else np.zeros((0, self.encoding_.width), dtype=np.float32)


# ---------------------------------------------------------------------------------------------
# Training loops (shared by the private and the non-private fit)
# ---------------------------------------------------------------------------------------------

def train_autoencoder(phase, encoder: nn.Module, decoder: nn.Module, x: Tensor, reduction: str) -> None:
    """Phase 1: per-example reconstruction loss on each Poisson batch."""
    encoder.train(), decoder.train()
    for idx in phase.batches():
        batch = x[idx]
        phase.step(reconstruction_loss(decoder(encoder(batch)), batch, reduction))


def moving_average(decay: float) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    """`AveragedModel`'s update for an exponential moving average with warm-up: the plain mean of
    the first 1 / (1 − decay) iterates, then weight 1 − decay on each new one. Without the warm-up a
    short run (the golden grid's 14 generator steps) would release a generator still 88 % the first
    iterate; on the ADULT preset's 1,000 steps the first 100 iterates weigh 0.99⁹⁰⁰ ≈ 1e-4 either way."""
    def update(averaged: Tensor, current: Tensor, num_averaged: Tensor) -> Tensor:
        weight = torch.clamp(1.0 / (num_averaged + 1), min=1.0 - decay)
        return averaged + weight * (current - averaged)
    return update


def train_gan(phase, critic: nn.Module, generator: nn.Module, decoder: nn.Module, x: Tensor,
              g_opt: torch.optim.Optimizer, *, d_per_g: int, noise_dim: int, gen_batch_size: int,
              weight_clamp: float, ema_decay: float) -> int:
    """Phase 2: `d_per_g` private critic steps, then one generator step, until the
    phase's critic steps are spent; the generator ends as the moving average of its iterates with
    decay `ema_decay` (0: the last iterate; see `moving_average`). Returns the number of generator steps.

    The generator step runs with the critic phase's per-example hooks detached (each chunk of
    critic batches is its own `batches()` iteration, closed before the generator moves) and the
    critic frozen, so no generator-side gradient can reach the critic's noisy update."""
    device = x.device
    generator_steps = 0
    average = AveragedModel(generator, avg_fn=moving_average(ema_decay))
    while phase.steps_taken < phase.planned_steps:
        chunk: Iterator[Tensor] = phase.batches()
        try:
            for _, idx in zip(range(d_per_g), chunk):
                critic_step(phase, critic, generator, decoder, x[idx], noise_dim, weight_clamp)
        finally:
            chunk.close()
        generator_step(generator, decoder, critic, g_opt, gen_batch_size, noise_dim, device)
        generator_steps += 1
        average.update_parameters(generator)
    generator.load_state_dict(average.module.state_dict())
    if any(isinstance(m, nn.BatchNorm1d) for m in generator.modules()):
        # The average carries no running statistics of its own: take them from noise through the
        # released weights (post-processing; no real row is read).
        with torch.no_grad():
            update_bn([torch.randn(gen_batch_size, noise_dim, device=device) for _ in range(NORM_STAT_BATCHES)],
                      generator)
    return generator_steps


def fake_rows(generator: nn.Module, decoder: nn.Module, n: int, noise_dim: int, device: torch.device) -> Tensor:
    z = torch.randn(n, noise_dim, device=device)
    return torch.sigmoid(decoder(generator(z)))


def critic_step(phase, critic: nn.Module, generator: nn.Module, decoder: nn.Module, real: Tensor,
                noise_dim: int, weight_clamp: float) -> None:
    """One DP step on the critic: per real row i, loss D(fake_i) − D(real_i) with a fresh fake;
    both terms sit inside row i's clipped gradient."""
    critic.train()
    with torch.no_grad():
        fake = fake_rows(generator, decoder, len(real), noise_dim, real.device)
    phase.step((critic(fake) - critic(real)).squeeze(1))
    if weight_clamp:
        with torch.no_grad():  # classic WGAN weight clipping: post-processing of the noisy update
            for p in critic.parameters():
                p.clamp_(-weight_clamp, weight_clamp)


def generator_step(generator: nn.Module, decoder: nn.Module, critic: nn.Module, g_opt: torch.optim.Optimizer,
                   batch_size: int, noise_dim: int, device: torch.device) -> None:
    """Non-private step on −mean D(De(G(z))) (Alg. 5): no real row is read."""
    critic.requires_grad_(False)
    try:
        g_opt.zero_grad(set_to_none=True)
        loss = -critic(fake_rows(generator, decoder, batch_size, noise_dim, device)).mean()
        loss.backward()
        g_opt.step()
    finally:
        critic.requires_grad_(True)
