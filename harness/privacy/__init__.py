"""Budgets, ledgers, mechanism calibration and independent re-accounting."""

from dpgym.privacy.budget import Budget, Guarantee
from dpgym.privacy.ledger import Ledger, LedgerEntry, PrivacyViolation
from dpgym.privacy.mechanisms import calibrate_gaussian, gaussian_epsilon
from dpgym.privacy.reaccount import Reaccounting, enforce, reaccount

__all__ = [
    "Budget", "Guarantee", "Ledger", "LedgerEntry", "PrivacyViolation", "Reaccounting",
    "calibrate_gaussian", "enforce", "gaussian_epsilon", "reaccount",
]
