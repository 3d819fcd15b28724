"""Budgets and ledgers. Calibration (`dpgym.privacy.mechanisms`, `.accountants`), re-accounting
(`.reaccount`) and DP-SGD (`.dpsgd`) are modules of their own, imported where they are used (scipy,
prv-accountant and torch are heavy), so that the contract stays cheap to import; the public API
(`dpgym`) exports their names lazily.
"""

from dpgym.privacy.budget import Budget, Guarantee
from dpgym.privacy.ledger import Ledger, LedgerEntry, PrivacyViolation

__all__ = ["Budget", "Guarantee", "Ledger", "LedgerEntry", "PrivacyViolation"]
