"""The code of `dpgym.plugins.generators.dp_vae`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.generators.dp_vae`, which holds the spec."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from dpgym import Budget, Guarantee, Ledger, Schema
from dpgym.privacy import DPSGD, Accountant, Phase
from dpgym.plugins.generators.dp_autogan.model import make_plan_accountant
from dpgym.plugins.nn.mixed import MixedEncoding
from dpgym.plugins.nn.phases import PlainPhase
from dpgym.plugins.nn.runtime import resolve_device, single_thread

ARCHITECTURES = ("autogan", "sap")
# The paper's DP-VAE noise multipliers (docs/methods/dp-auto-gan.md#dp-vae-baseline), by the ε they
# were run at.
SAP_PUBLISHED_NOISE = {0.36: 5.0, 0.51: 4.0, 1.01: 2.0}
SAP_HIDDEN, SAP_DROPOUT, SAP_REPARAMETERISATION_STD = 32, 0.6, 15.0
SAP_PUBLIC_EPOCHS = 100  # the notebook's non-private run


class GaussianEncoder(nn.Module):
    def __init__(self, body: nn.Module, hidden: int, latent_dim: int):
        super().__init__()
        self.body = body
        self.mean = nn.Linear(hidden, latent_dim)
        self.log_var = nn.Linear(hidden, latent_dim)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        h = self.body(x)
        return self.mean(h), self.log_var(h).clamp(-10.0, 10.0)


def build_networks(architecture: str, width: int, latent_dim: int) -> tuple[GaussianEncoder, nn.Module]:
    if architecture == "sap":
        body = nn.Sequential(nn.Linear(width, SAP_HIDDEN), nn.Sigmoid(), nn.Dropout(SAP_DROPOUT))
        encoder = GaussianEncoder(body, SAP_HIDDEN, latent_dim)
        decoder = nn.Sequential(nn.Linear(latent_dim, SAP_HIDDEN), nn.ReLU(), nn.Linear(SAP_HIDDEN, width))
        return encoder, decoder
    hidden = (width + latent_dim) // 2
    encoder = GaussianEncoder(nn.Sequential(nn.Linear(width, hidden), nn.LeakyReLU(0.2)), hidden, latent_dim)
    decoder = nn.Sequential(nn.Linear(latent_dim, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, width))
    return encoder, decoder


def reparameterise(encoder: GaussianEncoder, x: Tensor, std: float, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """z = μ + σ·std·ε with ε ~ N(0, I); returns z and the per-row KL(q(z|x) ‖ N(0, I))."""
    mean, log_var = encoder(x)
    noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
    z = mean + torch.exp(0.5 * log_var) * noise * std
    kl = 0.5 * (mean.square() + log_var.exp() - 1.0 - log_var).sum(dim=1)
    return z, kl


def vae_loss(encoder: GaussianEncoder, decoder: nn.Module, x: Tensor, architecture: str) -> Tensor:
    """Per row: (BCE summed over coordinates + KL) / n for ``autogan`` (the ELBO per coordinate);
    mean BCE + KL for ``sap`` (Keras's averaged binary cross-entropy plus the unscaled KL)."""
    std = SAP_REPARAMETERISATION_STD if architecture == "sap" else 1.0
    z, kl = reparameterise(encoder, x, std)
    bce = F.binary_cross_entropy_with_logits(decoder(z), x, reduction="none").sum(dim=1)
    return (bce + kl * (x.shape[1] if architecture == "sap" else 1.0)) / x.shape[1]


def steps_within_budget(accountant: Accountant, sample_rate: float, noise_multiplier: float, budget: Budget,
                        cap: int) -> int:
    """The most steps (≤ cap) at this noise that spend at most the budget: the notebook's
    privacy early stop, decided before training."""
    def fits(steps: int) -> bool:
        return accountant.epsilon([Phase(sample_rate, noise_multiplier, steps)], budget.delta) <= budget.epsilon

    if fits(cap):
        return cap
    lo, hi = 0, cap
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    if lo == 0:
        raise ValueError(f"noise multiplier {noise_multiplier:g} cannot take one step within ε = {budget.epsilon:g}")
    return lo


def published_noise(epsilon: float) -> float:
    """The paper's DP-VAE noise multiplier at the published ε nearest this one (in log ε)."""
    nearest = min(SAP_PUBLISHED_NOISE, key=lambda e: abs(math.log(e / epsilon)))
    return SAP_PUBLISHED_NOISE[nearest]


class DPVAE:
    def __init__(self, architecture: str, latent_dim: int, steps: int, batch_size: int, optimizer: str, lr: float,
                 clip_norm: float, noise: str, accountant: str, decoding: str, device: str):
        for name, value in (("latent_dim", latent_dim), ("steps", steps), ("batch_size", batch_size),
                            ("lr", lr), ("clip_norm", clip_norm)):
            if not value > 0:
                raise ValueError(f"{name} must be positive, got {value!r}")
        for name, value, allowed in (("architecture", architecture, ARCHITECTURES), ("optimizer", optimizer, ("adam", "sgd")),
                                     ("noise", noise, ("calibrate", "published")), ("accountant", accountant, ("rdp", "prv")),
                                     ("decoding", decoding, ("argmax", "sample"))):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
        if noise == "published" and architecture != "sap":
            raise ValueError("noise='published' is the paper's noise for its (SAP) DP-VAE: use architecture='sap'")
        self.architecture, self.latent_dim, self.steps, self.batch_size = architecture, latent_dim, steps, batch_size
        self.optimizer, self.lr, self.clip_norm, self.noise = optimizer, lr, clip_norm, noise
        self.accountant, self.decoding, self.device = accountant, decoding, device

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        with single_thread():
            return self._fit(train, schema, budget, seed)

    def _fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        self.encoding_ = MixedEncoding(schema)
        device = resolve_device(self.device)
        x = torch.as_tensor(self.encoding_.encode(train), device=device)
        n_rows, width = x.shape
        batch_size = min(self.batch_size, n_rows)  # q ≤ 1; only tiny tables are affected
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed)
            encoder, decoder = (net.to(device) for net in build_networks(self.architecture, width, self.latent_dim))
            parameters = [*encoder.parameters(), *decoder.parameters()]
            optimizer = (torch.optim.Adam(parameters, lr=self.lr) if self.optimizer == "adam"
                         else torch.optim.SGD(parameters, lr=self.lr))
            if budget.is_private:
                accountant = make_plan_accountant(self.accountant, budget.epsilon)
                steps = self.steps
                if self.noise == "published":
                    steps = steps_within_budget(accountant, batch_size / n_rows, published_noise(budget.epsilon),
                                                budget, self.steps)
                dp = DPSGD(budget, accountant=accountant, seed=seed)
                phase = dp.add_phase("vae", {"encoder": encoder, "decoder": decoder}, optimizer, n_rows=n_rows,
                                     batch_size=batch_size, steps=steps, clip_norm=self.clip_norm, clipping="flat")
            else:
                dp = None
                steps = self.steps if self.noise == "calibrate" else min(self.steps, SAP_PUBLIC_EPOCHS * n_rows // batch_size)
                phase = PlainPhase([optimizer], n_rows=n_rows, batch_size=batch_size, steps=steps, seed=seed)
            for idx in phase.batches():
                phase.step(vae_loss(encoder, decoder, x[idx], self.architecture))
        # The notebook generates through the encoder, so ``sap`` releases it; ``autogan`` does not.
        self.encoder_ = encoder.eval() if self.architecture == "sap" else None
        self.decoder_, self.device_, self.width_ = decoder.eval(), device, width
        if dp is None:
            return Ledger.non_private(Guarantee.FORMAL, "DP-VAE trained without clipping or noise (ε = ∞)")
        ledger = dp.ledger()
        ledger.check_within(budget)
        return ledger

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        return self.encoding_.decode(self.sample_encoded(n, seed), self.decoding, np.random.default_rng(seed))

    @torch.no_grad()
    def sample_encoded(self, n: int, seed: int) -> np.ndarray:
        noise = torch.Generator(device=self.device_).manual_seed(seed)
        if self.encoder_ is None:
            z = torch.randn(n, self.latent_dim, generator=noise, device=self.device_)
        else:
            inputs = torch.randn(n, self.width_, generator=noise, device=self.device_)
            z, _ = reparameterise(self.encoder_, inputs, SAP_REPARAMETERISATION_STD, noise)
        return torch.sigmoid(self.decoder_(z)).cpu().numpy()
