"""The privacy ledger: every mechanism a generator ran on private rows, as typed privacy events
(`dpgym.privacy.events`) with the ε the generator claims for each, so that anyone can re-account it.

`ledger.json` (one per cell) is written in format 2: each entry holds its event under "event",
tagged with the event's type ("laplace", "gaussian", "subsampled_gaussian", "exponential", "zcdp",
"non_private") beside its parameters and adjacency. Format 1 (the mechanism's name and one
"params" table) is still read: its accounted parameters become the event, the rest the entry's
details.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

from dpgym.privacy.budget import Budget, Guarantee
from dpgym.privacy.events import EVENT_TYPES, Adjacency, EventError, NonPrivateEvent, PrivacyEvent

LEDGER_FORMAT = "dpgym-ledger/2"
LEDGER_FORMAT_1 = "dpgym-ledger/1"
COMPOSITIONS = ("basic", "rdp", "prv", "gdp")


class PrivacyViolation(RuntimeError):
    """A cell spent more than its budget, or claimed less than its mechanisms spend."""


@dataclass(frozen=True)
class LedgerEntry:
    """One event and what the plugin claims it spent: its own (ε, δ), by which accountant, for what.
    `details` holds what describes the event without being accounted (a DP-SGD phase's clipping, the
    iteration of an EM step)."""

    event: PrivacyEvent
    epsilon: float
    delta: float
    accountant: str = ""
    description: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refused where the plugin records it: an entry that is not an event, a claim that is not a
        number, details that ledger.json cannot hold (a tuple key)."""
        if not isinstance(self.event, PrivacyEvent):
            raise EventError(f"a ledger entry records a privacy event (dpgym.privacy.events), got "
                             f"{type(self.event).__name__}: {self.event!r}")
        what = f"ledger entry {self.event.type!r}"
        for name in ("epsilon", "delta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, Real) or not value >= 0:
                raise EventError(f"{what}: {name} is {value!r}, not a number ≥ 0")
            object.__setattr__(self, name, float(value))
        if self.delta >= 1:
            raise EventError(f"{what}: delta is {self.delta!r}; it must be below 1")
        try:
            json.dumps(self.details, default=str)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{what}: details {self.details!r} cannot be written as JSON: {err}") from None

    @property
    def type(self) -> str:
        return self.event.type

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.event.to_dict(), "epsilon": _json_float(self.epsilon), "delta": self.delta,
                "accountant": self.accountant, "description": self.description, "details": self.details}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> LedgerEntry:
        return cls(PrivacyEvent.from_dict(raw["event"]), float(raw["epsilon"]), float(raw["delta"]),
                   raw.get("accountant", ""), raw.get("description", ""), dict(raw.get("details", {})))

    @classmethod
    def from_format_1(cls, raw: dict[str, Any]) -> LedgerEntry:
        """An entry of a format-1 ledger: "mechanism" and one "params" table, split here into the
        event's parameters (and adjacency, add/remove when unstated) and the details."""
        params = dict(raw.get("params", {}))
        event = {"type": raw.get("mechanism"), "adjacency": params.pop("adjacency", str(Adjacency.ADD_REMOVE))}
        kind = EVENT_TYPES.get(raw.get("mechanism"))  # type: ignore[arg-type]
        for name in kind.parameter_names() if kind else ():
            if name in params:
                event[name] = params.pop(name)
        return cls(PrivacyEvent.from_dict(event), float(raw["epsilon"]), float(raw["delta"]),
                   raw.get("accountant", ""), raw.get("description", ""), params)


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
        return cls(guarantee, [LedgerEntry(NonPrivateEvent(), math.inf, 0.0, "none", description)])

    @property
    def is_non_private(self) -> bool:
        return any(isinstance(e.event, NonPrivateEvent) for e in self.entries)

    def record(self, event: PrivacyEvent, *, delta: float = 0.0, epsilon: float | None = None, accountant: str = "",
               description: str = "", details: dict[str, Any] | None = None) -> LedgerEntry:
        """Record one mechanism the plugin ran on the private rows, and return its entry. The entry
        claims `epsilon` at `delta`; without an `epsilon`, the event's own ε at `delta`
        (`PrivacyEvent.epsilon`). Anything malformed raises here, naming the field."""
        claimed = epsilon
        if claimed is None and isinstance(event, PrivacyEvent):  # anything else is refused by LedgerEntry, named
            claimed = event.epsilon(delta)
        entry = LedgerEntry(event, claimed, delta, accountant, description, dict(details or {}))  # type: ignore[arg-type]
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
        impure = sorted({e.type for e in self.entries if e.event.pure_epsilon() is None})
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
    def from_dict(cls, raw: dict[str, Any], source: str = "ledger") -> Ledger:
        """A ledger from its JSON form, format 2 or 1; anything else, or an entry no accountant can read,
        is a ValueError naming `source`, the format and the entry."""
        fmt = raw.get("format") if isinstance(raw, dict) else None
        if fmt not in (LEDGER_FORMAT, LEDGER_FORMAT_1):
            raise ValueError(f"{source}: not a dpgym ledger (format {fmt!r}; this dpgym reads {LEDGER_FORMAT} and "
                             f"{LEDGER_FORMAT_1})")
        read = LedgerEntry.from_dict if fmt == LEDGER_FORMAT else LedgerEntry.from_format_1
        entries = []
        for i, entry in enumerate(raw["entries"]):
            try:
                entries.append(read(entry))
            except (EventError, KeyError, TypeError, ValueError) as err:
                raise ValueError(f"{source} ({fmt}): entry {i}: {err}") from None
        ledger = cls(Guarantee(raw["guarantee"]), entries)
        if raw.get("composition", "basic") != "basic":
            ledger.claim(float(raw["epsilon"]), float(raw["delta"]), raw["composition"])
        return ledger


def _json_float(value: Any) -> Any:
    """JSON has no infinity: write it as the string "inf"."""
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return value


@dataclass(frozen=True)
class Reaccounting:
    """The harness's independent re-accounting of a ledger (`dpgym.privacy.reaccount.reaccount`): what
    its events spend, by which accountant, and whether the cell may be ranked."""

    epsilon: float
    delta: float
    accountant: str
    verdict: str  # "ok", "underclaimed" or "over_budget"
    detail: str = ""
    rdp_epsilon: float | None = None  # second opinion; None when some entry has no RDP rule

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "accountant": self.accountant,
                "verdict": self.verdict, "detail": self.detail, "rdp_epsilon": self.rdp_epsilon}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Reaccounting:
        rdp = raw.get("rdp_epsilon")
        return cls(float(raw.get("epsilon", math.nan)), float(raw.get("delta", 0.0)), raw.get("accountant", ""),
                   raw.get("verdict", ""), raw.get("detail", ""), None if rdp is None else float(rdp))
