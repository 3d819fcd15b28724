"""Misbehaving plugins for tests: each breaks one rule the harness must catch."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd

from dpgym import (
    Budget,
    Capability,
    Direction,
    ExponentialEvent,
    GaussianEvent,
    GeneratorSpec,
    Guarantee,
    LaplaceEvent,
    Ledger,
    MetricContext,
    MetricResult,
    MetricSpec,
    Schema,
    cell_threads,
    hookimpl,
)
from dpgym.plugins.generators.independent import SPEC as INDEPENDENT_SPEC
from dpgym.plugins.generators.independent.model import Independent
from dpgym.plugins.generators.uniform import Uniform


class Overspender(Uniform):
    """Claims the budget but runs a Laplace mechanism worth twice it."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        super().fit(train, schema, budget, seed)
        ledger = Ledger(Guarantee.FORMAL)
        ledger.record(LaplaceEvent(l1_sensitivity=2.0, scale=1.0 / budget.epsilon), epsilon=budget.epsilon,
                      accountant="pure")
        return ledger


class Crasher(Uniform):
    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        raise RuntimeError("model diverged")


class UnknownCategory(Uniform):
    """Emits a category its schema does not have, in the first categorical column."""

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        frame = super().sample(n, seed)
        column = next(c.name for c in self.schema_.columns if not c.is_numeric)
        frame[column] = frame[column].astype(str)
        frame.loc[0, column] = "Astronaut"
        return frame


class SeedIgnorer(Uniform):
    def sample(self, n: int, seed: int) -> pd.DataFrame:
        return super().sample(n, 0)


class Canceller(Uniform):
    """Spends ε = 10 with a Laplace release, and records a negative exponential entry to cancel it."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        super().fit(train, schema, budget, seed)
        ledger = Ledger(Guarantee.FORMAL)
        ledger.record(LaplaceEvent(l1_sensitivity=10.0, scale=1.0), epsilon=0.0)
        ledger.record(ExponentialEvent(inverse_temperature=-5.0, utility_sensitivity=1.0), epsilon=0.0)
        return ledger


class ScaleForgetter(Uniform):
    """Records a Laplace entry without its noise scale."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        super().fit(train, schema, budget, seed)
        ledger = Ledger(Guarantee.FORMAL)
        ledger.record(LaplaceEvent(l1_sensitivity=1.0), epsilon=budget.epsilon)
        return ledger


class ShortSampler(Uniform):
    """Returns a tenth of the rows asked for."""

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        return super().sample(n // 10, seed)


class LossReporter(Uniform):
    """Publishes an un-noised statistic of its training rows in its ledger entry."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        super().fit(train, schema, budget, seed)
        final_loss = float(train.select_dtypes("number").sum().sum())
        ledger = Ledger(Guarantee.PURE)
        ledger.record(LaplaceEvent(l1_sensitivity=1.0, scale=1.0 / budget.epsilon), details={"final_loss": final_loss})
        return ledger


class MemberCounter(Uniform):
    """Publishes the exact number of members among its training rows in its ledger entry."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        super().fit(train, schema, budget, seed)
        members = int((train["member"] == "yes").sum()) if "member" in train else 0
        ledger = Ledger(Guarantee.PURE)
        ledger.record(LaplaceEvent(l1_sensitivity=1.0, scale=1.0 / budget.epsilon), details={"members": members})
        return ledger


class MissingWeights(Uniform):
    """Fails its fit with the exception datasets raise for a missing file."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        from dpgym.data.datafiles import DatasetUnavailable

        raise DatasetUnavailable("pretrained weights not found")


class Wanderer(Uniform):
    """Changes the working directory (to a new folder inside it), as some libraries' training loops do."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        os.makedirs("wandered", exist_ok=True)
        os.chdir("wandered")
        return super().fit(train, schema, budget, seed)


class Quitter(Uniform):
    """Calls sys.exit(0), as a command-line tool used as a library may."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        sys.exit(0)


class RowCopier(Uniform):
    """Samples its training rows back, with an empty ledger: ε = 0 by its ledger, and no declaration
    that it reads no rows."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        super().fit(train, schema, budget, seed)
        self.rows_ = train.copy()
        return Ledger(Guarantee.FORMAL)

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        return self.rows_.sample(n, replace=True, random_state=seed).reset_index(drop=True)


class GaussianButPure(Uniform):
    """Labelled pure, with a Gaussian release (δ > 0) in its ledger."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        super().fit(train, schema, budget, seed)
        ledger = Ledger(Guarantee.PURE)
        ledger.record(GaussianEvent(l2_sensitivity=1.0, sigma=5.0 / budget.epsilon), epsilon=budget.epsilon,
                      delta=1e-6, accountant="analytic")
        return ledger


# The fakes below are uniform with one fault each, so they read no training rows unless they say so.
READS_NO_ROWS = frozenset({Capability.READS_NO_ROWS})


def _spec(name: str, factory: type, guarantee: Guarantee = Guarantee.FORMAL,
          capabilities: frozenset[Capability] = READS_NO_ROWS) -> GeneratorSpec:
    return GeneratorSpec(name=name, version="1", factory=factory, guarantee=guarantee, capabilities=capabilities)


class FaultyGenerators:
    @hookimpl
    def dpgym_generators(self) -> list[GeneratorSpec]:
        return [_spec("overspender", Overspender), _spec("crasher", Crasher),
                _spec("unknown_category", UnknownCategory, Guarantee.PURE),
                _spec("seed_ignorer", SeedIgnorer, Guarantee.PURE), _spec("canceller", Canceller),
                _spec("scale_forgetter", ScaleForgetter), _spec("short_sampler", ShortSampler, Guarantee.PURE),
                _spec("missing_weights", MissingWeights), _spec("loss_reporter", LossReporter, Guarantee.PURE),
                _spec("member_counter", MemberCounter, Guarantee.PURE),
                _spec("wanderer", Wanderer, Guarantee.PURE), _spec("quitter", Quitter, Guarantee.PURE),
                _spec("row_copier", RowCopier, capabilities=frozenset()),
                _spec("lying_row_copier", RowCopier), _spec("gaussian_but_pure", GaussianButPure, Guarantee.PURE)]


class QuieterIndependent(Independent):
    """Adds 10% less noise than its ledger's ε allows, but still claims the same ε."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        ledger = super().fit(train, schema, budget, seed)
        (entry,) = ledger.entries
        quieter = replace(entry.event, sigma=entry.event.sigma * 0.9)
        return Ledger(ledger.guarantee, [replace(entry, event=quieter)])


class QuieterGenerators:
    @hookimpl
    def dpgym_generators(self) -> list[GeneratorSpec]:
        return [GeneratorSpec(name="quieter_independent", version="1", factory=QuieterIndependent,
                              guarantee=Guarantee.FORMAL, defaults=INDEPENDENT_SPEC.defaults)]


# --- generators that break their process, for the executors' isolation and limits ---------------


class Sleeper(Uniform):
    """Never finishes fitting: only a wall-clock limit stops it."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        while True:
            time.sleep(1)


class Hog(Uniform):
    """Allocates (and touches) 128 MiB after 128 MiB: only a memory limit stops it."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        hoard = []
        while True:
            hoard.append(np.ones(2**24))  # 128 MiB of float64, written so it is resident


class Exiter(Uniform):
    """Leaves the interpreter without a word, as a crashing C extension or a stray sys.exit would."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        os._exit(3)


class Segfaulter(Uniform):
    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        ctypes.string_at(0)  # dereferences NULL: SIGSEGV
        raise AssertionError("unreachable")


HELPERS_ENV = "DPGYM_TEST_HELPERS"  # a file the generators below append their helper processes' pids to


def _record_helper(pid: int) -> None:
    with open(os.environ[HELPERS_ENV], "a") as out:
        out.write(f"{pid}\n")


class Forker(Uniform):
    """Forks a helper (as a fork-context worker pool does), which inherits every open file, the
    cell's result pipe too; then crashes."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        helper = os.fork()
        if helper == 0:
            time.sleep(1000)
            os._exit(0)
        _record_helper(helper)
        os._exit(5)


class Spawner(Uniform):
    """Succeeds, but leaves a helper process running."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        _record_helper(subprocess.Popen(["sleep", "1000"]).pid)
        return super().fit(train, schema, budget, seed)


class StuckSpawner(Uniform):
    """Starts a helper process, then never finishes fitting."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        _record_helper(subprocess.Popen(["sleep", "1000"]).pid)
        while True:
            time.sleep(1)


class Daemonizer(Uniform):
    """Starts a helper that leaves the cell's process group and loses its parent (a daemon's double
    fork), then never finishes fitting."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        middle = os.fork()
        if middle == 0:
            os.setsid()
            if os.fork() == 0:
                _record_helper(os.getpid())
                time.sleep(1000)
            os._exit(0)
        os.waitpid(middle, 0)
        while True:
            time.sleep(1)


class Lingerer(Uniform):
    """Succeeds, but a non-daemon thread keeps its process from exiting."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        threading.Thread(target=time.sleep, args=(1000,), daemon=False).start()
        return super().fit(train, schema, budget, seed)


class Probe(Uniform):
    """Reports, as warnings in result.json, the device it was given and the threads it may use."""

    def __init__(self, device: str = "auto"):
        self.device = device

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        import torch  # imported here, in the worker, as a deep-learning generator would

        warnings.warn(f"device={self.device} omp={os.environ.get('OMP_NUM_THREADS')} "
                      f"torch_threads={torch.get_num_threads()} cell_threads={cell_threads()}", stacklevel=1)
        return super().fit(train, schema, budget, seed)


class ExecutionFaults:
    @hookimpl
    def dpgym_generators(self) -> list[GeneratorSpec]:
        return [_spec("sleeper", Sleeper, Guarantee.PURE), _spec("hog", Hog, Guarantee.PURE),
                _spec("exiter", Exiter, Guarantee.PURE), _spec("segfaulter", Segfaulter, Guarantee.PURE),
                _spec("forker", Forker, Guarantee.PURE), _spec("spawner", Spawner, Guarantee.PURE),
                _spec("stuck_spawner", StuckSpawner, Guarantee.PURE), _spec("lingerer", Lingerer, Guarantee.PURE),
                _spec("daemonizer", Daemonizer, Guarantee.PURE),
                GeneratorSpec(name="probe", version="1", factory=Probe, guarantee=Guarantee.PURE,
                              capabilities=frozenset({Capability.DEVICE, Capability.READS_NO_ROWS}))]


# --- a cheap deterministic metric, so leaderboards of test runs have metric columns -------------


def _column_means(ctx: MetricContext) -> MetricResult:
    time.sleep(0.2)  # a little work per cell, so that a kill lands mid-run
    return MetricResult({"probe_age_mean": float(ctx.synthetic["age"].mean()),
                         "probe_hours_mean": float(ctx.synthetic["hours-per-week"].mean())})


class ProbeMetrics:
    @hookimpl
    def dpgym_metrics(self) -> list[MetricSpec]:
        return [MetricSpec(name="probe", version="1", evaluate=_column_means,
                           directions={"probe_age_mean": Direction.HIGHER, "probe_hours_mean": Direction.HIGHER})]


FAULTY = "tests.fake_plugins:FaultyGenerators"
EXECUTION = f"{FAULTY},tests.fake_plugins:ExecutionFaults,tests.fake_plugins:ProbeMetrics"


# --- output that JSON cannot hold: the run directory could not store it -------------------------


class TupleKeyedLedger(Uniform):
    """Adds a tuple-keyed parameter to its ledger entry after recording it."""

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        super().fit(train, schema, budget, seed)
        ledger = Ledger(Guarantee.PURE)
        entry = ledger.record(LaplaceEvent(l1_sensitivity=1.0, scale=1.0 / budget.epsilon))
        entry.details[("noise", "scale")] = entry.event.scale
        return ledger


def _tuple_keyed_detail(ctx: MetricContext) -> MetricResult:
    return MetricResult({"rows": float(len(ctx.synthetic))}, detail={("rows", "synthetic"): len(ctx.synthetic)})


class UnwritableOutputs:
    @hookimpl
    def dpgym_generators(self) -> list[GeneratorSpec]:
        return [_spec("tuple_keyed_ledger", TupleKeyedLedger, Guarantee.PURE)]

    @hookimpl
    def dpgym_metrics(self) -> list[MetricSpec]:
        return [MetricSpec(name="tuple_keyed_detail", version="1", evaluate=_tuple_keyed_detail,
                           directions={"rows": Direction.HIGHER})]


UNWRITABLE = "tests.fake_plugins:UnwritableOutputs"


def _target_rate_gap(ctx: MetricContext) -> MetricResult:
    """|share of the target's first class, real − synthetic|: cheap, and it separates the smoke generators."""
    target = ctx.schema.target
    first = ctx.schema[target].categories[0]
    real = float((ctx.train[target].astype(str) == first).mean())
    synthetic = float((ctx.synthetic[target].astype(str) == first).mean())
    return MetricResult({"target_rate_gap": abs(real - synthetic)})


def _numeric_mean_gap(ctx: MetricContext) -> MetricResult:
    gaps = [abs(ctx.train[c.name].astype(float).mean() - ctx.synthetic[c.name].astype(float).mean()) / (c.max - c.min)
            for c in ctx.schema.columns if c.is_numeric]
    return MetricResult({"numeric_mean_gap": float(np.mean(gaps))})


class QuickMetrics:
    """Two fast metrics standing in for the fidelity/utility plugins, so the report has numbers to plot."""

    @hookimpl
    def dpgym_metrics(self) -> list[MetricSpec]:
        return [MetricSpec("target_gap", "1", _target_rate_gap, {"target_rate_gap": Direction.LOWER},
                           description="The gap between the real and synthetic rates of the target classes.",
                           ranked_value="target_rate_gap"),
                MetricSpec("mean_gap", "1", _numeric_mean_gap, {"numeric_mean_gap": Direction.LOWER},
                           description="The gap between the real and synthetic means of the numeric columns.",
                           ranked_value="numeric_mean_gap")]
