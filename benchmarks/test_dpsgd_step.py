"""Time per DP-SGD step against the same non-private step (batch 256, Adult width), for the fast
in-hook engine and for Opacus's GradSampleModule engine; and PRV noise calibration for 10,000 steps.

Run: PYTHONPATH=. python -m pytest benchmarks --benchmark-enable -p no:cacheprovider
The terminal summary prints the DP / non-private ratios.
"""

import math
import statistics
import time

import pytest
import torch
from torch import nn

from dpgym.privacy.accountants import _CALIBRATED, Phase, PRVAccountant, calibrate, calibrate_noise_multiplier
from dpgym.privacy.budget import Budget
from dpgym.privacy.dpsgd import DPSGD
from dpgym.plugins.nn.layers import LowRankLinear, MaskedLinear, made_masks

ADULT_ROWS, ADULT_WIDTH, BATCH = 32561, 106, 256


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(ADULT_WIDTH, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))


def made_block() -> nn.Module:
    """A DP-HFlow-style block: MADE conditioner (masked 106→256→256→106) then a rank-1 linear flow."""
    masks = made_masks(ADULT_WIDTH, [256, 256])
    return nn.Sequential(MaskedLinear(ADULT_WIDTH, 256, masks[0]), nn.ReLU(), MaskedLinear(256, 256, masks[1]),
                         nn.ReLU(), MaskedLinear(256, ADULT_WIDTH, masks[2]), LowRankLinear(ADULT_WIDTH))


def per_example_loss(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x).square().mean(dim=1)


MODELS = {"mlp": mlp, "made_block": made_block}
VARIANTS = {  # name → (engine, clipping)
    "fast_per_layer": ("fast", "per_layer"),
    "fast_per_unit": ("fast", "per_unit"),
    "fast_flat": ("fast", "flat"),
    "opacus_per_layer": ("opacus", "per_layer"),
    "opacus_flat": ("opacus", "flat"),
}


@pytest.fixture(autouse=True)
def threads():
    torch.set_num_threads(1)  # stable ratios on a shared 2-core machine


def _batch() -> torch.Tensor:
    return torch.randn(BATCH, ADULT_WIDTH, generator=torch.Generator().manual_seed(0))


def _non_private_step(model_name: str, x: torch.Tensor):
    torch.manual_seed(0)
    model = MODELS[model_name]()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        optimizer.zero_grad()
        per_example_loss(model, x).mean().backward()
        optimizer.step()
    return step


def _dp_step(model_name: str, variant: str, x: torch.Tensor):
    """One full DP step on a fixed batch of 256: backward, clipping, noise for every coordinate, Adam.
    ε = ∞ skips only the calibration; noise is still drawn (σ = 0). The phase samples all of `BATCH`
    rows (q = 1), so every step's loss is one entry per sampled row, as the engine requires."""
    torch.manual_seed(0)
    engine, clipping = VARIANTS[variant]
    model = MODELS[model_name]()
    dp = DPSGD(Budget(math.inf, 1e-5), seed=0)
    phase = dp.add_phase("bench", model, torch.optim.Adam(model.parameters(), lr=1e-3), n_rows=BATCH,
                         batch_size=BATCH, steps=10**7, clipping=clipping, engine=engine)
    batches = phase.batches()
    next(batches)  # attaches the engine's hooks
    return (lambda: phase.step(per_example_loss(model, x))), batches


def _paired_ratio(dp_step, plain_step, rounds: int, iterations: int) -> float:
    """Median over rounds of (DP time / non-private time), the two timed back to back so load
    changes on a shared machine hit both (PERFORMANCE.md: quote ratios measured side by side)."""
    ratios = []
    for _ in range(rounds):
        times = []
        for step in (dp_step, plain_step):
            start = time.perf_counter()
            for _ in range(iterations):
                step()
            times.append(time.perf_counter() - start)
        ratios.append(times[0] / times[1])
    return statistics.median(ratios)


@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_non_private_step(benchmark, record, model_name):
    benchmark.pedantic(_non_private_step(model_name, _batch()), rounds=60, iterations=5, warmup_rounds=5)
    record(model_name, "non_private", benchmark)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_dp_step(benchmark, record, model_name, variant):
    x = _batch()
    dp_step, batches = _dp_step(model_name, variant, x)
    slow = VARIANTS[variant][0] == "opacus"
    benchmark.pedantic(dp_step, rounds=10 if slow else 60, iterations=1 if slow else 5, warmup_rounds=2)
    benchmark.extra_info["paired_ratio"] = _paired_ratio(dp_step, _non_private_step(model_name, x),
                                                         rounds=5 if slow else 40, iterations=1 if slow else 3)
    record(model_name, variant, benchmark)
    batches.close()


def test_prv_calibration_10000_steps(benchmark, record):
    """Target: under 2 s. Each round calibrates afresh (calibrations are otherwise memoised)."""
    sigma = benchmark.pedantic(
        lambda: calibrate_noise_multiplier(PRVAccountant.for_target(1.0), 1.0, 1e-5, BATCH / ADULT_ROWS, 10_000),
        setup=_CALIBRATED.clear, rounds=3, iterations=1)
    record("calibration", "prv_10000_steps", benchmark)
    assert sigma > 0


@pytest.mark.parametrize("steps", [(4_000, 6_000), (10_000, 15_000)], ids=["10000-steps", "25000-steps"])
def test_prv_calibration_two_phases_and_a_release(benchmark, record, steps):
    """Two phases at DP-auto-GAN's noise ratio (autoencoder, critic) with a Gaussian release composed
    beside them, calibrated jointly: 10,000 steps in all (target: under 2 s), and the paper's
    10,000 + 15,000."""
    phases = [Phase(64 / ADULT_ROWS, 1.0, steps[0]), Phase(128 / ADULT_ROWS, 7.5 / 2.5, steps[1])]
    calibrated = benchmark.pedantic(
        lambda: calibrate(PRVAccountant.for_target(1.0), 1.0, 1e-5, phases, fixed=[Phase(1.0, 100.0, 1)]),
        setup=_CALIBRATED.clear, rounds=3, iterations=1)
    record("calibration", f"prv_two_phases_and_a_release_{sum(steps)}_steps", benchmark)
    assert calibrated[1].noise_multiplier == pytest.approx(3 * calibrated[0].noise_multiplier)
