"""The code of `dpgym.plugins.generators.dp_merf`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.generators.dp_merf`, which holds the spec."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from dpgym import Budget, GaussianEvent, Guarantee, Ledger, Schema
from dpgym.privacy import calibrate_gaussian
from dpgym.plugins.nn.runtime import resolve_device, single_thread
from dpgym.plugins.nn.tabular import (
    sample_labelled,
    EncodedOutput,
    LabelledLayout,
    normalised_counts,
    seeded_torch,
)


def public_bandwidth(n_numeric: int) -> float:
    """ℓ = √(p/6): RMS distance of two uniform points of [0, 1]^p (module docstring)."""
    return math.sqrt(max(n_numeric, 1) / 6.0)


class FeatureMap(nn.Module):
    """φ(x) of the module docstring on encoded rows; ‖φ(x)‖₂² = `squared_norm` for every row."""

    def __init__(self, layout: LabelledLayout, num_features: int, bandwidth: float, generator: torch.Generator):
        super().__init__()
        numeric = layout.numeric_positions()
        categorical = [i for start, stop in layout.categorical_blocks() for i in range(start, stop)]
        self.n_categorical_columns = len(layout.categorical_blocks())
        self.register_buffer("numeric", torch.as_tensor(numeric, dtype=torch.long))
        self.register_buffer("categorical", torch.as_tensor(categorical, dtype=torch.long))
        frequencies = torch.randn(num_features // 2, len(numeric), generator=generator, dtype=torch.float64) / bandwidth
        self.register_buffer("frequencies", frequencies)
        self.num_features = num_features

    @property
    def squared_norm(self) -> int:
        return int(len(self.numeric) > 0) + int(self.n_categorical_columns > 0)

    @property
    def width(self) -> int:
        return (self.num_features if len(self.numeric) else 0) + len(self.categorical)

    def forward(self, x: Tensor) -> Tensor:
        parts = []
        if len(self.numeric):
            projection = x[:, self.numeric] @ self.frequencies.to(x.dtype).T
            scale = math.sqrt(2.0 / self.num_features)
            parts += [scale * torch.cos(projection), scale * torch.sin(projection)]
        if self.n_categorical_columns:
            parts.append(x[:, self.categorical] / math.sqrt(self.n_categorical_columns))
        return torch.cat(parts, dim=1)


def embedding_release(features: Tensor, labels: Tensor, n_classes: int) -> Tensor:
    """R(X) = (S, m) of the module docstring, flattened: S = Σ φ(x_i) y_iᵀ then the class counts m."""
    onehot = torch.nn.functional.one_hot(labels, n_classes).to(features.dtype)
    return torch.cat([(features.T @ onehot).flatten(), onehot.sum(dim=0)])


def l2_sensitivity(feature_map: FeatureMap) -> float:
    """Δ₂ = √(‖φ‖² + 1) under add/remove adjacency (module docstring)."""
    return math.sqrt(feature_map.squared_norm + 1)


class MerfGenerator(nn.Module):
    """(noise, class) → encoded row: the reference code's two-hidden-layer generator."""

    def __init__(self, noise_dim: int, n_classes: int, layout: LabelledLayout):
        super().__init__()
        d = layout.features.width
        self.body = nn.Sequential(
            nn.Linear(noise_dim + n_classes, 4 * d), nn.BatchNorm1d(4 * d), nn.ReLU(),
            nn.Linear(4 * d, 2 * d), nn.BatchNorm1d(2 * d), nn.ReLU(),
            nn.Linear(2 * d, d),
        )
        self.head = EncodedOutput(layout)
        self.noise_dim, self.n_classes = noise_dim, n_classes

    def forward(self, z: Tensor, labels: Tensor) -> Tensor:
        onehot = torch.nn.functional.one_hot(labels, self.n_classes).to(z.dtype)
        return self.head(self.body(torch.cat([z, onehot], dim=1)))


class DPMERF:
    def __init__(self, num_features: int, bandwidth: float | None, iterations: int, batch_size: int,
                 learning_rate: float, noise_dim: int, device: str):
        if num_features < 2 or num_features % 2:
            raise ValueError(f"num_features must be an even number ≥ 2 (cos and sin pairs), got {num_features}")
        if bandwidth is not None and not bandwidth > 0:
            raise ValueError(f"bandwidth must be positive or None (the public rule), got {bandwidth}")
        if iterations < 1 or batch_size < 2 or noise_dim < 1 or not learning_rate > 0:
            raise ValueError("iterations ≥ 1, batch_size ≥ 2, noise_dim ≥ 1 and learning_rate > 0 are required")
        self.num_features, self.bandwidth, self.iterations = num_features, bandwidth, iterations
        self.batch_size, self.learning_rate, self.noise_dim, self.device = batch_size, learning_rate, noise_dim, device

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        device = resolve_device(self.device)
        frequency_seed, noise_seed, model_seed = np.random.SeedSequence(seed).generate_state(3).tolist()
        self.layout_ = layout = LabelledLayout.of(schema)
        n_numeric = len(layout.numeric_positions())
        self.bandwidth_ = self.bandwidth if self.bandwidth is not None else public_bandwidth(n_numeric)
        self.feature_map_ = FeatureMap(layout, self.num_features, self.bandwidth_,
                                       torch.Generator().manual_seed(frequency_seed)).to(device)
        k = layout.n_classes
        with single_thread():
            release = self._exact_release(train, device)
        ledger = self._privatise(release, budget, noise_seed)
        sums, counts = release[:-k].reshape(-1, k), release[-k:].numpy()
        self.proportions_ = normalised_counts(counts)
        target = (sums / torch.clamp(torch.as_tensor(counts), min=1.0)).T.float().to(device)  # (K, F) class means
        with seeded_torch(model_seed, device), single_thread():
            self.generator_ = MerfGenerator(self.noise_dim, k, layout).to(device)
            self.loss_ = self._train(target, device)
        self.device_ = device
        return ledger

    def _exact_release(self, train: pd.DataFrame, device: torch.device) -> Tensor:
        """R(X) in float64, summed over chunks of rows (a 32k × 2k feature matrix would take 0.5 GB)."""
        x = self.layout_.features.encode(train)
        labels = self.layout_.labels(train)
        total = None
        for start in range(0, max(len(x), 1), 4096):
            rows = torch.as_tensor(x[start:start + 4096], dtype=torch.float64, device=device)
            part = embedding_release(self.feature_map_(rows), torch.as_tensor(labels[start:start + 4096], device=device),
                                     self.layout_.n_classes)
            total = part if total is None else total + part
        return total.cpu()

    def _privatise(self, release: Tensor, budget: Budget, seed: int) -> Ledger:
        """Add the Gaussian noise in place (float64) and return the ledger."""
        if not budget.is_private:
            return Ledger.non_private(Guarantee.FORMAL, "exact class-conditional mean embeddings (ε = ∞)")
        sensitivity = l2_sensitivity(self.feature_map_)
        sigma = calibrate_gaussian(budget.epsilon, budget.delta) * sensitivity
        release += sigma * torch.randn(release.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        ledger = Ledger(Guarantee.FORMAL)
        ledger.record(GaussianEvent(l2_sensitivity=sensitivity, sigma=sigma), epsilon=budget.epsilon,
                      delta=budget.delta, accountant="analytic Gaussian (Balle & Wang 2018)",
                      description=f"random-feature sums per class ({self.feature_map_.width}×{self.layout_.n_classes}) "
                                  "and class counts, one joint release")
        return ledger

    def _stratified_labels(self, device: torch.device) -> Tensor:
        per_class = np.maximum(1, np.round(self.batch_size * self.proportions_)).astype(np.int64)
        return torch.repeat_interleave(torch.arange(len(per_class), device=device), torch.as_tensor(per_class, device=device))

    def _train(self, target: Tensor, device: torch.device) -> list[float]:
        """Minimise Σ_k ‖μ_k − mean φ(G(z, k))‖² (the DP-MERF objective); touches no private row."""
        labels = self._stratified_labels(device)
        k = self.layout_.n_classes
        onehot = torch.nn.functional.one_hot(labels, k).float()
        per_class = onehot.sum(dim=0)
        optimizer = torch.optim.Adam(self.generator_.parameters(), lr=self.learning_rate)
        self.generator_.train()
        losses = []
        for _ in range(self.iterations):
            z = torch.randn(len(labels), self.noise_dim, device=device)
            embedded = self.feature_map_(self.generator_(z, labels))
            means = (onehot.T @ embedded) / per_class[:, None]
            loss = ((target - means) ** 2).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
        return losses

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        labels = rng.choice(len(self.proportions_), size=n, p=self.proportions_)
        self.generator_.eval()
        return sample_labelled(self.generator_, labels, self.noise_dim, self.layout_, self.device_, rng)
