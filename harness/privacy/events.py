"""Typed privacy events: what a mechanism did to the private rows, in numbers an accountant can read.

Modelled on Google's `dp_accounting` `DpEvent`s: one frozen class per mechanism the harness
accounts, each checking its own parameters when it is built and knowing its own conversions (pure
ε, zCDP ρ, a privacy random variable for the PRV accountant, a subsampled-Gaussian phase for the
RDP one). A plugin that records a negative σ or a zero sensitivity gets a `ValueError` naming the
field there and then, in its own cell, instead of an "unaccountable" verdict after the fit; a new
mechanism is one class here, not an edit in every accountant's table.

Events describe, they do not claim: the ε a plugin states for an event is its `LedgerEntry`'s
(`dpgym.privacy.ledger`), and what the events really spend is the harness's re-accounting
(`dpgym.privacy.reaccount`). Conversions return None where a mechanism has none, and each
accountant composes only ledgers whose every event it can read.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from prv_accountant.privacy_random_variables import PrivacyRandomVariable

    from dpgym.privacy.accountants import Phase


class Adjacency(enum.StrEnum):
    """The neighbouring relation an event's sensitivity assumes."""

    ADD_REMOVE = "add_remove"  # D′ = D with one row added or removed (the harness's default)
    REPLACE_ONE = "replace_one"  # D′ = D with one row replaced (n public)


class EventError(ValueError):
    """A privacy event was built, or read from a ledger, with parameters no accountant can read."""


@dataclass(frozen=True, kw_only=True)
class PrivacyEvent:
    """One mechanism run on the private rows. Subclasses declare their numeric parameters as fields;
    every one must be a finite real number ≥ 0 (`POSITIVE` ones > 0), since accountants add them up
    and divide by them."""

    adjacency: Adjacency = Adjacency.ADD_REMOVE

    type: ClassVar[str]  # the tag ledger.json stores for the event
    POSITIVE: ClassVar[frozenset[str]] = frozenset()  # parameters that must be > 0, not just ≥ 0
    NOISE: ClassVar[str | None] = None  # the parameter that carries the noise: at 0 the release is exact

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "adjacency", Adjacency(self.adjacency))
        except ValueError:
            raise EventError(f"{self.type} event: adjacency {self.adjacency!r} is not one of "
                             f"{', '.join(a.value for a in Adjacency)}") from None
        for name in self.parameter_names():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, Real):
                raise EventError(f"{self.type} event: {name} is {value!r}, not a number")
            if not (math.isfinite(value) and value >= 0):  # NaN fails too
                raise EventError(f"{self.type} event: {name} is {value!r}; it must be finite and ≥ 0")
            if name in self.POSITIVE and value == 0:
                raise EventError(f"{self.type} event: {name} is 0; it must be > 0")
            # stored as Python numbers, so that ledger.json writes them as numbers (numpy's are not JSON)
            object.__setattr__(self, name, int(value) if isinstance(value, Integral) else float(value))

    @classmethod
    def parameter_names(cls) -> list[str]:
        return [f.name for f in fields(cls) if f.name != "adjacency"]

    def parameters(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.parameter_names()}

    @property
    def noise_free(self) -> bool:
        """Whether the event released its input exactly (ε = ∞): its noise parameter is 0."""
        return self.NOISE is not None and getattr(self, self.NOISE) == 0

    # --- conversions; None where the mechanism has none -------------------------------------------

    def pure_epsilon(self) -> float | None:
        """ε of an event that is pure ε-DP by its parameters."""
        return None

    def zcdp_rho(self) -> float | None:
        """ρ of an event that is ρ-zCDP by its parameters."""
        return None

    def gdp_mu(self) -> float | None:
        """μ of an event that is exactly μ-GDP (a Gaussian release)."""
        return None

    def prv(self) -> tuple[PrivacyRandomVariable, int] | None:
        """The event's privacy random variable and how many times it composes with itself, for
        `prv-accountant` (imported only here)."""
        return None

    def rdp_phase(self) -> Phase | None:
        """The event as a Poisson-subsampled Gaussian phase for the RDP accountant (Opacus)."""
        return None

    def epsilon(self, delta: float) -> float:
        """The event's own ε at δ, on its tightest single-event conversion: what a ledger entry claims
        for it when the plugin states no figure of its own."""
        if self.noise_free:
            return math.inf
        pure = self.pure_epsilon()
        if pure is not None:
            return pure
        mu = self.gdp_mu()
        if mu is not None:
            from dpgym.privacy.mechanisms import gaussian_epsilon

            return gaussian_epsilon(delta, 1.0 / mu)
        rho = self.zcdp_rho()
        if rho is not None:
            from dpgym.privacy.mechanisms import zcdp_epsilon

            return zcdp_epsilon(rho, delta)
        raise EventError(f"{self.type} event: no single-event conversion to ε; state the entry's ε")

    # --- ledger.json ------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.parameters(), "adjacency": str(self.adjacency)}

    @staticmethod
    def from_dict(raw: dict[str, Any]) -> PrivacyEvent:
        """An event from its ledger.json form; an unknown type or a missing, extra or invalid
        parameter is an `EventError` naming it."""
        if not isinstance(raw, dict):
            raise EventError(f"a privacy event must be a table, got {raw!r}")
        tag = raw.get("type")
        cls = EVENT_TYPES.get(tag)  # type: ignore[arg-type]
        if cls is None:
            raise EventError(f"unknown privacy event type {tag!r} (known: {', '.join(sorted(EVENT_TYPES))})")
        given = {k: v for k, v in raw.items() if k != "type"}
        names = {*cls.parameter_names(), "adjacency"}
        missing = sorted(set(cls.parameter_names()) - set(given))
        extra = sorted(set(given) - names)
        if missing:
            raise EventError(f"{tag} event: missing {', '.join(missing)} (it takes {', '.join(sorted(names))})")
        if extra:
            raise EventError(f"{tag} event: unknown {', '.join(extra)} (it takes {', '.join(sorted(names))})")
        return cls(**given)


@dataclass(frozen=True, kw_only=True)
class LaplaceEvent(PrivacyEvent):
    """Laplace noise of scale b on a query of L1 sensitivity Δ₁: pure ε = Δ₁/b."""

    l1_sensitivity: float
    scale: float

    type: ClassVar[str] = "laplace"
    POSITIVE: ClassVar[frozenset[str]] = frozenset({"l1_sensitivity"})
    NOISE: ClassVar[str | None] = "scale"

    def pure_epsilon(self) -> float | None:
        return math.inf if self.noise_free else self.l1_sensitivity / self.scale

    def zcdp_rho(self) -> float | None:
        pure = self.pure_epsilon()
        return pure**2 / 2  # ε-DP is ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4)

    def prv(self) -> tuple[PrivacyRandomVariable, int] | None:
        from prv_accountant import LaplaceMechanism

        return LaplaceMechanism(mu=self.l1_sensitivity / self.scale), 1


@dataclass(frozen=True, kw_only=True)
class GaussianEvent(PrivacyEvent):
    """Gaussian noise N(0, σ²) on a query of L2 sensitivity Δ₂: exactly μ-GDP with μ = Δ₂/σ (Dong,
    Roth & Su 2019), ρ = Δ₂²/(2σ²)-zCDP (Bun & Steinke 2016, Prop. 1.6)."""

    l2_sensitivity: float
    sigma: float

    type: ClassVar[str] = "gaussian"
    POSITIVE: ClassVar[frozenset[str]] = frozenset({"l2_sensitivity"})
    NOISE: ClassVar[str | None] = "sigma"

    def gdp_mu(self) -> float | None:
        return self.l2_sensitivity / self.sigma

    def zcdp_rho(self) -> float | None:
        return self.l2_sensitivity**2 / (2 * self.sigma**2)

    def prv(self) -> tuple[PrivacyRandomVariable, int] | None:
        from prv_accountant import GaussianMechanism

        return GaussianMechanism(noise_multiplier=self.sigma / self.l2_sensitivity), 1

    def rdp_phase(self) -> Phase | None:
        from dpgym.privacy.accountants import Phase

        return Phase(1.0, self.sigma / self.l2_sensitivity, 1)


@dataclass(frozen=True, kw_only=True)
class SubsampledGaussianEvent(PrivacyEvent):
    """`steps` DP-SGD steps: each samples every row independently with probability q (Poisson
    sampling, the only sampling its accountants analyse), clips each row's gradient to `clip_norm`
    and adds Gaussian noise of standard deviation `noise_multiplier` × `clip_norm`."""

    sample_rate: float
    noise_multiplier: float
    steps: int
    clip_norm: float

    type: ClassVar[str] = "subsampled_gaussian"
    POSITIVE: ClassVar[frozenset[str]] = frozenset({"clip_norm"})
    NOISE: ClassVar[str | None] = "noise_multiplier"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sample_rate > 1:
            raise EventError(f"{self.type} event: sample_rate {self.sample_rate!r} is above 1")
        if self.steps != int(self.steps):
            raise EventError(f"{self.type} event: steps {self.steps!r} is not a whole number")
        object.__setattr__(self, "steps", int(self.steps))

    def prv(self) -> tuple[PrivacyRandomVariable, int] | None:
        from prv_accountant import PoissonSubsampledGaussianMechanism

        return (PoissonSubsampledGaussianMechanism(sampling_probability=self.sample_rate,
                                                   noise_multiplier=self.noise_multiplier), self.steps)

    def rdp_phase(self) -> Phase | None:
        from dpgym.privacy.accountants import Phase

        return Phase(self.sample_rate, self.noise_multiplier, self.steps)


@dataclass(frozen=True, kw_only=True)
class ExponentialEvent(PrivacyEvent):
    """One draw of the exponential mechanism, density ∝ exp(β·u) over scores of sensitivity Δu:
    pure ε = 2βΔu (McSherry & Talwar 2007), and 2βΔu-bounded-range, hence (2βΔu)²/8-zCDP (Cesar &
    Rogers 2021)."""

    inverse_temperature: float
    utility_sensitivity: float

    type: ClassVar[str] = "exponential"
    POSITIVE: ClassVar[frozenset[str]] = frozenset({"utility_sensitivity"})

    def pure_epsilon(self) -> float | None:
        return 2 * self.inverse_temperature * self.utility_sensitivity

    def zcdp_rho(self) -> float | None:
        return (2 * self.inverse_temperature * self.utility_sensitivity) ** 2 / 8


@dataclass(frozen=True, kw_only=True)
class ZcdpEvent(PrivacyEvent):
    """A whole mechanism proven ρ-zCDP (e.g. another library's AIM run, accounted there)."""

    rho: float

    type: ClassVar[str] = "zcdp"

    def zcdp_rho(self) -> float | None:
        return self.rho


@dataclass(frozen=True, kw_only=True)
class NonPrivateEvent(PrivacyEvent):
    """The private rows used with no protection at all (ε = ∞): a non-private run or reference."""

    type: ClassVar[str] = "non_private"

    @property
    def noise_free(self) -> bool:
        return True


EVENT_TYPES: dict[str, type[PrivacyEvent]] = {cls.type: cls for cls in (
    LaplaceEvent, GaussianEvent, SubsampledGaussianEvent, ExponentialEvent, ZcdpEvent, NonPrivateEvent)}
