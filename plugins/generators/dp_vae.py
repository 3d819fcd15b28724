"""DP-VAE, the DP-auto-GAN paper's autoencoder baseline (Chen et al. 2018; Acs et al.; paper §4.2,
App. E.3): a variational autoencoder trained by DP-SGD on the same mixed-type encoding, sampled by
decoding draws from its standard-Gaussian latent prior.

The paper ran SAP's Keras notebook, whose architecture it does not restate (spec §2.3), so this
module uses DP-auto-GAN's ADULT autoencoder shape (n → (n+d)//2 → d, LeakyReLU(0.2), d = 15) with
Gaussian heads (μ, log σ²), and its phase-1 optimiser, batch and step count. The loss per row is
the negative ELBO divided by n: mean BCE over the coordinates + KL(q(z|x) ‖ N(0, I)) / n.
Encoder and decoder are clipped together (flat clipping) and noised; the noise multiplier is
calibrated to the budget on the same RDP accountant (classic conversion) as DP-auto-GAN.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from harness import Budget, GeneratorSpec, Guarantee, Ledger, Schema, hookimpl
from harness.privacy.dpsgd import DPSGD
from plugins.generators.dp_autogan import make_plan_accountant
from plugins.nn.mixed import MixedEncoding
from plugins.nn.phases import PlainPhase
from plugins.nn.runtime import resolve_device, single_thread


class GaussianEncoder(nn.Module):
    def __init__(self, width: int, hidden: int, latent_dim: int):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(width, hidden), nn.LeakyReLU(0.2))
        self.mean = nn.Linear(hidden, latent_dim)
        self.log_var = nn.Linear(hidden, latent_dim)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        h = self.body(x)
        return self.mean(h), self.log_var(h).clamp(-10.0, 10.0)


def negative_elbo(encoder: GaussianEncoder, decoder: nn.Module, x: Tensor) -> Tensor:
    """Per-row (BCE summed over coordinates + KL to N(0, I)) / n, one reparameterised draw."""
    mean, log_var = encoder(x)
    z = mean + torch.exp(0.5 * log_var) * torch.randn_like(mean)
    bce = F.binary_cross_entropy_with_logits(decoder(z), x, reduction="none").sum(dim=1)
    kl = 0.5 * (mean.square() + log_var.exp() - 1.0 - log_var).sum(dim=1)
    return (bce + kl) / x.shape[1]


class DPVAE:
    def __init__(self, latent_dim: int, steps: int, batch_size: int, lr: float, clip_norm: float,
                 accountant: str, decoding: str, device: str):
        for name, value in (("latent_dim", latent_dim), ("steps", steps), ("batch_size", batch_size),
                            ("lr", lr), ("clip_norm", clip_norm)):
            if not value > 0:
                raise ValueError(f"{name} must be positive, got {value!r}")
        if accountant not in ("rdp", "prv"):
            raise ValueError(f"accountant must be 'rdp' or 'prv', got {accountant!r}")
        if decoding not in ("argmax", "sample"):
            raise ValueError(f"decoding must be 'argmax' or 'sample', got {decoding!r}")
        self.latent_dim, self.steps, self.batch_size, self.lr = latent_dim, steps, batch_size, lr
        self.clip_norm, self.accountant, self.decoding, self.device = clip_norm, accountant, decoding, device

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        with single_thread():
            return self._fit(train, schema, budget, seed)

    def _fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        self.encoding_ = MixedEncoding(schema)
        device = resolve_device(self.device)
        x = torch.as_tensor(self.encoding_.encode(train), device=device)
        n_rows, width = x.shape
        hidden = (width + self.latent_dim) // 2
        batch_size = min(self.batch_size, n_rows)  # q ≤ 1; only tiny tables are affected
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed)
            encoder = GaussianEncoder(width, hidden, self.latent_dim).to(device)
            decoder = nn.Sequential(nn.Linear(self.latent_dim, hidden), nn.LeakyReLU(0.2),
                                    nn.Linear(hidden, width)).to(device)
            optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=self.lr)
            if budget.is_private:
                dp = DPSGD(budget, accountant=make_plan_accountant(self.accountant, budget.epsilon), seed=seed)
                phase = dp.add_phase("vae", {"encoder": encoder, "decoder": decoder}, optimizer, n_rows=n_rows,
                                     batch_size=batch_size, steps=self.steps, clip_norm=self.clip_norm,
                                     clipping="flat")
            else:
                dp = None
                phase = PlainPhase([optimizer], n_rows=n_rows, batch_size=batch_size, steps=self.steps, seed=seed)
            for idx in phase.batches():
                phase.step(negative_elbo(encoder, decoder, x[idx]))
        self.decoder_, self.device_ = decoder.eval(), device  # the encoder is not released
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
        z = torch.randn(n, self.latent_dim, generator=noise, device=self.device_)
        return torch.sigmoid(self.decoder_(z)).cpu().numpy()


SPEC = GeneratorSpec(
    name="dp_vae",
    version="1",
    factory=DPVAE,
    guarantee=Guarantee.FORMAL,
    # Sizes and optimiser of DP-auto-GAN's ADULT phase 1 (spec §2.1): Adam 0.005, b = 64, T = 10,000.
    # Clip: the ELBO/n gradients are of the same order as the AE's; 0.012, as DP-auto-GAN's C1.
    defaults={"latent_dim": 15, "steps": 10_000, "batch_size": 64, "lr": 0.005, "clip_norm": 0.012,
              "accountant": "rdp", "decoding": "argmax", "device": "auto"},
    quick_params={"steps": 20},
    description="DP-VAE baseline of DP-auto-GAN: DP-SGD VAE on the mixed-type encoding, Gaussian prior sampling",
)


@hookimpl
def dpgym_generators() -> list[GeneratorSpec]:
    return [SPEC]
