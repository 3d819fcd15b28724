"""Fit-and-sample time and peak memory of MST and AIM on Adult at (1, 1e-5), default settings.
Targets on 2 CPU cores: MST under 2 minutes; AIM under 10 minutes and 4 GiB peak resident memory.

Run: PYTHONPATH=. python -m pytest benchmarks/test_marginal_fit.py --benchmark-enable -p no:cacheprovider -s
The machine is shared, so the time assertion is on CPU seconds of this process, JAX's threads
included (what a fit costs on idle cores, an upper bound on the wall time of a 2-core fit); wall
seconds are printed beside it and recorded in the benchmark's extra info. Peak memory is the
process's resident high-water mark, which the JAX runtime and its compiled programs dominate.
"""

import time

import pytest

from dpgym import Budget
from dpgym.plugins.datasets import adult
from dpgym.plugins.generators import aim, mst
from dpgym.engine.cell import PeakRss

LIMITS = {"mst": (120, None), "aim": (600, 4 * 2**30)}  # (CPU seconds, peak resident bytes)


@pytest.mark.parametrize("spec", [mst.SPEC, aim.SPEC], ids=lambda s: s.name)
def test_default_fit_and_sample_on_adult_meet_their_targets(spec, benchmark):
    split = adult.load()
    measured = {}

    def fit_and_sample():
        generator = spec.build({})
        with PeakRss() as rss:
            cpu, wall = time.process_time(), time.perf_counter()
            generator.fit(split.train.copy(), adult.schema(), Budget(1.0, 1e-5), seed=0)
            generator.sample(len(split.train), seed=1)
            measured.update(cpu=time.process_time() - cpu, wall=time.perf_counter() - wall)
        measured["peak_rss_bytes"] = rss.peak

    benchmark.pedantic(fit_and_sample, rounds=1, iterations=1)
    benchmark.extra_info.update(measured)
    print(f"\n{spec.name}: fit and sample {measured['wall']:.1f} s wall, {measured['cpu']:.1f} s CPU, "
          f"peak RSS {measured['peak_rss_bytes'] / 2**30:.2f} GiB")
    cpu_limit, memory_limit = LIMITS[spec.name]
    assert measured["cpu"] < cpu_limit
    if memory_limit is not None:
        assert measured["peak_rss_bytes"] < memory_limit
