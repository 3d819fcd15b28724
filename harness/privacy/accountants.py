"""Privacy accountants for DP-SGD (Poisson-subsampled Gaussian mechanism), their composition
across training phases, and noise calibration to a target (ε, δ).

The analyses are Opacus's (`opacus.accountants`); this module only chooses their settings, feeds
them several phases at once and searches the noise multiplier. Phases are composed on the
accountant's own curve — RDP summed per order then converted once, PRVs convolved jointly, GDP
μ's added in quadrature — never by adding ε's (DP-auto-GAN, Lemma 4: that is always looser).

Imports Opacus (and therefore torch): import this module explicitly, not via `dpgym.privacy`.
"""

from __future__ import annotations

import functools
import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from importlib.metadata import version
from typing import ClassVar

import numpy as np
from opacus.accountants import PRVAccountant as _OpacusPRV
from opacus.accountants.analysis import gdp as _gdp
from opacus.accountants.analysis import rdp as _rdp

OPACUS_VERSION = version("opacus")

# Fractional orders where small-ε optima sit, every integer to 128 (DP-auto-GAN's optima are
# 60–77), then a sparse tail so large noise multipliers are not floored by the grid (Opacus's
# default grid stops at 63, which floors ε near 0.1; docs/methods/expm-nf.md#dpsgd-baseline).
RDP_ORDERS: tuple[float, ...] = tuple(
    [1 + x / 10 for x in range(1, 100)] + list(range(11, 129))
    + [160, 192, 256, 320, 384, 448, 512, 640, 768, 1024, 1536, 2048, 4096]
)


@dataclass(frozen=True)
class Phase:
    """`steps` runs of the Poisson-subsampled Gaussian mechanism at one (q, σ); add/remove adjacency."""

    sample_rate: float
    noise_multiplier: float
    steps: int

    def __post_init__(self) -> None:
        if not 0 <= self.sample_rate <= 1:
            raise ValueError(f"sample_rate must lie in [0, 1], got {self.sample_rate}")
        if self.noise_multiplier < 0 or self.steps < 0:
            raise ValueError(f"noise_multiplier and steps must be non-negative, got {self}")

    @property
    def is_free(self) -> bool:
        """A phase that touches no private row costs nothing."""
        return self.steps == 0 or self.sample_rate == 0


class Accountant(ABC):
    """ε of a sequence of phases composed, at a given δ."""

    name: ClassVar[str]  # also the ledger's composition name
    certified: ClassVar[bool] = True  # an upper bound on ε, not an approximation

    @abstractmethod
    def epsilon(self, phases: Sequence[Phase], delta: float) -> float: ...

    @abstractmethod
    def describe(self) -> str:
        """Library, version and settings, for the ledger."""

    def bracket(self, eps_of: Callable[[float], float], composed: Callable[[float], list[Phase]],
                target_epsilon: float, delta: float, tolerance: float) -> tuple[float, float]:
        """Noise scales (lo, hi) with eps_of(lo) > target ≥ eps_of(hi), found by doubling from 1; or
        any lo with an hi whose ε already lies within `tolerance` below the target (the answer).
        `composed(s)` is what eps_of(s) accounts: the phases at scale s, with any fixed mechanisms."""
        return _doubling_bracket(eps_of, target_epsilon)


class RDPAccountant(Accountant):
    """Rényi DP of the subsampled Gaussian (Mironov, Talwar & Zhang 2019), summed over phases per order.

    conversion="balle2020": Opacus's RDP→(ε, δ) rule (Balle et al. 2020, Thm. 21), the tighter default.
    conversion="classic": ε = min_α r(α) + log(1/δ)/(α−1) (Mironov 2017, Prop. 3), what TF-Privacy
    used before 2020 and what DP-auto-GAN and DP-NF report.
    """

    name = "rdp"

    def __init__(self, orders: Sequence[float] = RDP_ORDERS, conversion: str = "balle2020"):
        if conversion not in RDP_CONVERSIONS:
            raise ValueError(f"conversion must be one of {sorted(RDP_CONVERSIONS)}, got {conversion!r}")
        self.orders = np.asarray(orders, dtype=float)
        self.conversion = conversion

    def curve(self, phases: Sequence[Phase]) -> np.ndarray:
        """RDP ε(α) of all phases composed: the per-order sum (Mironov 2017, Prop. 1)."""
        total = np.zeros_like(self.orders)
        for p in phases:
            if not p.is_free:
                total += _rdp.compute_rdp(q=p.sample_rate, noise_multiplier=p.noise_multiplier,
                                          steps=p.steps, orders=list(self.orders))
        return total

    def epsilon_and_order(self, phases: Sequence[Phase], delta: float) -> tuple[float, float]:
        if all(p.is_free for p in phases):
            return 0.0, math.nan
        return RDP_CONVERSIONS[self.conversion](self.orders, self.curve(phases), delta)

    def epsilon(self, phases: Sequence[Phase], delta: float) -> float:
        return self.epsilon_and_order(phases, delta)[0]

    def describe(self) -> str:
        return (f"opacus {OPACUS_VERSION} rdp (conversion={self.conversion}, "
                f"orders {self.orders.min():g}–{self.orders.max():g})")


def _classic_conversion(orders: np.ndarray, rdp: np.ndarray, delta: float) -> tuple[float, float]:
    """Mironov 2017, Prop. 3: (α, r)-RDP ⇒ (r + log(1/δ)/(α−1), δ)-DP; best α."""
    eps = rdp + math.log(1 / delta) / (orders - 1)
    i = int(np.nanargmin(eps))
    return float(eps[i]), float(orders[i])


def _balle_conversion(orders: np.ndarray, rdp: np.ndarray, delta: float) -> tuple[float, float]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Optimal order is the")
        eps, order = _rdp.get_privacy_spent(orders=list(orders), rdp=rdp, delta=delta)
    return float(eps), float(order)


RDP_CONVERSIONS: dict[str, Callable[[np.ndarray, np.ndarray, float], tuple[float, float]]] = {
    "classic": _classic_conversion,
    "balle2020": _balle_conversion,
}


class GDPAccountant(Accountant):
    """Gaussian DP via the central limit theorem (Dong, Roth & Su 2019; Bu et al. 2020).

    Each phase is μ_i-GDP with Opacus's CLT formula; phases compose as μ = √(Σ μ_i²) (Dong et al.
    2019, Cor. 2). An asymptotic approximation, not a certified bound: it can understate ε, which the
    harness's PRV re-accounting then flags. `poisson=False` is the uniform-subsampling (replace-one)
    variant DP-NF reports.
    """

    name = "gdp"
    certified = False

    def __init__(self, poisson: bool = True):
        self.poisson = poisson

    def mu(self, phases: Sequence[Phase]) -> float:
        mu_of = _gdp.compute_mu_poisson if self.poisson else _gdp.compute_mu_uniform
        return math.sqrt(sum(
            mu_of(steps=p.steps, noise_multiplier=p.noise_multiplier, sample_rate=p.sample_rate) ** 2
            for p in phases if not p.is_free
        ))

    def epsilon(self, phases: Sequence[Phase], delta: float) -> float:
        mu = self.mu(phases)
        if mu == 0:
            return 0.0
        if not math.isfinite(mu) or _gdp.delta_eps_mu(eps=500.0, mu=mu) > delta:
            return math.inf
        return float(_gdp.eps_from_mu(mu=mu, delta=delta))

    def describe(self) -> str:
        return f"opacus {OPACUS_VERSION} gdp (CLT, {'poisson' if self.poisson else 'uniform'} subsampling)"


class PRVAccountant(Accountant):
    """Privacy random variables composed by FFT (Gopi, Lee & Wutschitz 2021), all phases jointly.

    Returns Opacus's upper bound `eps_upper`. eps_error: Opacus default 0.01; for small targets use
    `for_target`, which follows the ExpM+NF paper (ε/100 clipped to [1e-4, 1e-2];
    docs/methods/expm-nf.md#dpsgd-baseline).
    """

    name = "prv"

    def __init__(self, eps_error: float = 0.01, delta_error: float | None = None):
        self.eps_error = eps_error
        self.delta_error = delta_error

    @classmethod
    def for_target(cls, target_epsilon: float) -> PRVAccountant:
        return cls(eps_error=min(1e-2, max(1e-4, target_epsilon / 100)))

    def epsilon(self, phases: Sequence[Phase], delta: float) -> float:
        live = [p for p in phases if not p.is_free]
        if not live:
            return 0.0
        if any(p.noise_multiplier == 0 for p in live):
            return math.inf
        accountant = _OpacusPRV()
        accountant.history = [(p.noise_multiplier, p.sample_rate, p.steps) for p in live]
        # Its domain bound uses an RDP grid and warns at the grid's edge; a plain Gaussian release
        # (sample rate 1) takes log(1 − q) = −inf in its PRV, which it then handles.
        with warnings.catch_warnings(), np.errstate(divide="ignore"):
            warnings.filterwarnings("ignore", message="Optimal order is the")
            return float(accountant.get_epsilon(delta, eps_error=self.eps_error, delta_error=self.delta_error))

    def bracket(self, eps_of: Callable[[float], float], composed: Callable[[float], list[Phase]],
                target_epsilon: float, delta: float, tolerance: float) -> tuple[float, float]:
        """Start from the closed-form GDP-CLT scale, near PRV's (and uncertified, so only a start).

        A PRV call at this accountant's eps_error costs up to a second for two phases of thousands of
        steps (most of it Opacus's RDP bound on the domain), and one at a ten times coarser error a
        third of that, while its estimate (the upper bound less its error) agrees with the fine
        estimate to about 1e-3. So the scale is searched on the coarse estimate, aiming at the middle
        of the tolerance window, and one fine call certifies it; only when that call falls outside the
        window does the search go on with fine calls (Newton steps on log ε against log σ along the
        GDP curve's slope, then fixed ratios)."""
        # PRV's own floor sits near its eps_error (eps_upper = estimate + error): one call tells
        if target_epsilon <= self.eps_error and eps_of(MAX_SCALE) > target_epsilon:
            raise UnreachableEpsilon(
                f"ε = {target_epsilon:g} is unreachable: PRV's upper bound stays at {eps_of(MAX_SCALE):.3g} even "
                f"at σ × {MAX_SCALE:g}, because its error bar is eps_error = {self.eps_error:g}")
        gdp = GDPAccountant(poisson=True)
        gdp_of = lambda s: gdp.epsilon(composed(s), delta)  # noqa: E731
        hi = _search(gdp_of, target_epsilon, *_doubling_bracket(gdp_of, target_epsilon), 0.02 * target_epsilon)
        step = 1.02
        slope = min(math.log(gdp_of(hi * step) / gdp_of(hi)) / math.log(step), -0.1)  # d log ε / d log σ < 0
        aim = target_epsilon - tolerance / 2
        above, below = 0.0, math.inf  # the largest scale found to overspend, the smallest found not to
        if self.eps_error < COARSE_ERROR:
            hi = self._coarse_answer(composed, aim, tolerance / 4, hi, slope, delta)
        scale = hi
        for _ in range(NEWTON_STEPS):
            eps = eps_of(scale)
            if eps > target_epsilon:
                above = max(above, scale)
            else:
                below = min(below, scale)
                if eps >= target_epsilon - tolerance:
                    return above or scale, scale  # within tolerance: `_search` returns it at once
            if above and below < math.inf:
                return above, below
            scale *= math.exp((math.log(aim) - math.log(eps)) / slope)
        if not above:  # still under the target: walk down (less noise) until it is exceeded
            lo = below
            while eps_of(lo) <= target_epsilon:
                lo, below = lo * 0.85, lo
            return lo, below
        hi = above
        while eps_of(hi) > target_epsilon:
            above, hi = hi, hi * 1.1
        return above, hi

    def _coarse_answer(self, composed: Callable[[float], list[Phase]], aim: float, within: float, start: float,
                       slope: float, delta: float) -> float:
        """The scale whose coarse PRV estimate of this accountant's ε lies within `within` of `aim`,
        searched from `start` (a scale near the answer) by Newton steps along `slope` (d log ε / d log σ)
        and, once bracketed, regula falsi. An estimate, never a certified figure: the best scale found
        when the steps run out."""
        coarse = PRVAccountant(eps_error=min(COARSE_ERROR, 10 * self.eps_error), delta_error=self.delta_error)
        estimate = functools.cache(lambda s: coarse.epsilon(composed(s), delta) - coarse.eps_error + self.eps_error)
        above, below = 0.0, math.inf
        scale = start
        for _ in range(NEWTON_STEPS):
            eps = estimate(scale)
            if abs(eps - aim) <= within:
                return scale
            if eps > aim:
                above = max(above, scale)
            else:
                below = min(below, scale)
            if above and below < math.inf:
                return _search(estimate, aim + within, above, below, 2 * within)
            scale *= math.exp((math.log(aim) - math.log(eps)) / slope)
        return scale

    def describe(self) -> str:
        return f"opacus {OPACUS_VERSION} prv (eps_upper, eps_error={self.eps_error:g})"


ACCOUNTANTS: dict[str, Callable[..., Accountant]] = {
    "rdp": RDPAccountant,
    "gdp": GDPAccountant,
    "prv": PRVAccountant,
}


def make_accountant(name: str | Accountant, **settings) -> Accountant:
    if isinstance(name, Accountant):
        return name
    if name not in ACCOUNTANTS:
        raise ValueError(f"unknown accountant {name!r}; choose one of {sorted(ACCOUNTANTS)}")
    return ACCOUNTANTS[name](**settings)


# Calibration is a pure function of public settings; a cell that calibrates twice (the audit's
# permuted-label twin of a DP-SGD learner, a minute of PRV calls at small ε) pays once.
_CALIBRATED: dict[tuple, list[Phase]] = {}


def calibrate(
    accountant: Accountant,
    target_epsilon: float,
    delta: float,
    phases: Sequence[Phase],
    tolerance: float | None = None,
    fixed: Sequence[Phase] = (),
) -> list[Phase]:
    """Scale every phase's noise multiplier by one factor so the composed ε is at most the target.

    The phases' noise multipliers fix their ratio (use 1 for all to give every phase the same σ).
    `fixed` mechanisms are composed with them but keep their noise (a Gaussian release of noise
    multiplier σ/Δ₂ is ``Phase(1.0, σ/Δ₂, 1)``): the phases get what the budget leaves, composed
    jointly rather than by splitting ε. Returns the scaled phases; everything composed spends an ε
    in [target − tolerance, target]
    (tolerance defaults to target/100 rather than Opacus's fixed 0.01, which exceeds small targets:
    docs/methods/expm-nf.md#dpsgd-baseline).
    """
    if not (target_epsilon > 0 and 0 < delta < 1):
        raise ValueError(f"need a finite target ε > 0 and 0 < δ < 1, got ({target_epsilon}, {delta})")
    if any(p.noise_multiplier <= 0 for p in (*phases, *fixed)):
        raise ValueError("phase noise multipliers set the ratio between phases and must be positive")
    if all(p.is_free for p in phases):
        return list(phases)  # no private row is touched: any noise meets the target
    if fixed and accountant.epsilon(fixed, delta) >= target_epsilon:
        raise UnreachableEpsilon(f"ε = {target_epsilon:g} is unreachable: the fixed mechanisms alone spend "
                                 f"{accountant.epsilon(fixed, delta):.4g}")
    tolerance = target_epsilon / 100 if tolerance is None else tolerance
    key = (type(accountant).__name__, repr(sorted(vars(accountant).items())), target_epsilon, delta, tuple(phases),
           tolerance, tuple(fixed))
    if key not in _CALIBRATED:
        def composed(scale: float) -> list[Phase]:
            return [*_scaled(phases, scale), *fixed]

        eps_of = functools.cache(lambda s: accountant.epsilon(composed(s), delta))
        lo, hi = accountant.bracket(eps_of, composed, target_epsilon, delta, tolerance)
        _CALIBRATED[key] = _scaled(phases, _search(eps_of, target_epsilon, lo, hi, tolerance))
    return list(_CALIBRATED[key])


def calibrate_noise_multiplier(
    accountant: Accountant, target_epsilon: float, delta: float, sample_rate: float, steps: int,
    tolerance: float | None = None,
) -> float:
    """Smallest noise multiplier (within tolerance) for one phase of `steps` steps at `sample_rate`."""
    (phase,) = calibrate(accountant, target_epsilon, delta, [Phase(sample_rate, 1.0, steps)], tolerance)
    return phase.noise_multiplier


def _scaled(phases: Sequence[Phase], scale: float) -> list[Phase]:
    return [replace(p, noise_multiplier=p.noise_multiplier * scale) for p in phases]


MAX_SCALE = 1e6
NEWTON_STEPS = 4  # PRV calibration's slope-guided steps before it falls back on fixed-ratio stepping
COARSE_ERROR = 0.1  # the largest eps_error PRV calibration searches with before its certifying call


class UnreachableEpsilon(ValueError):
    """No noise scale up to MAX_SCALE meets the target ε under this accountant."""


def _doubling_bracket(eps_of: Callable[[float], float], target: float, start: float = 1.0) -> tuple[float, float]:
    lo, hi = start, start
    if eps_of(hi) > target:
        while eps_of(hi) > target:
            lo, hi = hi, hi * 2
            if hi > MAX_SCALE:
                raise UnreachableEpsilon(f"ε = {target} is unreachable: even σ × {MAX_SCALE:g} spends more")
    else:
        while eps_of(lo) <= target:
            lo, hi = lo / 2, lo
    return lo, hi


def _search(eps_of: Callable[[float], float], target: float, lo: float, hi: float, tolerance: float) -> float:
    """Bracketed root search of log ε against log σ (Illinois variant of regula falsi): few accountant
    calls. Invariant: ε(lo) > target ≥ ε(hi). Returns hi once ε(hi) ≥ target − tolerance, so the answer
    never overspends; an hi within tolerance at the start is returned without evaluating lo.
    """
    def f(s: float) -> tuple[float, float]:
        eps = eps_of(s)
        return eps, (math.log(eps / target) if eps > 0 else -math.inf)

    eps_hi, g_hi = f(hi)
    if target - tolerance <= eps_hi <= target:
        return hi
    _, g_lo = f(lo)
    last = 0  # which end moved last; Illinois halves the stale end's value to avoid stalling
    for _ in range(200):
        if eps_hi >= target - tolerance or hi / lo - 1 < 1e-9:
            break
        a, b = math.log(lo), math.log(hi)
        x = b - g_hi * (b - a) / (g_hi - g_lo) if math.isfinite(g_lo) and math.isfinite(g_hi) else (a + b) / 2
        mid = math.exp(x if a < x < b else (a + b) / 2)
        eps_mid, g_mid = f(mid)
        if eps_mid > target:
            lo, g_lo = mid, g_mid
            g_hi = g_hi / 2 if last == -1 else g_hi
            last = -1
        else:
            hi, eps_hi, g_hi = mid, eps_mid, g_mid
            g_lo = g_lo / 2 if last == 1 else g_lo
            last = 1
    return hi
