"""Privacy budgets and the honesty labels generators declare about their guarantee."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class Guarantee(enum.StrEnum):
    """What a generator's ledger is allowed to mean."""

    FORMAL = "formal"  # (ε, δ)-DP, proven for the mechanism as implemented
    PURE = "pure"  # ε-DP (δ = 0)
    NOMINAL = "nominal"  # a DP claim without a proof for the implementation (e.g. ExpM+NF)
    NONE = "none"  # non-private reference (e.g. the real data)

    @property
    def is_private(self) -> bool:
        return self is not Guarantee.NONE


@dataclass(frozen=True)
class Budget:
    """The (ε, δ) a cell may spend. ε = inf means a non-private run of a private method."""

    epsilon: float
    delta: float = 1e-5

    def __post_init__(self) -> None:
        if not (self.epsilon > 0):
            raise ValueError(f"epsilon must be positive (inf for non-private), got {self.epsilon}")
        if not (0 <= self.delta < 1):
            raise ValueError(f"delta must lie in [0, 1), got {self.delta}")

    @property
    def is_private(self) -> bool:
        return math.isfinite(self.epsilon)

    def to_dict(self) -> dict[str, float | str]:
        return {"epsilon": self.epsilon if self.is_private else "inf", "delta": self.delta}
