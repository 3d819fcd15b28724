"""Time to release on Adult (paper preprocessing): ExpM+NF (flow fit + one draw) against DP-SGD
(noise calibration by PRV + training), at ε = 1e-3 and 1, with DP-SGD's calibration timed alone so
its training time can be read off, as in the paper's Table 5 (docs/methods/expm-nf.md#evaluation: ExpM+NF training
slower than DP-SGD training alone, faster than training plus computing the noise). Also checks that
the NF loss is one batched product, not a loop over samples.

Run: PYTHONPATH=. python -m pytest benchmarks/test_learners.py --benchmark-enable -p no:cacheprovider -s
"""

import math
import os
import time

import pytest
import torch

from dpgym import Budget
from dpgym.privacy import accountants
from dpgym.privacy.accountants import PRVAccountant, calibrate_noise_multiplier
from dpgym.plugins.datasets import adult_expm
from dpgym.plugins.learners.dpsgd_lr.model import DPSGDLR
from dpgym.plugins.learners.expm_nf_lr.model import ExpMNFLR
from dpgym.plugins.learners.logistic import summed_l2

EPSILONS = (1e-3, 1.0)
DELTA = 1e-5
TIMES: dict[tuple[str, float], float] = {}


@pytest.fixture(scope="module")
def adult():
    yield adult_expm.load(), adult_expm.schema()
    for eps in EPSILONS:
        if all((k, eps) in TIMES for k in ("expm_nf_lr", "dpsgd_lr", "calibration")):
            expm, dpsgd, calibration = (TIMES[k, eps] for k in ("expm_nf_lr", "dpsgd_lr", "calibration"))
            print(f"\nε = {eps:g} (load {os.getloadavg()[0]:.2f}): ExpM+NF {expm:.1f} s; DP-SGD {dpsgd:.1f} s = "
                  f"calibration {calibration:.1f} s + training {dpsgd - calibration:.1f} s; ExpM+NF ÷ DP-SGD "
                  f"{expm / dpsgd:.2f} (÷ its training alone {expm / max(dpsgd - calibration, 1e-9):.2f})")


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("name, make", [("expm_nf_lr", lambda: ExpMNFLR(mode="paper")),
                                        ("dpsgd_lr", lambda: DPSGDLR())])
def test_time_to_release(benchmark, adult, name, make, epsilon):
    split, schema = adult

    def release():
        learner = make()
        learner.fit(split.train, schema, Budget(epsilon, DELTA), seed=0)
        return learner.release()

    start = time.perf_counter()
    benchmark.pedantic(release, rounds=1, iterations=1)
    TIMES[name, epsilon] = time.perf_counter() - start


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_dpsgd_noise_calibration(benchmark, adult, epsilon):
    """The share of DP-SGD's release spent finding σ, with the settings `dpsgd_lr` uses."""
    split, _ = adult
    learner, n = DPSGDLR(), len(split.train)
    steps = max(1, math.ceil(learner.epochs * n / learner.batch_size))
    accountants._CALIBRATED.clear()  # the fit above left this calibration in the per-process memo
    start = time.perf_counter()
    benchmark.pedantic(lambda: calibrate_noise_multiplier(PRVAccountant.for_target(epsilon), epsilon, DELTA,
                                                          learner.batch_size / n, steps), rounds=1, iterations=1)
    TIMES["calibration", epsilon] = time.perf_counter() - start


def test_nf_loss_is_one_batched_product(benchmark):
    x, y = torch.rand(4096, 102), (torch.rand(4096) < 0.25).float()
    thetas = torch.randn(64, 103)
    batched = benchmark(lambda: summed_l2(x, y, thetas))
    start = time.perf_counter()
    looped = torch.stack([summed_l2(x, y, t[None])[0] for t in thetas])
    loop_seconds = time.perf_counter() - start
    assert torch.allclose(batched, looped, rtol=1e-4)
    assert benchmark.stats.stats.median < loop_seconds
