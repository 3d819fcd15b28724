"""Fixtures of the marginal-based generators' tests."""

from __future__ import annotations

import pytest

from tests.plugins.marginal.support import correlated_table


@pytest.fixture(scope="session")
def correlated():
    """3,000 rows of the correlated table."""
    return correlated_table()
