"""The code of `dpgym.plugins.generators.dp_mog`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.generators.dp_mog`, which holds the spec."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import logsumexp
from scipy.stats import qmc

from dpgym import Budget, GaussianEvent, Guarantee, Ledger, Schema
from dpgym.privacy import calibrate_gaussian, gaussian_epsilon
from dpgym.plugins.nn.space import DensitySpace, project_to_unit_ball

RELEASES_PER_ITERATION = 3  # soft counts, first moments, second moments
COUNT_FLOOR = 1.01  # the baseline's floor on N_k (E-step)
ACCOUNTANTS = ("exact", "rdp", "zcdp")


@dataclass(frozen=True)
class NIWPrior:
    """The baseline's MAP prior: m₀ = 0, κ₀, S₀ = s₀·I, ν₀ = D + 1."""

    kappa: float = 1.01
    scatter: float = 0.1

    def nu(self, dim: int) -> float:
        return dim + 1.0


@dataclass(frozen=True)
class Mixture:
    """A Gaussian mixture with full covariances."""

    weights: np.ndarray  # (K,)
    means: np.ndarray  # (K, D)
    covariances: np.ndarray  # (K, D, D)

    def component_log_probs(self, u: np.ndarray) -> np.ndarray:
        """(n, K): log w_k + log N(u; m_k, Σ_k)."""
        n, dim = u.shape
        out = np.empty((n, len(self.weights)))
        for k, (w, m, cov) in enumerate(zip(self.weights, self.means, self.covariances, strict=True)):
            chol = np.linalg.cholesky(cov)
            white = np.linalg.solve(chol, (u - m).T)  # L⁻¹(u − m)
            log_det = 2 * np.log(np.diag(chol)).sum()
            out[:, k] = math.log(max(w, 1e-300)) - 0.5 * (dim * math.log(2 * math.pi) + log_det + (white**2).sum(0))
        return out

    def log_prob(self, u: np.ndarray) -> np.ndarray:
        return logsumexp(self.component_log_probs(u), axis=1)

    def responsibilities(self, u: np.ndarray) -> np.ndarray:
        logs = self.component_log_probs(u)
        return np.exp(logs - logsumexp(logs, axis=1, keepdims=True))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        component = rng.choice(len(self.weights), size=n, p=self.weights)
        z = rng.standard_normal((n, self.means.shape[1]))
        chols = np.linalg.cholesky(self.covariances)
        return self.means[component] + np.einsum("nij,nj->ni", chols[component], z)


def initial_mixture(components: int, dim: int, rng: np.random.Generator, variance: float = 1.0) -> Mixture:
    """Data-independent start of the baseline: Latin-hypercube means in [−0.5, 0.5]^D plus 0.01·N(0, 1),
    covariances variance·I (the baseline's I by default), uniform weights."""
    means = qmc.LatinHypercube(d=dim, seed=rng).random(components) - 0.5 + 0.01 * rng.standard_normal((components, dim))
    return Mixture(np.full(components, 1.0 / components), means, np.tile(variance * np.eye(dim), (components, 1, 1)))


@dataclass
class SufficientStatistics:
    counts: np.ndarray  # (K,)
    first: np.ndarray  # (K, D)
    second: np.ndarray  # (K, D, D), symmetric

    @classmethod
    def of(cls, u: np.ndarray, resp: np.ndarray) -> SufficientStatistics:
        return cls(resp.sum(0), resp.T @ u, np.einsum("nk,ni,nj->kij", resp, u, u, optimize=True))

    def perturbed(self, z: float, rng: np.random.Generator) -> SufficientStatistics:
        """Each block plus N(0, z²) per released coordinate (all blocks have sensitivity 1)."""
        dim = self.first.shape[1]
        upper = np.triu(rng.standard_normal(self.second.shape))  # one draw per a ≤ b
        mirrored = upper + np.transpose(np.triu(upper, 1), (0, 2, 1))
        return SufficientStatistics(self.counts + z * rng.standard_normal(self.counts.shape),
                                    self.first + z * rng.standard_normal(self.first.shape),
                                    self.second + z * mirrored.reshape(-1, dim, dim))


def map_m_step(stats: SufficientStatistics, prior: NIWPrior, eigen_floor: float) -> Mixture:
    """The baseline's MAP M-step from (possibly noisy) sufficient statistics."""
    dim = stats.first.shape[1]
    counts = np.maximum(stats.counts, COUNT_FLOOR)
    weights = counts / counts.sum()
    xbar = stats.first / counts[:, None]
    means = project_to_unit_ball(stats.first / (counts + prior.kappa)[:, None])  # m₀ = 0
    scatter = stats.second - counts[:, None, None] * np.einsum("ki,kj->kij", xbar, xbar)
    a = prior.kappa * counts / (prior.kappa + counts)
    b = prior.nu(dim) + counts + dim + 2
    covs = (prior.scatter * np.eye(dim) + scatter + a[:, None, None] * np.einsum("ki,kj->kij", xbar, xbar)) / b[:, None, None]
    return Mixture(weights, means, _floor_eigenvalues(covs, eigen_floor))


def _floor_eigenvalues(covs: np.ndarray, floor: float) -> np.ndarray:
    sym = (covs + np.transpose(covs, (0, 2, 1))) / 2
    values, vectors = np.linalg.eigh(sym)
    return np.einsum("kij,kj,klj->kil", vectors, np.maximum(values, floor), vectors)


def composed_epsilon(noise_multiplier: float, releases: int, delta: float, accountant: str) -> float:
    """ε of `releases` Gaussian mechanisms of noise multiplier z, composed by the accountant."""
    if accountant == "exact":
        return gaussian_epsilon(delta, noise_multiplier / math.sqrt(releases))
    if accountant == "zcdp":  # Bun & Steinke 2016, Prop. 1.3 and 1.6
        rho = releases / (2 * noise_multiplier**2)
        return rho + 2 * math.sqrt(rho * math.log(1 / delta))
    from dpgym.privacy import Phase, RDPAccountant  # the moments accountant, per-order sum

    return RDPAccountant().epsilon([Phase(1.0, noise_multiplier, releases)], delta)


def calibrate_noise(epsilon: float, delta: float, releases: int, accountant: str) -> float:
    """Smallest z whose composed ε is at most the budget: exact composition in closed form (the
    analytic Gaussian's σ, times √releases), the others by bisection on log z (within 0.1 %)."""
    if accountant == "exact":
        return calibrate_gaussian(epsilon, delta) * math.sqrt(releases)
    lo, hi = 1e-3, 1.0
    while composed_epsilon(hi, releases, delta, accountant) > epsilon:
        lo, hi = hi, hi * 2
    for _ in range(60):
        if hi / lo < 1.001:
            break
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if composed_epsilon(mid, releases, delta, accountant) > epsilon else (lo, mid)
    return hi


class DPMoG:
    def __init__(self, components: int, iterations: int, accountant: str, scaling: str | float,
                 eigen_floor: float, initial_variance: float):
        if components < 1 or iterations < 1:
            raise ValueError(f"components and iterations must be ≥ 1, got {components}, {iterations}")
        if accountant not in ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")
        if not (eigen_floor > 0 and initial_variance > 0):
            raise ValueError(f"eigen_floor and initial_variance must be positive, got {eigen_floor}, {initial_variance}")
        self.components, self.iterations, self.accountant = components, iterations, accountant
        self.scaling, self.eigen_floor, self.initial_variance = scaling, eigen_floor, initial_variance

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        rng = np.random.default_rng(seed)
        self.space_ = DensitySpace(schema, self.scaling)
        u = project_to_unit_ball(self.space_.encode(train))
        releases = RELEASES_PER_ITERATION * self.iterations
        z = calibrate_noise(budget.epsilon, budget.delta, releases, self.accountant) if budget.is_private else 0.0
        self.mixture_ = fit_dp_em(u, self.components, self.iterations, z, rng, NIWPrior(), self.eigen_floor,
                                  self.initial_variance)
        self.noise_multiplier_ = z
        if not budget.is_private:
            return Ledger.non_private(Guarantee.FORMAL, f"MAP-EM, K={self.components}, J={self.iterations}, no noise (ε = ∞)")
        return self._ledger(budget, z, releases)

    def _ledger(self, budget: Budget, z: float, releases: int) -> Ledger:
        ledger = Ledger(Guarantee.FORMAL)
        single = gaussian_epsilon(budget.delta, z)
        what = ("soft counts N", "first moments Σ r x", "second moments Σ r x xᵀ (upper triangles)")
        for j in range(self.iterations):
            for name in what:
                ledger.record(GaussianEvent(l2_sensitivity=1.0, sigma=z), epsilon=single, delta=budget.delta,
                              accountant="analytic Gaussian (Balle & Wang 2018), this release alone",
                              description=f"DP-EM M-step {j + 1}/{self.iterations}: {name} of all "
                                          f"{self.components} components", details={"iteration": j + 1})
        claimed = composed_epsilon(z, releases, budget.delta, self.accountant)
        # exact composition of Gaussians is μ-GDP's; zCDP is an RDP bound as well
        ledger.claim(claimed, budget.delta, composition="gdp" if self.accountant == "exact" else "rdp")
        ledger.check_within(budget)
        return ledger

    def log_prob(self, frame: pd.DataFrame) -> np.ndarray:
        """log-density of the numeric columns of `frame` in the data's own scale (nats per row)."""
        return self.mixture_.log_prob(self.space_.encode(frame)) + self.space_.log_jacobian

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        return self.space_.decode(self.mixture_.sample(n, rng), rng)


def fit_dp_em(u: np.ndarray, components: int, iterations: int, noise_multiplier: float,
              rng: np.random.Generator, prior: NIWPrior, eigen_floor: float, initial_variance: float = 1.0) -> Mixture:
    """J EM iterations on rows u (‖u‖₂ ≤ 1); noise_multiplier 0 is the non-private MAP-EM."""
    mixture = initial_mixture(components, u.shape[1], rng, initial_variance)
    for _ in range(iterations):
        stats = SufficientStatistics.of(u, mixture.responsibilities(u))
        if noise_multiplier > 0:
            stats = stats.perturbed(noise_multiplier, rng)
        mixture = map_m_step(stats, prior, eigen_floor)
    return mixture
