"""How the report writes numbers: metric values, ledger figures and budgets."""

from __future__ import annotations

import math
from typing import Any


def num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) >= 1000 else f"{value:.{digits}f}"
    return str(value)


def sig(value: Any) -> str:
    """Four significant digits for ledger numbers (ε, δ, σ, sensitivities span many magnitudes)."""
    if isinstance(value, str) and value in ("inf", "Infinity"):
        return "∞"
    return f"{value:.4g}".replace("inf", "∞") if isinstance(value, float | int) and not isinstance(value, bool) \
        else str(value)


def eps(value: float) -> str:
    return "∞" if value == math.inf else f"{value:g}"
