"""Speed of the runner itself: the smoke suite at 4 seeds (its 5 generators × 4 = 20 cells, with
the fidelity and utility metrics; the grid the executors were accepted on) serially, on one worker process and
on two, and the harness's overhead per cell excluding the plugins' own work (fit, sample, evaluate).

Run with `make benchmarks` (or `pytest benchmarks --benchmark-enable`). The figures depend on what
else the machine is running: the load average is recorded beside each figure.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest

from dpgym.data.splits import load_split
from dpgym.registry import Registry
from dpgym.results.store import RunStore
from dpgym.engine.runner import run_suite
from dpgym.engine.suite import Settings, load_suite
from dpgym.engine.threads import cpu_count
from dpgym.engine.worker import start_forkserver

SEEDS = 4
CONFIGS = {"serial": Settings(executor="serial"), "1 worker": Settings(executor="processes", workers=1),
           "2 workers": Settings(executor="processes", workers=2)}
PLUGIN_WORK = ("fit_seconds", "sample_seconds", "evaluate_seconds")
measured: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.discover()


@pytest.fixture(scope="module")
def suite():
    return replace(load_suite("smoke"), seeds=tuple(range(SEEDS)))


def _run(suite, registry, settings: Settings, out: Path) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    start, cpu = time.perf_counter(), time.process_time()
    summary = run_suite(suite, RunStore(out), registry, show_progress=False, settings=settings)
    wall, driver_cpu = time.perf_counter() - start, time.process_time() - cpu
    assert summary.ok == summary.total == len(suite.generators) * SEEDS
    results = RunStore(out).results()
    plugin = sum(r["timings"].get(k, 0.0) for r in results for k in PLUGIN_WORK)
    workers_cpu = sum(r.get("execution", {}).get("cpu_seconds", 0.0) for r in results)
    return {"wall_seconds": wall, "cells": len(results), "plugin_seconds": plugin,
            "driver_cpu_seconds": driver_cpu, "cell_process_cpu_seconds": workers_cpu,
            "load_average_1min": os.getloadavg()[0]}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_runner_wall_time(benchmark, registry, suite, tmp_path, config):
    # Both start warm: the data loaded (serial) or the forkserver up (once per driver; measured below).
    if config == "serial":
        load_split(registry.dataset("adult").load)
    else:
        start_forkserver(registry.worker_plugins, ["adult"])
    figures = benchmark.pedantic(_run, args=(suite, registry, CONFIGS[config], tmp_path / "run"), rounds=1,
                                 iterations=1)
    benchmark.extra_info.update(figures)
    measured[config] = figures


def test_forkserver_start(benchmark, registry):
    """Once per driver: imports, plugin discovery and dataset loading in the forkserver."""
    from multiprocessing import forkserver

    def cold_start() -> None:
        forkserver._forkserver._stop()  # the next start pays the full preload again
        start_forkserver(registry.worker_plugins, ["adult"])

    benchmark.pedantic(cold_start, rounds=2, iterations=1)


def test_scaling_and_per_cell_overhead(benchmark):
    if len(measured) < len(CONFIGS):
        pytest.skip("run with the wall-time benchmarks")
    one, two, serial = measured["1 worker"], measured["2 workers"], measured["serial"]
    overhead = (one["wall_seconds"] - one["plugin_seconds"]) / one["cells"]  # per cell, one at a time
    benchmark.extra_info.update({
        "cores": cpu_count(),
        "two_workers_over_serial": two["wall_seconds"] / serial["wall_seconds"],
        "two_workers_over_one": two["wall_seconds"] / one["wall_seconds"],
        "overhead_seconds_per_cell": overhead,
        "serial_overhead_seconds_per_cell": (serial["wall_seconds"] - serial["plugin_seconds"]) / serial["cells"],
        # Less sensitive to other load on the machine: CPU per cell, driver + cell process, plugin work
        # included (an upper bound on the harness's own share).
        "cpu_seconds_per_cell": (one["driver_cpu_seconds"] + one["cell_process_cpu_seconds"]) / one["cells"],
    })
    benchmark.pedantic(lambda: None, rounds=1)
    print("\n" + "\n".join(f"{k}: {v:.3f}" for k, v in benchmark.extra_info.items()))
    for name, figures in measured.items():
        print(f"{name}: " + ", ".join(f"{k}={v:.2f}" for k, v in figures.items()))
    assert overhead < 1.0
    assert two["wall_seconds"] <= 0.6 * serial["wall_seconds"]  # the target, on a quiet machine
