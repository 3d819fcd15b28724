"""The privacy ledger: every mechanism a generator ran on private rows, with enough parameters
for anyone to re-account it.

`ledger.json` (one per cell) is documented in the README ("The privacy ledger"). Entries use
these mechanism names and parameters:

- ``laplace``: ``l1_sensitivity``, ``scale`` (pure ε = l1_sensitivity / scale)
- ``gaussian``: ``l2_sensitivity``, ``sigma`` (noise standard deviation)
- ``subsampled_gaussian`` (DP-SGD): ``sample_rate``, ``noise_multiplier``, ``steps``, ``clip_norm``,
  ``clipping``; Poisson sampling, add/remove adjacency
- ``zcdp``: ``rho`` (a ρ-zCDP mechanism, e.g. AIM's whole run; a ledger of zCDP entries only adds ρ)
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dpgym.privacy.budget import Budget, Guarantee

LEDGER_FORMAT = "dpgym-ledger/1"
COMPOSITIONS = ("basic", "rdp", "prv", "gdp")
PURE_MECHANISMS = frozenset({"laplace", "exponential"})


class PrivacyViolation(RuntimeError):
    """A cell spent more than its budget, or claimed less than its mechanisms spend."""


@dataclass(frozen=True)
class LedgerEntry:
    mechanism: str
    epsilon: float
    delta: float
    params: dict[str, Any]
    accountant: str
    description: str = ""

    def __post_init__(self) -> None:
        """A ledger is published as JSON: params it cannot hold (a tuple key) are refused where the
        plugin records them, not later when its cell is stored."""
        try:
            json.dumps(self.params, default=str)
        except (TypeError, ValueError) as err:
            raise TypeError(f"ledger entry {self.mechanism!r}: params {self.params!r} cannot be written as JSON: "
                            f"{err}") from None

    def to_dict(self) -> dict[str, Any]:
        return {k: _json_float(v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> LedgerEntry:
        return cls(
            mechanism=raw["mechanism"],
            epsilon=float(raw["epsilon"]),  # float("inf") reads the "inf" we write
            delta=float(raw["delta"]),
            params=dict(raw.get("params", {})),
            accountant=raw.get("accountant", ""),
            description=raw.get("description", ""),
        )


@dataclass
class Ledger:
    """Entries in the order the mechanisms ran, and the total the generator claims for them.

    With ``composition="basic"`` the total is the sum of the entries' ε and δ. A generator that
    composes more tightly (RDP or PRV curves across phases) states its total with `claim`.
    """

    guarantee: Guarantee
    entries: list[LedgerEntry] = field(default_factory=list)
    composition: str = "basic"
    claimed_epsilon: float | None = None
    claimed_delta: float | None = None

    @classmethod
    def non_private(cls, guarantee: Guarantee, description: str) -> Ledger:
        """The ledger of a run that spends no privacy protection at all (ε = ∞)."""
        entry = LedgerEntry("non_private", math.inf, 0.0, {}, "none", description)
        return cls(guarantee, [entry])

    @property
    def is_non_private(self) -> bool:
        return any(e.mechanism == "non_private" for e in self.entries)

    def record(self, entry: LedgerEntry) -> LedgerEntry:
        self.entries.append(entry)
        return entry

    def claim(self, epsilon: float, delta: float, composition: str) -> None:
        if composition not in COMPOSITIONS:
            raise ValueError(f"composition must be one of {COMPOSITIONS}, got {composition!r}")
        self.claimed_epsilon, self.claimed_delta, self.composition = epsilon, delta, composition

    @property
    def epsilon(self) -> float:
        if self.claimed_epsilon is not None:
            return self.claimed_epsilon
        return float(sum(e.epsilon for e in self.entries))

    @property
    def delta(self) -> float:
        if self.claimed_delta is not None:
            return self.claimed_delta
        return float(sum(e.delta for e in self.entries))

    def label_contradiction(self) -> str:
        """Why the ledger's entries contradict its guarantee label, or "": a `pure` ledger states
        δ = 0 and records only pure mechanisms (Laplace, exponential), whatever it claims."""
        if self.guarantee is not Guarantee.PURE or self.is_non_private:
            return ""
        impure = sorted({e.mechanism for e in self.entries if e.mechanism not in PURE_MECHANISMS})
        if impure:
            return f"it is labelled pure, but its ledger records {impure}, which are not pure-DP mechanisms"
        positive = self.delta > 0 or any(e.delta > 0 for e in self.entries)
        return "it is labelled pure, but its ledger states δ > 0" if positive else ""

    def check_within(self, budget: Budget) -> None:
        """Refuse a claimed total above the budget (a small relative slack absorbs float noise)."""
        if not budget.is_private or self.guarantee is Guarantee.NONE:
            return  # non-private runs and non-private references (guarantee "none") have no bound
        if self.is_non_private:
            raise PrivacyViolation(f"a non-private ledger cannot run under the finite budget ε={budget.epsilon:g}")
        if self.epsilon > budget.epsilon * (1 + 1e-9) or self.delta > budget.delta * (1 + 1e-9):
            raise PrivacyViolation(
                f"ledger spends (ε={self.epsilon:.6g}, δ={self.delta:.3g}) "
                f"over the budget (ε={budget.epsilon:g}, δ={budget.delta:g})"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": LEDGER_FORMAT,
            "guarantee": str(self.guarantee),
            "composition": self.composition,
            "epsilon": _json_float(self.epsilon),
            "delta": self.delta,
            "entries": [e.to_dict() for e in self.entries],
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Ledger:
        if raw.get("format") != LEDGER_FORMAT:
            raise ValueError(f"not a {LEDGER_FORMAT} ledger: format={raw.get('format')!r}")
        ledger = cls(Guarantee(raw["guarantee"]), [LedgerEntry.from_dict(e) for e in raw["entries"]])
        if raw.get("composition", "basic") != "basic":
            ledger.claim(float(raw["epsilon"]), float(raw["delta"]), raw["composition"])
        return ledger

    def write(self, path: Path, extra: dict[str, Any] | None = None) -> None:
        path.write_text(json.dumps({**self.to_dict(), **(extra or {})}, indent=2))


def _json_float(value: Any) -> Any:
    """JSON has no infinity: write it as the string "inf"."""
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return value
