"""Training phases with the DP engine's interface (`batches()`, `step(per_example_loss)`), so one
training loop serves a private fit (`dpgym.privacy.dpsgd.PrivatePhase`) and a non-private one
(ε = ∞: `PlainPhase`, no clipping, no noise, same Poisson batches and the same 1/(q·m) scaling).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from torch import Tensor


class PlainPhase:
    """Non-private stand-in for a DP-SGD phase: Poisson batches, plain gradient of the summed loss
    divided by the expected batch size."""

    def __init__(self, optimizers: Sequence[torch.optim.Optimizer], *, n_rows: int, batch_size: float,
                 steps: int, seed: int):
        self.optimizers = list(optimizers)
        self.n_rows, self.planned_steps = n_rows, steps
        self.sample_rate = min(1.0, batch_size / n_rows)
        self.steps_taken = 0
        self._sampling = torch.Generator().manual_seed(seed)

    @property
    def expected_batch_size(self) -> float:
        return self.sample_rate * self.n_rows

    def batches(self) -> Iterator[Tensor]:
        while self.steps_taken < self.planned_steps:
            mask = torch.rand(self.n_rows, generator=self._sampling) < self.sample_rate
            yield mask.nonzero().squeeze(1)

    def step(self, per_example_loss: Tensor) -> None:
        if per_example_loss.requires_grad and per_example_loss.numel() > 0:
            (per_example_loss.sum() / self.expected_batch_size).backward()
            for optimizer in self.optimizers:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
        self.steps_taken += 1



