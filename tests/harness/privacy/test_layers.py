"""Closed-form per-example gradients of the flow layers equal torch.func's, and the layers are flows."""

import pytest
import torch
from opacus.grad_sample import GradSampleModule
from torch import nn
from torch.func import functional_call, grad, vmap

from dpgym.plugins.nn.layers import LowRankLinear, LULinear, MaskedLinear, made_masks
from dpgym.privacy.clipping import OuterProductGrad, layer_rule, prefix_structure


@pytest.fixture(autouse=True)
def float64():
    """Compare in double precision so 1e-5 measures the formulas, not float32 rounding."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def _randomised(layer: nn.Module, seed: int) -> nn.Module:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=gen))
    return layer


def _layers():
    mask = made_masks(5, [7])[0]
    return {
        "masked": _randomised(MaskedLinear(5, 7, mask), 0),
        "low_rank_r1": _randomised(LowRankLinear(6, rank=1), 1),
        "low_rank_r3": _randomised(LowRankLinear(6, rank=3), 2),
        "lu": _randomised(LULinear(6, generator=torch.Generator().manual_seed(3)), 4),
    }


def _loss(out: torch.Tensor) -> torch.Tensor:
    """A nonlinear per-example loss so output gradients differ across examples and coordinates."""
    return (out.sin() * torch.arange(1, out.shape[-1] + 1, dtype=out.dtype)).sum(-1) + out.square().sum(-1)


def _reference(layer: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    params = {k: v.detach() for k, v in layer.named_parameters()}

    def one(p, xi):
        return _loss(functional_call(layer, p, (xi[None],))).sum()

    return vmap(grad(one), in_dims=(None, 0))(params, x)


@pytest.mark.parametrize("name", ["masked", "low_rank_r1", "low_rank_r3", "lu"])
def test_closed_form_grad_sampler_equals_torch_func(name):
    layer = _layers()[name]
    x = torch.randn(9, layer.weight.shape[1] if name == "masked" else 6, generator=torch.Generator().manual_seed(5))
    out = layer(x)
    backprops = torch.autograd.grad(_loss(out).sum(), out)[0]
    sampled = GradSampleModule.GRAD_SAMPLERS[type(layer)](layer, [x], backprops)
    expected = _reference(layer, x)
    for pname, p in layer.named_parameters():
        torch.testing.assert_close(sampled[p], expected[pname], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["masked", "low_rank_r1", "lu"])
def test_layer_rule_norms_equal_materialised_norms(name):
    layer = _layers()[name]
    x = torch.randn(9, layer.weight.shape[1] if name == "masked" else 6, generator=torch.Generator().manual_seed(6))
    out = layer(x)
    backprops = torch.autograd.grad(_loss(out).sum(), out)[0]
    fast = layer_rule(layer)(layer, x, backprops)
    dense = fast.materialize()
    torch.testing.assert_close(fast.unit_sq_norms(), dense.unit_sq_norms())
    torch.testing.assert_close(fast.unit_l1_norms(), dense.unit_l1_norms())
    w = torch.rand(9, dense.units, dtype=x.dtype)
    for p, g in fast.weighted_sum(w).items():
        torch.testing.assert_close(g, dense.weighted_sum(w)[p])


def test_masked_linear_is_autoregressive():
    masks = made_masks(4, [8, 8])
    net = nn.Sequential(MaskedLinear(4, 8, masks[0]), nn.Tanh(), MaskedLinear(8, 8, masks[1]), nn.Tanh(),
                        MaskedLinear(8, 4, masks[2]))
    jac = torch.autograd.functional.jacobian(lambda v: net(v[None])[0], torch.randn(4))
    assert torch.all(torch.triu(jac) == 0)  # output i depends on inputs < i only


@pytest.mark.parametrize("name", ["low_rank_r1", "low_rank_r3", "lu"])
def test_flow_layer_inverse_and_log_det_match_the_dense_matrix(name):
    layer = _layers()[name]
    x = torch.randn(5, 6)
    dense = torch.autograd.functional.jacobian(lambda v: layer(v[None])[0], torch.zeros(6))
    torch.testing.assert_close(layer.log_abs_det(), torch.linalg.slogdet(dense).logabsdet)
    torch.testing.assert_close(layer.inverse(layer(x)), x)


def test_made_masks_have_prefix_structure_and_random_masks_do_not():
    for mask in made_masks(7, [16, 9], outputs_per_feature=3):
        assert prefix_structure(mask) is not None
    assert prefix_structure(torch.tensor([[1.0, 0.0], [0.0, 1.0]])) is None


def test_masked_norms_by_cumulative_sum_equal_the_matmul():
    masks = made_masks(6, [10])
    layer = _randomised(MaskedLinear(10, 6, masks[1]), 7)
    x = torch.randn(5, 10)
    out = layer(x)
    backprops = torch.autograd.grad(_loss(out).sum(), out)[0]
    fast = layer_rule(layer)(layer, x, backprops)
    assert fast.prefix is not None
    slow = OuterProductGrad(backprops, x, layer.weight, layer.bias, mask=layer.mask)
    torch.testing.assert_close(fast.unit_sq_norms(), slow.unit_sq_norms())
    torch.testing.assert_close(fast.unit_l1_norms(), slow.unit_l1_norms())


def test_changing_the_mask_in_place_refreshes_its_prefix_structure():
    layer = MaskedLinear(3, 3, torch.tril(torch.ones(3, 3)))
    assert layer.prefix() is not None
    layer.mask.copy_(torch.eye(3))
    assert layer.prefix() is None
