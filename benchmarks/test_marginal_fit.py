"""Fit-and-sample time and peak memory of MST and AIM on Adult at (1, 1e-5), default settings, and
AIM as it ran before its numpy estimator (`mbi`'s JAX estimator, the full 1,000 iterations every
round) beside it in the same run. Targets on 2 CPU cores: MST under 2 minutes; AIM under 2 minutes
and 4 GiB peak resident memory (AIM with `mbi`'s estimator: 10 minutes).

Run: PYTHONPATH=. python -m pytest benchmarks/test_marginal_fit.py --benchmark-enable -p no:cacheprovider -s
The machine is shared, so the time assertion is on CPU seconds of this process, JAX's threads
included (what a fit costs on idle cores, an upper bound on the wall time of a 2-core fit); wall
seconds are printed beside it and recorded in the benchmark's extra info. Peak memory is the
process's resident high-water mark, which the JAX runtime and its compiled programs dominate; the
cases run in one process, so a later case's peak includes an earlier one's. AIM also prints where
its CPU time went (`AIM.phase_seconds_`) and how many ledger entries it recorded.
"""

import time

import pytest

from dpgym import Budget
from dpgym.plugins.datasets import adult
from dpgym.plugins.generators import aim, mst
from dpgym.engine.cell import PeakRss

# (spec, parameters, CPU seconds, peak resident bytes)
CASES = {
    "mst": (mst.SPEC, {}, 120, None),
    "aim": (aim.SPEC, {}, 120, 4 * 2**30),
    "aim-mbi": (aim.SPEC, {"estimator": "mbi", "round_tolerance": 0.0}, 600, 4 * 2**30),
}


@pytest.mark.parametrize("case", list(CASES))
def test_default_fit_and_sample_on_adult_meet_their_targets(case, benchmark):
    spec, params, cpu_limit, memory_limit = CASES[case]
    split = adult.load()
    measured = {}

    def fit_and_sample():
        generator = spec.build(params)
        with PeakRss() as rss:
            cpu, wall = time.process_time(), time.perf_counter()
            ledger = generator.fit(split.train.copy(), adult.schema(), Budget(1.0, 1e-5), seed=0)
            generator.sample(len(split.train), seed=1)
            measured.update(cpu=time.process_time() - cpu, wall=time.perf_counter() - wall)
        measured["peak_rss_bytes"] = rss.peak
        measured["ledger_entries"] = len(ledger.entries)
        measured.update({f"cpu_{phase}": seconds for phase, seconds in getattr(generator, "phase_seconds_", {}).items()})

    benchmark.pedantic(fit_and_sample, rounds=1, iterations=1)
    benchmark.extra_info.update(measured)
    phases = ", ".join(f"{k[4:]} {v:.1f} s" for k, v in measured.items() if k.startswith("cpu_"))
    print(f"\n{case}: fit and sample {measured['wall']:.1f} s wall, {measured['cpu']:.1f} s CPU, "
          f"peak RSS {measured['peak_rss_bytes'] / 2**30:.2f} GiB, {measured['ledger_entries']} ledger entries"
          + (f"; CPU by phase: {phases}" if phases else ""))
    assert measured["cpu"] < cpu_limit
    if memory_limit is not None:
        assert measured["peak_rss_bytes"] < memory_limit
