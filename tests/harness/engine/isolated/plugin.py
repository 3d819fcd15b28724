"""Test plugins whose generators run in a throwaway environment (`DPGYM_TEST_ISOLATED_PYTHON`)."""

from __future__ import annotations

from pathlib import Path

from dpgym import Guarantee, hookimpl
from dpgym.engine.isolation import Environment, isolated_spec

THROWAWAY = Environment(
    name="stdlib-test", python=".venv-isolation-test/bin/python", env_var="DPGYM_TEST_ISOLATED_PYTHON",
    setup="python -m venv --without-pip .venv-isolation-test", paths=(str(Path(__file__).resolve().parent),),
)
DEFAULTS = {"bins": 16, "crash": False, "overspend": False}


class IsolatedPlugins:
    @hookimpl
    def dpgym_generators(self):
        return [
            isolated_spec("isolated_marginals", "1", "stdlib_marginals", THROWAWAY, Guarantee.PURE, DEFAULTS),
            isolated_spec("isolated_no_adapter", "1", "no_such_adapter", THROWAWAY, Guarantee.PURE, DEFAULTS),
        ]


PLUGINS = "tests.harness.engine.isolated.plugin:IsolatedPlugins"
