"""Generators that run in their own Python environment, so packages whose pins clash with dpgym's
(synthcity pins torch < 2.3 and numpy < 2) can be benchmarked beside them.

The host side is an ordinary generator. `fit` writes the cell's training rows (CSV) and a request
(public schema, budget, seed, hyper-parameters, adapter module) into a fresh temporary folder and
runs ``<environment's python> -I isolated_runner.py request.json`` there; the runner imports the
adapter inside the environment and writes back the fitted model (opaque bytes, kept by the host so
the fitted generator pickles) and the ledger. `sample` does the same with the model and reads the
synthetic rows back. The ledger is then checked by the harness like any other: re-accounted,
refused when it overspends. ``-I`` keeps the host's PYTHONPATH and user site out of the environment.

The child process is a descendant of the cell's process, so the cell's time and memory limits
cover it. Any failure in the environment fails the cell with a message naming the generator and
the environment; a missing environment names the command that creates it.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from dpgym.data.datafiles import CHECKOUT
from dpgym.privacy.budget import Budget, Guarantee
from dpgym.privacy.ledger import Ledger
from dpgym.engine import isolated_runner
from dpgym.schema import Schema
from dpgym.specs import GeneratorSpec

RUNNER = Path(isolated_runner.__file__)

STDERR_LINES = 20  # of the environment's traceback, quoted in the cell's error


class EnvironmentUnavailable(RuntimeError):
    """The generator's environment does not exist here; the message says how to create it."""


class IsolatedGeneratorError(RuntimeError):
    """The generator failed inside its environment (import error, crash, non-zero exit)."""


@dataclass(frozen=True)
class Environment:
    """A Python environment a generator runs in: where its interpreter is and how to create it."""

    name: str
    python: str  # the interpreter: absolute, or relative to the dpgym checkout
    env_var: str  # when set, overrides `python`
    setup: str  # the one command that creates the environment
    paths: tuple[str, ...] = ()  # folders put first on the runner's sys.path (where adapters live)
    ready: str = ""  # a file `setup` writes last, once the environment imports; absent while it builds

    def interpreter(self) -> Path:
        return _in_checkout(os.environ.get(self.env_var) or self.python)

    def availability(self) -> str:
        """"" when the environment can run cells, else one line saying how to create or point to it.
        An interpreter named by `env_var` is the user's own and is taken as it is; the default one
        must also carry the `ready` marker, so a half-built environment runs no cell."""
        python = self.interpreter()
        remedy = f"create it with `{self.setup}`, or set {self.env_var} to its python"
        if not python.is_file():
            return f"environment {self.name!r} not found at {python}: {remedy}"
        if not os.access(python, os.X_OK):
            return f"environment {self.name!r}: {python} is not executable: {remedy}"
        marker = _in_checkout(self.ready)
        if self.ready and not os.environ.get(self.env_var) and not marker.is_file():
            return (f"environment {self.name!r} at {self.interpreter()} is incomplete (its set-up has not finished: "
                    f"no {marker}): run `{self.setup}`")
        return ""


def _in_checkout(path: str) -> Path:
    """An absolute path as it is; a relative one from the dpgym checkout."""
    return Path(path) if Path(path).is_absolute() else CHECKOUT / path


class IsolatedGenerator:
    """The host side of a generator whose `fit` and `sample` run in `environment`."""

    def __init__(self, name: str, adapter: str, environment: Environment, **params: Any):
        self.name, self.adapter, self.environment, self.params = name, adapter, environment, params

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        self.schema_ = schema
        with tempfile.TemporaryDirectory(prefix="dpgym-isolated-") as folder:
            work = Path(folder)
            train.to_csv(work / isolated_runner.TRAIN, index=False)
            self._run(work, action="fit", epsilon=budget.epsilon, delta=budget.delta, seed=seed, params=self.params)
            self.model_ = (work / isolated_runner.MODEL).read_bytes()
            response = json.loads((work / isolated_runner.RESPONSE).read_text())
        try:
            return Ledger.from_dict(response["ledger"])
        except (KeyError, TypeError, ValueError) as err:
            raise IsolatedGeneratorError(f"{self._where()}: the adapter returned a malformed ledger: {err!r}") from err

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        with tempfile.TemporaryDirectory(prefix="dpgym-isolated-") as folder:
            work = Path(folder)
            (work / isolated_runner.MODEL).write_bytes(self.model_)
            self._run(work, action="sample", n=n, seed=seed)
            # Values come back as text; the harness validates and casts them against the schema.
            return pd.read_csv(work / isolated_runner.SYNTHETIC, dtype=str, keep_default_na=False, na_values=[""])

    def _where(self) -> str:
        return f"generator {self.name!r} in environment {self.environment.name!r} ({self.environment.interpreter()})"

    def _run(self, work: Path, **request: Any) -> None:
        missing = self.environment.availability()
        if missing:
            raise EnvironmentUnavailable(f"generator {self.name!r}: {missing}")
        request.update(adapter=self.adapter, schema=self.schema_.to_dict(), paths=list(self.environment.paths))
        (work / "request.json").write_text(json.dumps(request))
        try:
            done = subprocess.run([str(self.environment.interpreter()), "-I", str(RUNNER), "request.json"], cwd=work,
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL)
        except OSError as err:  # e.g. a script whose interpreter line names a missing program
            raise IsolatedGeneratorError(f"{self._where()}: {request['action']} could not start: {err}") from err
        if done.returncode != 0:
            detail = "\n".join(done.stderr.strip().splitlines()[-STDERR_LINES:])
            raise IsolatedGeneratorError(f"{self._where()}: {request['action']} exited with code {done.returncode}:\n"
                                         f"{detail}")


def isolated_spec(name: str, version: str, adapter: str, environment: Environment, guarantee: Guarantee,
                  defaults: Mapping[str, Any], description: str = "",
                  quick_params: Mapping[str, Any] | None = None) -> GeneratorSpec:
    """A generator spec whose fit and sample run `adapter` ("module" or "module:object", importable in
    `environment`; the contract is in `dpgym.engine.isolated_runner`)."""
    return GeneratorSpec(
        name=name, version=version, guarantee=guarantee, defaults=dict(defaults), description=description,
        quick_params=dict(quick_params or {}), availability=environment.availability,
        factory=functools.partial(IsolatedGenerator, name, adapter, environment),
    )
