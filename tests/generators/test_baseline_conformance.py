"""DP-MERF and DP-CGAN pass the harness's generator conformance checks (at their quick settings)."""

import pytest

from harness.testing import conformance_checks
from plugins.generators import dp_cgan, dp_merf


@pytest.mark.parametrize("check", conformance_checks(dp_merf.SPEC) + conformance_checks(dp_cgan.SPEC), ids=str)
def test_baseline_generators_conform(check):
    check()
