"""A full private DP-HFlow fit on Adult (32,561 rows, default hyper-parameters: 20 epochs of
Poisson batches of expected size 256, per-unit clipping, ε = 1, δ = 1e-5) must finish within
10 minutes on 2 CPU cores. Records wall time, CPU time and peak RSS of the fit.
Sampling is timed on Census's 41 columns, where inverting the flow (one MADE pass per column and
block) costs more than a short fit: a grid samples as many rows as the training split has.

CPU time is reported beside wall time because the cores are shared: under contention wall time
measures the neighbours as much as the fit. Run with `make benchmarks`.
"""

from __future__ import annotations

import resource
import time

import pytest

from dpgym import Budget
from dpgym.plugins.datasets import adult, census
from dpgym.plugins.generators.dp_hflow import SPEC

TEN_MINUTES = 600.0


def _fit_adult() -> dict[str, float]:
    split = adult.load()
    generator = SPEC.build({})
    wall, cpu = time.perf_counter(), time.process_time()
    ledger = generator.fit(split.train, adult.schema(), Budget(1.0, 1e-5), seed=0)
    stats = {"fit_wall_s": time.perf_counter() - wall, "fit_cpu_s": time.process_time() - cpu,
             "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
             "epsilon": ledger.entries[0].epsilon, "steps": ledger.entries[0].event.steps}
    return stats


@pytest.mark.slow
def test_private_adult_fit_within_ten_minutes(benchmark):
    stats = benchmark.pedantic(_fit_adult, rounds=1, iterations=1)
    benchmark.extra_info.update(stats)
    print(f"\nDP-HFlow Adult fit: {stats}")
    assert stats["epsilon"] <= 1.0
    # CPU time: what the fit itself costs on 2 cores (it runs one torch thread by default).
    assert stats["fit_cpu_s"] < TEN_MINUTES


# 20,000 rows of Census width took 19.7 s (wall, one job on the cores) when every pass computed all
# 41 columns' spline parameters, and 4.6 s with only the inverted column's; here 4.3 CPU-s (2026-11-26).
SAMPLE_ROWS, SAMPLE_CPU_LIMIT = 20_000, 12.0


@pytest.mark.slow
def test_census_width_sampling_rate(benchmark):
    split = census.load()
    generator = SPEC.build({"max_steps": 20})  # sampling cost does not depend on how long it trained
    generator.fit(split.train, census.schema(), Budget(1.0, 1e-5), seed=0)

    def sample() -> float:
        cpu = time.process_time()
        generator.sample(SAMPLE_ROWS, seed=1)
        return time.process_time() - cpu

    cpu_s = benchmark.pedantic(sample, rounds=1, iterations=1)
    benchmark.extra_info.update({"rows": SAMPLE_ROWS, "sample_cpu_s": cpu_s})
    print(f"\nDP-HFlow Census-width sampling: {SAMPLE_ROWS} rows in {cpu_s:.1f} CPU-s")
    assert cpu_s < SAMPLE_CPU_LIMIT
