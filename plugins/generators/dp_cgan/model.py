"""The code of `dpgym.plugins.generators.dp_cgan`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.generators.dp_cgan`, which holds the spec."""

from __future__ import annotations


import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from dpgym import Budget, GaussianEvent, Guarantee, Ledger, LedgerEntry, Schema
from dpgym.privacy import DPSGD, calibrate_gaussian
from dpgym.plugins.nn.runtime import resolve_device, single_thread
from dpgym.plugins.nn.tabular import (
    sample_labelled,
    EncodedOutput,
    LabelledLayout,
    normalised_counts,
    seeded_torch,
)


class Conditional(nn.Module):
    """An MLP on (input, one-hot class)."""

    def __init__(self, in_dim: int, n_classes: int, hidden: int, out_dim: int, activation: nn.Module,
                 head: nn.Module | None = None):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_dim + n_classes, hidden), activation, nn.Linear(hidden, out_dim))
        self.head = head if head is not None else nn.Identity()
        self.n_classes = n_classes

    def forward(self, x: Tensor, labels: Tensor) -> Tensor:
        onehot = F.one_hot(labels, self.n_classes).to(x.dtype)
        return self.head(self.body(torch.cat([x, onehot], dim=1)))


class DPCGAN:
    def __init__(self, steps: int, batch_size: int, clip_norm: float, noise_dim: int, hidden: int,
                 d_learning_rate: float, d_final_learning_rate: float, g_learning_rate: float,
                 label_share: float, accountant: str, device: str):
        if steps < 1 or batch_size < 1 or noise_dim < 1 or hidden < 1:
            raise ValueError("steps, batch_size, noise_dim and hidden must be ≥ 1")
        if not (clip_norm > 0 and d_learning_rate > 0 and d_final_learning_rate > 0 and g_learning_rate > 0):
            raise ValueError("clip_norm and learning rates must be positive")
        if not 0 < label_share < 1:
            raise ValueError(f"label_share must lie in (0, 1), got {label_share}")
        self.steps, self.batch_size, self.clip_norm, self.noise_dim, self.hidden = steps, batch_size, clip_norm, noise_dim, hidden
        self.d_learning_rate, self.d_final_learning_rate = d_learning_rate, d_final_learning_rate
        self.g_learning_rate, self.label_share, self.accountant, self.device = g_learning_rate, label_share, accountant, device

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        device = resolve_device(self.device)
        label_seed, sgd_seed, model_seed, fake_seed = np.random.SeedSequence(seed).generate_state(4).tolist()
        self.layout_ = layout = LabelledLayout.of(schema)
        n, k = len(train), layout.n_classes
        counts = np.bincount(layout.labels(train), minlength=k).astype(float)
        label_entry = self._release_counts(counts, budget, label_seed)
        self.proportions_ = normalised_counts(counts)
        x = torch.as_tensor(layout.features.encode(train), dtype=torch.float32, device=device)
        y = torch.as_tensor(layout.labels(train), device=device)
        width = layout.features.width
        with seeded_torch(model_seed, device):
            self.generator_ = Conditional(self.noise_dim, k, self.hidden, width, nn.ReLU(), EncodedOutput(layout)).to(device)
            discriminator = Conditional(width, k, self.hidden, 1, nn.LeakyReLU(0.2)).to(device)
        d_opt = torch.optim.SGD(discriminator.parameters(), lr=self.d_learning_rate)
        g_opt = torch.optim.Adam(self.generator_.parameters(), lr=self.g_learning_rate, betas=(0.5, 0.999))
        dp = DPSGD(budget, accountant=self.accountant, seed=sgd_seed)
        if label_entry is not None:
            dp.add_release(label_entry)
        phase = dp.add_phase("discriminator", discriminator, d_opt, n_rows=n, steps=self.steps,
                             batch_size=min(self.batch_size, n), clip_norm=self.clip_norm, clipping="flat")
        self.device_ = device
        with single_thread():
            self._train(phase, discriminator, d_opt, g_opt, x, y, torch.Generator(device=device).manual_seed(fake_seed))
        if not budget.is_private:
            return Ledger.non_private(Guarantee.FORMAL, "clipped, noiseless discriminator steps and exact class counts (ε = ∞)")
        return dp.ledger()

    def _release_counts(self, counts: np.ndarray, budget: Budget, seed: int) -> LedgerEntry | None:
        """Noise the class counts in place; return their ledger entry (its own ε and δ, alone)."""
        if not budget.is_private:
            return None
        epsilon, delta = self.label_share * budget.epsilon, self.label_share * budget.delta
        sigma = calibrate_gaussian(epsilon, delta)  # L2 sensitivity 1: one row moves one count by 1
        counts += np.random.default_rng(seed).normal(0.0, sigma, counts.shape)
        return LedgerEntry(GaussianEvent(l2_sensitivity=1.0, sigma=sigma), epsilon, delta,
                           "analytic Gaussian (Balle & Wang 2018)", f"class counts ({len(counts)} classes)")

    def _fake(self, m: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        labels = torch.multinomial(torch.as_tensor(self.proportions_, device=self.device_), m, replacement=True,
                                   generator=generator)
        z = torch.randn(m, self.noise_dim, generator=generator, device=self.device_)
        return self.generator_(z, labels), labels

    def _train(self, phase, discriminator: nn.Module, d_opt: torch.optim.Optimizer, g_opt: torch.optim.Optimizer,
               x: Tensor, y: Tensor, generator: torch.Generator) -> None:
        """One private discriminator step, then one generator step, `steps` times. Each discriminator
        step is its own `batches()` iteration, closed before the generator moves, so no generator-side
        gradient passes the phase's per-example hooks; the discriminator is frozen meanwhile."""
        m = max(1, round(phase.expected_batch_size))
        decay = (self.d_final_learning_rate - self.d_learning_rate) / max(1, self.steps - 1)
        for step in range(self.steps):
            for group in d_opt.param_groups:
                group["lr"] = self.d_learning_rate + decay * step
            batches = phase.batches()
            try:
                idx = next(batches)
                with torch.no_grad():
                    fake, fake_labels = self._fake(m, generator)
                # one forward over real and generated rows: the engine takes one output per row
                logits = discriminator(torch.cat([x[idx], fake]), torch.cat([y[idx], fake_labels])).squeeze(1)
                real = len(idx)
                phase.step(torch.cat([F.softplus(-logits[:real]), F.softplus(logits[real:])]), public_rows=m)
            finally:
                batches.close()
            discriminator.requires_grad_(False)
            fake, fake_labels = self._fake(m, generator)
            g_loss = F.softplus(-discriminator(fake, fake_labels)).mean()
            g_opt.zero_grad()
            g_loss.backward()
            g_opt.step()
            discriminator.requires_grad_(True)

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        labels = rng.choice(len(self.proportions_), size=n, p=self.proportions_)
        return sample_labelled(self.generator_, labels, self.noise_dim, self.layout_, self.device_, rng)
