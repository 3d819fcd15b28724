"""A full private DP-HFlow fit on Adult (32,561 rows, default hyper-parameters: 20 epochs of
Poisson batches of expected size 256, per-unit clipping, ε = 1, δ = 1e-5) must finish within
10 minutes on 2 CPU cores (issue 5). Records wall time, CPU time and peak RSS of the fit.

CPU time is reported beside wall time because the cores are shared: under contention wall time
measures the neighbours as much as the fit. Run with `make benchmarks`.
"""

from __future__ import annotations

import resource
import time

import pytest

from harness import Budget
from plugins.datasets import adult
from plugins.generators.dp_hflow import SPEC

TEN_MINUTES = 600.0


def _fit_adult() -> dict[str, float]:
    split = adult.load()
    generator = SPEC.build({})
    wall, cpu = time.perf_counter(), time.process_time()
    ledger = generator.fit(split.train, adult.schema(), Budget(1.0, 1e-5), seed=0)
    stats = {"fit_wall_s": time.perf_counter() - wall, "fit_cpu_s": time.process_time() - cpu,
             "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
             "epsilon": ledger.entries[0].epsilon, "steps": ledger.entries[0].params["steps"]}
    return stats


@pytest.mark.slow
def test_private_adult_fit_within_ten_minutes(benchmark):
    stats = benchmark.pedantic(_fit_adult, rounds=1, iterations=1)
    benchmark.extra_info.update(stats)
    print(f"\nDP-HFlow Adult fit: {stats}")
    assert stats["epsilon"] <= 1.0
    # CPU time: what the fit itself costs on 2 cores (it runs one torch thread by default).
    assert stats["fit_cpu_s"] < TEN_MINUTES
