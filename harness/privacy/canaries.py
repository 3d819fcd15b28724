"""Gradient canaries: the DP-SGD engine's side of the one-run audit (docs/privacy.md#one-run-audit).

The white-box variant of Steinke, Nasr & Jagielski (2023): while `gradient_canaries(included, seed)`
is active, every phase `dpgym.privacy.DPSGD` plans treats m canaries as extra training rows. Canary i is in
the training set when `included[i]` (a fair coin the audit drew); an included canary is sampled into
batches by the phase's own sampler, as rows are, and its clipped gradient is a Dirac vector: in every
layer ℓ, one coordinate chosen at random, of size C_ℓ (the layer's share of the clip norm, Σ C_ℓ² = C²).
That gradient satisfies every clipping strategy's bound (flat, per layer, per unit, sparse), so DP-SGD's
guarantee covers it as it covers any row. The auditor then sees what the threat model of the
guarantee lets it see, every noisy gradient sum, and scores each canary by its coordinates' noisy
values summed over the steps, weighted by C_ℓ/(σC)² (the matched filter; phases of different noise
combine by their weights). Included canaries score about C²/(σC)² per step they were sampled in,
excluded ones zero in expectation.

The generator's code is untouched: the engine reads the active canaries when a phase is planned. A
module-level switch rather than an argument, because the audit runs a generator's unmodified `fit`;
it is set only inside the audit's worker processes. Written by hand: Opacus has no canary hook, and
the audit libraries that have one (e.g. the authors' JAX code) train their own models.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch
from torch import Tensor, nn

_ACTIVE: GradientCanaries | None = None


class GradientCanaries:
    """m canaries, the coins that put each in the training set, and their scores so far."""

    def __init__(self, included: Sequence[bool], seed: int):
        self.included = np.asarray(included, dtype=bool)
        self.members = np.flatnonzero(self.included)  # canary ids of the extra rows, in order
        self.seed = seed
        self.scores = np.zeros(len(self.included))
        self.phases = 0  # how many phases observed them
        self.steps = 0

    def for_phase(self, layers: Sequence[tuple[nn.Module, float]]) -> PhaseCanaries:
        self.phases += 1
        return PhaseCanaries(self, layers, np.random.SeedSequence([self.seed, self.phases]).generate_state(1)[0])


class PhaseCanaries:
    """The canaries' coordinates in one phase's layers; inserts the sampled ones' gradients into the
    clipped sum and reads every canary's coordinates of the noisy sum."""

    def __init__(self, canaries: GradientCanaries, layers: Sequence[tuple[nn.Module, float]], seed: int):
        self.canaries = canaries
        generator = torch.Generator().manual_seed(int(seed))
        count = len(canaries.included)
        self.targets: list[tuple[nn.Parameter, Tensor, float]] = []
        for module, clip in layers:
            param = max((p for p in module.parameters(recurse=False) if p.requires_grad), key=lambda p: p.numel())
            self.targets.append((param, torch.randint(param.numel(), (count,), generator=generator), float(clip)))
        self.sampled: Tensor = torch.zeros(0, dtype=torch.long)
        self.clean: list[np.ndarray] = []

    @property
    def extra_rows(self) -> int:
        """Rows the phase's sampler draws beyond the training rows: the included canaries."""
        return len(self.canaries.members)

    def take(self, indices: Tensor, n_rows: int) -> Tensor:
        """Split a batch over training rows and canaries: keep the canaries sampled, return the rows."""
        extra = indices >= n_rows
        self.sampled = torch.as_tensor(self.canaries.members[(indices[extra] - n_rows).numpy()], dtype=torch.long)
        return indices[~extra]

    def insert(self, summed: dict[nn.Parameter, Tensor]) -> None:
        """Note the training rows' clipped sum at the canaries' coordinates, then add each sampled
        canary's clipped gradient (C_ℓ at its coordinate of every layer) to the sum."""
        self.clean = []
        for param, index, clip in self.targets:
            total = summed.get(param)
            if total is None:
                total = summed[param] = torch.zeros_like(param)
            coordinates = index.to(total.device)
            self.clean.append(total.detach().reshape(-1)[coordinates].double().cpu().numpy())
            if len(self.sampled):
                chosen = coordinates[self.sampled.to(total.device)]
                total.view(-1).index_add_(0, chosen, torch.full(chosen.shape, clip, dtype=total.dtype, device=total.device))

    def observe(self, noisy: dict[nn.Parameter, Tensor], std: float) -> None:
        """Add every canary's matched-filter statistic of this step's noisy sum, less the training rows'
        share, to its score."""
        for (param, index, clip), clean in zip(self.targets, self.clean, strict=True):
            values = noisy[param].detach().reshape(-1)[index.to(noisy[param].device)].double().cpu().numpy()
            self.canaries.scores += clip * (values - clean) / std ** 2
        self.canaries.steps += 1
        self.sampled = torch.zeros(0, dtype=torch.long)


def active() -> GradientCanaries | None:
    """The canaries the audit has switched on in this process, if any."""
    return _ACTIVE


@contextmanager
def gradient_canaries(included: Sequence[bool], seed: int) -> Iterator[GradientCanaries]:
    """Within this block, every DP-SGD phase planned trains with these canaries (module docstring)."""
    global _ACTIVE
    if _ACTIVE is not None:
        raise RuntimeError("gradient canaries are already active")
    _ACTIVE = GradientCanaries(included, seed)
    try:
        yield _ACTIVE
    finally:
        _ACTIVE = None
