"""Generators with planted privacy faults that their ledgers do not show, for the empirical audit's
tests: each ledger is `independent`'s or `dp_vae`'s and re-accounts to the budget, so only the audit
can catch them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pandas as pd
import torch

from dpgym import Budget, GaussianEvent, GeneratorSpec, Guarantee, Ledger, Schema, hookimpl
from dpgym.plugins.generators.dp_vae import SPEC as DP_VAE_SPEC
from dpgym.plugins.generators.dp_vae.model import DPVAE
from dpgym.plugins.generators.independent import SPEC as INDEPENDENT_SPEC
from dpgym.plugins.generators.independent.model import Independent, _normalise
from dpgym.privacy import PrivatePhase, calibrate_gaussian

QUIETER = 10.0  # how much less noise the DP-SGD plants add than their ledgers record


class Resampler(Independent):
    """(a) Records `independent`'s ledger, then samples by resampling the training rows."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        self.train_ = train.reset_index(drop=True)
        return super().fit(train, schema, budget, seed)

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        rows = np.random.default_rng(seed).integers(0, len(self.train_), n)
        return self.train_.iloc[rows].reset_index(drop=True)


class QuietIndependent(Independent):
    """(b) Gaussian noise `quieter` times smaller than the σ its ledger records (and its release declares)."""

    quieter = 10.0

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        ledger = super().fit(train, schema, budget, seed)
        rng = np.random.default_rng(seed)
        sigma = ledger.entries[0].event.sigma / self.quieter
        self.noisy_ = {k: v + rng.normal(0.0, sigma, v.shape) for k, v in self._counts(train).items()}
        self.probabilities_ = {k: _normalise(v) for k, v in self.noisy_.items()}
        return ledger


class QuietIndependent4(QuietIndependent):
    """(b) Gaussian noise 4 times smaller than the σ its ledger records (and its release declares)."""

    quieter = 4.0


class UnderstatedSensitivity(Independent):
    """(e) Noise calibrated to each histogram's L2 sensitivity 1 instead of the joint release's √d (d
    histograms, each moved by one row): its ledger records sensitivity 1 with that σ and re-accounts."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        super().fit(train, schema, budget, seed)
        rng = np.random.default_rng(seed)
        sigma = calibrate_gaussian(budget.epsilon, budget.delta)
        self.noisy_ = {k: v + rng.normal(0.0, sigma, v.shape) for k, v in self._counts(train).items()}
        self.noise_ = ("gaussian", sigma)
        self.probabilities_ = {k: _normalise(v) for k, v in self.noisy_.items()}
        ledger = Ledger(Guarantee.FORMAL)
        ledger.record(GaussianEvent(l2_sensitivity=1.0, sigma=sigma), epsilon=budget.epsilon, delta=budget.delta,
                      accountant="analytic Gaussian (Balle & Wang 2018)", description="histograms, one release")
        return ledger


class PrivateBounds(Independent):
    """(c) Bins each numeric column between the private rows' min and max instead of its public bounds."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        columns = []
        for c in schema.columns:
            low, high = (float(train[c.name].min()), float(train[c.name].max())) if c.is_numeric else (None, None)
            columns.append(dataclasses.replace(c, min=low, max=high if high != low else low + 1) if c.is_numeric else c)
        return super().fit(train, dataclasses.replace(schema, columns=tuple(columns)), budget, seed)


@contextmanager
def _patched(name: str, replacement) -> Iterator[None]:
    """The DP-SGD engine's `PrivatePhase.<name>` replaced for the length of one fit."""
    original = getattr(PrivatePhase, name)
    setattr(PrivatePhase, name, replacement(original))
    try:
        yield
    finally:
        setattr(PrivatePhase, name, original)


def _quieter_step(step):
    def quieter(self, *args, **kwargs):
        calibrated, self.noise_multiplier = self.noise_multiplier, self.noise_multiplier / QUIETER
        try:
            return step(self, *args, **kwargs)
        finally:
            self.noise_multiplier = calibrated
    return quieter


def _shuffled_batches(_):
    def shuffled(self, rows: int, steps: int) -> Iterator[torch.Tensor]:
        size, taken = max(1, round(self.sample_rate * rows)), 0
        while taken < steps:
            order = torch.randperm(rows, generator=self.sampling)
            for start in range(0, rows - size + 1, size):
                if taken == steps:
                    return
                taken += 1
                yield order[start:start + size]
    return shuffled


class QuietDPVAE(DPVAE):
    """(b′) DP-SGD whose every step adds noise `QUIETER` times smaller than the calibrated σ its ledger records."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        with _patched("step", _quieter_step):
            return super().fit(train, schema, budget, seed)


class ShuffledDPVAE(DPVAE):
    """(d) DP-SGD on fixed-size batches of a shuffled order, one epoch after another, while its ledger
    accounts Poisson sampling at the same rate."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        with _patched("_index_batches", _shuffled_batches):
            return super().fit(train, schema, budget, seed)


def _with_fault(spec: GeneratorSpec, name: str, factory: type) -> GeneratorSpec:
    return dataclasses.replace(spec, name=name, version="1", factory=factory,
                               description=f"{spec.name} with a planted fault: {factory.__doc__.split(')', 1)[1].strip()}")


class PlantedFaults:
    @hookimpl
    def dpgym_generators(self) -> list[GeneratorSpec]:
        return [_with_fault(INDEPENDENT_SPEC, "resampler", Resampler),
                _with_fault(INDEPENDENT_SPEC, "independent_quiet", QuietIndependent),
                _with_fault(INDEPENDENT_SPEC, "independent_quiet4", QuietIndependent4),
                _with_fault(INDEPENDENT_SPEC, "independent_understated", UnderstatedSensitivity),
                _with_fault(INDEPENDENT_SPEC, "independent_private_bounds", PrivateBounds),
                _with_fault(DP_VAE_SPEC, "dp_vae_quiet", QuietDPVAE),
                _with_fault(DP_VAE_SPEC, "dp_vae_shuffled", ShuffledDPVAE)]


PLANTED = "tests.harness.audit.audit_faults:PlantedFaults"
