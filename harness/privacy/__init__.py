"""Budgets, ledgers, mechanism calibration and independent re-accounting.

Budgets and ledgers load at once; calibration and re-accounting (scipy, prv-accountant) load on
first use, so that the contract stays cheap to import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dpgym.privacy.budget import Budget, Guarantee
from dpgym.privacy.ledger import Ledger, LedgerEntry, PrivacyViolation

_LAZY = {
    "calibrate_gaussian": "dpgym.privacy.mechanisms", "gaussian_epsilon": "dpgym.privacy.mechanisms",
    "Reaccounting": "dpgym.privacy.reaccount", "enforce": "dpgym.privacy.reaccount",
    "reaccount": "dpgym.privacy.reaccount",
}

__all__ = ["Budget", "Guarantee", "Ledger", "LedgerEntry", "PrivacyViolation", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dpgym.privacy' has no attribute {name!r}")


if TYPE_CHECKING:
    from dpgym.privacy.mechanisms import calibrate_gaussian, gaussian_epsilon
    from dpgym.privacy.reaccount import Reaccounting, enforce, reaccount
