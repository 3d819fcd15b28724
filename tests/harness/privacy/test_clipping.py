"""Clipping strategies keep every per-example gradient within its thresholds; thresholds split C."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from dpgym.privacy.clipping import (
    Flat,
    MaterializedGrad,
    OuterProductGrad,
    PerLayer,
    PerUnit,
    Sparse,
    make_clipping,
    split_clip_norm,
    stochastic_prune,
)

TOL = 1e-5  # float32 rounding of norms


def _layer_grads(seed: int, batch: int, scale: float):
    """Two linear-type layers in factored form and one generic layer in materialised form."""
    gen = torch.Generator().manual_seed(seed)
    rnd = lambda *s: scale * torch.randn(*s, generator=gen)  # noqa: E731
    w1, b1, w2 = nn.Parameter(torch.zeros(4, 3)), nn.Parameter(torch.zeros(4)), nn.Parameter(torch.zeros(2, 4))
    mask = (torch.rand(2, 4, generator=gen) > 0.3).float()
    s, a = nn.Parameter(torch.zeros(5)), nn.Parameter(torch.zeros(5, 2))
    return [
        OuterProductGrad(rnd(batch, 4), rnd(batch, 3), w1, b1),
        OuterProductGrad(rnd(batch, 2), rnd(batch, 4), w2, None, mask=mask),
        MaterializedGrad({s: rnd(batch, 5), a: rnd(batch, 5, 2)}),
    ]


def _clipped_per_example(strategy, grads, thresholds):
    """Per-example clipped gradients, materialised: [(layer, {param: (B, *shape)})]."""
    return [(g, g.materialize().weighted(w)) for g, w in strategy.scale(grads, thresholds, torch.Generator().manual_seed(0))]


def _norms(per_param: dict) -> torch.Tensor:
    return torch.sqrt(sum(t.flatten(1).square().sum(1) for t in per_param.values()))


STRATEGIES = [Flat(), PerLayer(), PerUnit(), Sparse(0.0), Sparse(0.5), Sparse(0.9)]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), batch=st.integers(1, 9), scale=st.sampled_from([1e-4, 1.0, 1e3]),
       clip=st.floats(0.01, 10), index=st.integers(0, len(STRATEGIES) - 1))
def test_per_example_norms_never_exceed_thresholds(seed, batch, scale, clip, index):
    strategy = STRATEGIES[index]
    grads = _layer_grads(seed, batch, scale)
    thresholds = [clip * math.sqrt(f) for f in (0.5, 0.3, 0.2)]
    clipped = _clipped_per_example(strategy, grads, thresholds)
    total = torch.sqrt(sum(_norms(c).square() for _, c in clipped))
    assert torch.all(total <= clip * (1 + TOL))  # every strategy: sensitivity C
    if strategy.layerwise:
        for (_, c), threshold in zip(clipped, thresholds):
            assert torch.all(_norms(c) <= threshold * (1 + TOL))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), batch=st.integers(1, 9))
def test_per_unit_thresholds_hold_row_by_row(seed, batch):
    grads = _layer_grads(seed, batch, 1.0)
    for grad in grads:
        _, weights = PerUnit().scale_layer(grad, 0.7)
        l1 = grad.unit_l1_norms()
        unit_thresholds = 0.7 * torch.sqrt(l1 / l1.sum(1, keepdim=True))
        assert torch.allclose(unit_thresholds.square().sum(1), torch.full((batch,), 0.49), rtol=1e-5)
        assert torch.all(grad.unit_sq_norms().sqrt() * weights <= unit_thresholds * (1 + TOL) + 1e-12)


def test_clipping_leaves_small_gradients_untouched():
    grads = _layer_grads(0, 6, 1e-4)
    for strategy in [Flat(), PerLayer(), PerUnit()]:
        for g, w in strategy.scale(grads, [1.0, 1.0, 1.0]):
            assert torch.allclose(w, torch.ones_like(w))


def test_factored_and_materialised_layers_clip_identically():
    for strategy in [Flat(), PerLayer(), PerUnit()]:
        factored = _layer_grads(3, 7, 2.0)
        dense = [g.materialize() for g in factored]
        a, b = strategy.clip(factored, [0.3, 0.2, 0.1]), strategy.clip(dense, [0.3, 0.2, 0.1])
        for p in a:
            torch.testing.assert_close(a[p], b[p])


def test_stochastic_pruning_at_zero_sparsity_is_bitwise_identity():
    x = torch.randn(8, 50)
    x[0, :5] = 0.0
    assert torch.equal(stochastic_prune(x, 0.0, torch.Generator().manual_seed(1)), x)


def test_stochastic_pruning_is_unbiased_and_sparse():
    x = torch.tensor([[0.05, -0.2, 0.5, 1.0, -2.0, 3.0, 0.01, -0.6, 0.3, 4.0]]).repeat(200_000, 1)
    pruned = stochastic_prune(x, 0.5, torch.Generator().manual_seed(0))
    torch.testing.assert_close(pruned.mean(0), x[0], atol=3e-3, rtol=0)
    tau = 0.6  # 5th largest |entry|
    assert torch.all((pruned == 0) | (pruned.abs() >= tau - 1e-7))


def test_split_gives_sum_of_squares_c_squared_proportional_to_parameter_count():
    a, b = nn.Sequential(nn.Linear(10, 20), nn.Linear(20, 1)), nn.Linear(3, 3)
    split = split_clip_norm([a, b], 2.0)
    assert sum(c * c for _, c in split) == pytest.approx(4.0)
    counts = [sum(p.numel() for p in m.parameters(recurse=False)) for m, _ in split]
    for (_, c), n in zip(split, counts):
        assert c * c == pytest.approx(4.0 * n / sum(counts))


def test_split_across_networks_then_layers_with_given_shares():
    a, b = nn.Sequential(nn.Linear(10, 20), nn.Linear(20, 1)), nn.Linear(3, 3)
    split = split_clip_norm([a, b], 1.0, network_shares=[0.25, 0.75])
    assert sum(c * c for _, c in split[:2]) == pytest.approx(0.25)
    assert split[2][1] ** 2 == pytest.approx(0.75)


def test_strategies_are_named_as_in_the_ledger():
    for name in ["flat", "per_layer", "per_unit", "sparse(0.5)"]:
        assert make_clipping(name).describe() == name


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.describe())
def test_an_example_with_a_non_finite_gradient_adds_what_a_zero_gradient_adds(strategy):
    """The sum is computed plainly and, only if it is not finite, again with such examples zeroed
    and the pruning draws replayed: the result must equal zeroing them from the start."""
    thresholds = [math.sqrt(f) for f in (0.5, 0.3, 0.2)]
    poisoned, zeroed = _layer_grads(3, 6, 1.0), _layer_grads(3, 6, 1.0)
    poisoned[0].g[2, 1] = math.inf
    poisoned[2].grads[next(iter(poisoned[2].grads))][4, 0] = math.nan
    zeroed[0].g[2], zeroed[0].a[2] = 0.0, 0.0
    for g in zeroed[2].grads.values():
        g[4] = 0.0
    got = strategy.clip(poisoned, thresholds, torch.Generator().manual_seed(7))
    want = strategy.clip(zeroed, thresholds, torch.Generator().manual_seed(7))
    assert len(got) == len(want) == 5  # the five parameters, fresh objects in each call: compared in order
    for a, b in zip(got.values(), want.values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
