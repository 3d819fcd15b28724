"""Budgets, ledgers, mechanism calibration and independent re-accounting."""

from harness.privacy.budget import Budget, Guarantee
from harness.privacy.ledger import Ledger, LedgerEntry, PrivacyViolation
from harness.privacy.mechanisms import calibrate_gaussian, gaussian_epsilon
from harness.privacy.reaccount import Reaccounting, enforce, reaccount

__all__ = [
    "Budget", "Guarantee", "Ledger", "LedgerEntry", "PrivacyViolation", "Reaccounting",
    "calibrate_gaussian", "enforce", "gaussian_epsilon", "reaccount",
]
