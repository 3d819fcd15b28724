"""Calibration of the basic noise-adding mechanisms (used by generators before they release), and
the exponential mechanism's sampler."""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize, special, stats

MAX_EPSILON = 512.0  # the largest finite ε `gaussian_epsilon` resolves


def gaussian_delta(epsilon: float, noise_multiplier: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism with σ = noise_multiplier · Δ₂ (Balle & Wang 2018, Thm. 8)."""
    a = 1.0 / (2.0 * noise_multiplier)
    b = epsilon * noise_multiplier
    return float(stats.norm.cdf(a - b) - math.exp(epsilon) * stats.norm.cdf(-a - b))


def gaussian_epsilon(delta: float, noise_multiplier: float) -> float:
    """Smallest ε at which the Gaussian mechanism is (ε, δ)-DP."""
    if gaussian_delta(0.0, noise_multiplier) <= delta:
        return 0.0
    hi = 1.0
    while gaussian_delta(hi, noise_multiplier) > delta:
        hi *= 2.0
        if hi > MAX_EPSILON:  # exp(ε) overflows a float beyond ~709: report the release as unbounded
            return math.inf
    return float(optimize.brentq(lambda e: gaussian_delta(e, noise_multiplier) - delta, 0.0, hi, xtol=1e-15))


@functools.lru_cache(maxsize=256)
def calibrate_gaussian(epsilon: float, delta: float) -> float:
    """Smallest noise multiplier σ/Δ₂ giving (ε, δ)-DP for one Gaussian release (analytic, not the 2ln(1.25/δ) bound).
    Cached: a pure function of (ε, δ) that takes milliseconds, called by every fit of an audit's thousands."""
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValueError(f"the Gaussian mechanism needs ε > 0 and 0 < δ < 1, got ({epsilon}, {delta})")
    hi = 1.0
    while gaussian_delta(epsilon, hi) > delta:
        hi *= 2.0
    sigma = float(optimize.brentq(lambda s: gaussian_delta(epsilon, s) - delta, 1e-6, hi, xtol=1e-12))
    # brentq returns a point within xtol of the root; step up until the guarantee strictly holds.
    while gaussian_delta(epsilon, sigma) > delta:
        sigma *= 1 + 1e-9
    return sigma


def exponential_mechanism(scores: np.ndarray, epsilon: float, sensitivity: float, rng: np.random.Generator) -> int:
    """The index of one candidate drawn with probability ∝ exp(ε·score / (2·sensitivity)), which is
    ε-DP for scores of that sensitivity (record it as an `ExponentialEvent` with inverse temperature
    ε / (2·sensitivity)); the best one at ε = ∞."""
    if math.isinf(epsilon):
        return int(np.argmax(scores))
    return int(rng.choice(len(scores), p=special.softmax(epsilon / (2.0 * sensitivity) * np.asarray(scores))))


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Smallest ε for which ρ-zCDP gives (ε, δ)-DP by Canonne, Kamath & Steinke (2020), Prop. 12:
    δ = min over α > 1 of exp((α−1)(αρ−ε)) (1−1/α)^α / (α−1), solved for ε at each α. Every α gives
    a valid bound, so an imperfect minimisation only errs on the safe (larger) side."""
    if rho <= 0:
        return 0.0

    def epsilon_at(alpha: float) -> float:
        return alpha * rho + (math.log(1 / delta) + alpha * math.log1p(-1 / alpha) - math.log(alpha - 1)) / (alpha - 1)

    grid = np.geomspace(1 + 1e-6, 1e6, 4000)
    best = int(np.argmin([epsilon_at(a) for a in grid]))
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    refined = optimize.minimize_scalar(epsilon_at, bounds=(low, high), method="bounded", options={"xatol": 1e-12})
    return float(min(refined.fun, epsilon_at(grid[best])))
