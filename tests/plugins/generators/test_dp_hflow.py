"""DP-HFlow: the flow is exactly invertible with exact log-dets, its custom per-example gradients
(log-det columns, shared MADE) match independent computations, and the generator honours the
harness contract (ledger, schema-valid samples, determinism, non-private mode)."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from dpgym import Budget, Column, ColumnKind, Schema
from dpgym.privacy.clipping import Flat, PerLayer, PerUnit, Sparse, split_clip_norm
from dpgym.privacy.dpsgd import _HookEngine, _OpacusEngine
from dpgym.specs import SpecError
from dpgym.plugins.generators.dp_hflow import model as dp_hflow
from dpgym.plugins.generators.dp_hflow import SPEC
from dpgym.plugins.generators.dp_hflow.model import HFlow, Layout, VariationalDequantizer
from dpgym.plugins.nn.flow_linear import LowRankFlowLinear, LUFlowLinear
from dpgym.plugins.nn.layers import made_masks
from dpgym.plugins.nn.shared import SharedMaskedLinear, SharedOuterProductGrad
from dpgym.plugins.nn.spline import params_per_dim, rq_spline


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Small kernels: one thread is several times faster than two when other jobs share the cores."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _perturbed(module: nn.Module, scale: float, seed: int = 0) -> nn.Module:
    """Random parameters, so checks do not pass trivially at the identity initialisation."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return module


def _flow(linear="low_rank", spline_first=True, d=4, seed=0):
    torch.manual_seed(seed)
    flow = HFlow(d, blocks=3, bins=5, tail_bound=3.0, hidden=[16], embedding_dim=3, linear=linear, rank=2,
                 spline_first=spline_first).double()
    return _perturbed(flow, 0.3, seed)


# ---------------------------------------------------------------------------------------------
# Spline and flow
# ---------------------------------------------------------------------------------------------

def test_spline_with_zero_parameters_is_the_identity():
    x = torch.linspace(-4, 4, 50, dtype=torch.float64)
    y, log_det = rq_spline(x, torch.zeros(50, params_per_dim(8), dtype=torch.float64), tail_bound=3.0)
    torch.testing.assert_close(y, x)
    torch.testing.assert_close(log_det, torch.zeros_like(x))


def test_spline_inverts_and_its_log_derivative_matches_autograd():
    gen = torch.Generator().manual_seed(0)
    x = (6 * torch.rand(200, generator=gen, dtype=torch.float64) - 3).requires_grad_()
    params = 2 * torch.randn(200, params_per_dim(8), generator=gen, dtype=torch.float64)
    y, log_det = rq_spline(x, params, tail_bound=2.5)  # some x fall in the identity tails
    (dy_dx,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(log_det, dy_dx.log())
    back, inv_log_det = rq_spline(y.detach(), params, tail_bound=2.5, inverse=True)
    torch.testing.assert_close(back, x.detach(), atol=1e-9, rtol=0)
    torch.testing.assert_close(inv_log_det, -log_det.detach())


@pytest.mark.parametrize("linear", ["low_rank", "lu"])
@pytest.mark.parametrize("spline_first", [True, False])
def test_flow_round_trip_error_is_below_1e_4(linear, spline_first):
    flow = _flow(linear, spline_first)
    x = 1.5 * torch.randn(300, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.no_grad():
        z, _ = flow(x)
    assert (flow.inverse(z) - x).abs().max() < 1e-4
    assert not torch.allclose(z, x, atol=1e-2)  # the flow is far from the identity


@pytest.mark.parametrize("linear", ["low_rank", "lu"])
def test_flow_log_det_equals_autograd_jacobian_log_det(linear):
    flow = _flow(linear)
    xs = torch.randn(5, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    _, log_det = flow(xs)
    for x, ld in zip(xs, log_det):
        jac = torch.autograd.functional.jacobian(lambda v: flow(v[None])[0][0], x)
        torch.testing.assert_close(ld, torch.linalg.slogdet(jac).logabsdet)


def test_made_outputs_are_autoregressive_in_every_block():
    flow = _flow(d=5)
    x = torch.randn(1, 5, dtype=torch.float64, requires_grad=True)
    for block in range(3):
        out = flow.made(x, block)
        for i in range(5):
            (g,) = torch.autograd.grad(out[0, i].sum(), x, retain_graph=True)
            assert torch.all(g[0, i:] == 0), f"block {block}: output {i} sees inputs ≥ {i}"
    assert not torch.allclose(flow.made(x, 0), flow.made(x, 1))  # the block embedding matters


def test_made_single_feature_outputs_equal_the_full_pass():
    """Sampling reads one feature's spline parameters per pass (`feature_outputs`); they must be the
    full pass's, in every block, with the zero-initialised output layer made non-trivial."""
    flow = _flow(d=5)
    with torch.no_grad():
        for layer in (flow.made.masked[-1], flow.made.context[-1]):
            layer.weight.normal_(generator=torch.Generator().manual_seed(4))
        flow.made.masked[-1].bias.normal_(generator=torch.Generator().manual_seed(5))
    x = torch.randn(7, 5, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    for block in range(3):
        full = flow.made(x, block)
        for i in range(5):
            torch.testing.assert_close(flow.made.feature_outputs(x, block, i), full[:, i])


# ---------------------------------------------------------------------------------------------
# Per-example gradients of the custom layers
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [LowRankFlowLinear, LUFlowLinear])
def test_log_det_gradients_match_autograd(cls):
    layer = _perturbed(cls(5) if cls is LUFlowLinear else cls(5, rank=2), 0.4).double()
    expected = torch.autograd.grad(layer.log_abs_det(), list(layer.parameters()), allow_unused=True)
    got = layer.log_abs_det_grads()
    for p, e in zip(layer.parameters(), expected):
        torch.testing.assert_close(got[p], torch.zeros_like(p) if e is None else e)


def _nll(flow, x):
    return -flow.log_prob(x)


def _reference_clipped_sum(flow, x, thresholds, mode):
    """Independent per-example gradients (torch.func, log-det included), clipped explicitly."""
    params = {k: v.detach() for k, v in flow.named_parameters()}

    def nll(p, xi):
        z, log_det = functional_call(flow, p, (xi[None],))
        return (0.5 * z.square().sum() - log_det.sum())  # −log N(z) up to a constant − log|det|

    per = vmap(grad(nll), in_dims=(None, 0))(params, x)
    named = dict(flow.named_parameters())
    layer_of = {id(p): m for m, _ in thresholds for p in m.parameters(recurse=False)}
    sq = {}
    for k, p in named.items():
        m = layer_of[id(p)]
        sq[m] = sq.get(m, 0) + per[k].flatten(1).square().sum(1)
    if mode == "flat":
        c = math.sqrt(sum(t * t for _, t in thresholds))
        total = torch.sqrt(sum(sq.values()))
        factor = {m: (c / (total + 1e-6)).clamp(max=1) for m in sq}
    else:
        factor = {m: (t / (sq[m].sqrt() + 1e-6)).clamp(max=1) for m, t in thresholds}
    return {named[k]: (per[k] * factor[layer_of[id(named[k])]].view(-1, *[1] * (per[k].dim() - 1))).sum(0)
            for k in named}


def _engine_sum(engine_cls, flow, x, strategy, thresholds, seed=0):
    generator = torch.Generator().manual_seed(seed)
    networks = [flow.made, flow.linears]
    engine = (_HookEngine(networks, thresholds, strategy, generator) if engine_cls is _HookEngine
              else _OpacusEngine(networks, thresholds, strategy, generator))
    engine.attach()
    _nll(flow, x).sum().backward()
    summed = engine.collect()
    engine.detach()
    return summed


def _flow_and_thresholds(linear="low_rank"):
    flow = _flow(linear).float()
    x = torch.randn(24, 4, generator=torch.Generator().manual_seed(3))
    return flow, x, split_clip_norm([flow.made, flow.linears], 2.0)


@pytest.mark.parametrize("linear", ["low_rank", "lu"])
@pytest.mark.parametrize("strategy, mode", [(Flat(), "flat"), (PerLayer(), "per_layer")])
def test_fast_clipped_sum_equals_torch_func_per_example_gradients(linear, strategy, mode):
    """Shared MADE (3 uses per row) and log-det columns: the in-backward clipped sum equals
    clipping explicit per-example gradients of the whole negative log-likelihood."""
    flow, x, thresholds = _flow_and_thresholds(linear)
    got = _engine_sum(_HookEngine, flow, x, strategy, thresholds)
    want = _reference_clipped_sum(flow, x, thresholds, mode)
    assert set(got) == set(flow.parameters())
    for p in got:
        torch.testing.assert_close(got[p], want[p], atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("strategy", [Flat(), PerLayer(), PerUnit()])
def test_fast_engine_equals_opacus_engine_on_the_flow(strategy):
    flow, x, thresholds = _flow_and_thresholds()
    fast = _engine_sum(_HookEngine, flow, x, strategy, thresholds)
    slow = _engine_sum(_OpacusEngine, flow, x, strategy, thresholds)
    for p in flow.parameters():
        torch.testing.assert_close(fast[p], slow[p], atol=2e-5, rtol=1e-4)


def test_sparse_zero_gives_the_same_gradients_as_per_layer():
    flow, x, thresholds = _flow_and_thresholds()
    per_layer = _engine_sum(_HookEngine, flow, x, PerLayer(), thresholds, seed=5)
    sparse = _engine_sum(_HookEngine, flow, x, Sparse(0.0), thresholds, seed=5)
    assert all(torch.equal(per_layer[p], sparse[p]) for p in flow.parameters())


def test_shared_layer_gradient_factors_match_materialised_gradients():
    torch.manual_seed(0)
    mask = made_masks(6, [10])[0]
    layer = SharedMaskedLinear(6, 10, mask)
    gen = torch.Generator().manual_seed(1)
    uses = [(torch.randn(7, 10, generator=gen), torch.randn(7, 6, generator=gen)) for _ in range(3)]
    shared = SharedOuterProductGrad([uses[0][0]], [uses[0][1]], layer.weight, layer.bias, layer.mask)
    for g, a in uses[1:]:
        shared = shared + SharedOuterProductGrad([g], [a], layer.weight, layer.bias, layer.mask)
    weight = sum(torch.einsum("ni,nj->nij", g, a) for g, a in uses) * mask
    bias = sum(g for g, _ in uses)
    rows = torch.cat([weight, bias[:, :, None]], dim=2)
    torch.testing.assert_close(shared.unit_sq_norms(), rows.square().sum(2))
    torch.testing.assert_close(shared.unit_l1_norms(), rows.abs().sum(2))
    w = torch.rand(7, 10, generator=gen)
    summed = shared.weighted_sum(w)
    torch.testing.assert_close(summed[layer.weight], (weight * w[:, :, None]).sum(0))
    torch.testing.assert_close(summed[layer.bias], (bias * w).sum(0))


# ---------------------------------------------------------------------------------------------
# Dequantization and preprocessing
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("faithful", [False, True])
def test_variational_dequantizer_density_is_the_change_of_variables(faithful):
    deq = _perturbed(VariationalDequantizer([3, 4, 2], components=3, hidden=8, feature_dim=4, faithful=faithful), 0.5).double()
    codes = torch.tensor([[0, 3, 1], [2, 1, 0]], dtype=torch.float64)
    eps = torch.randn(2, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    u, log_q = deq(codes, eps)
    assert torch.all((u > 0) & (u < 1))
    for n in range(2):
        jac = torch.autograd.functional.jacobian(lambda e: deq(codes[n:n + 1], e[None])[0][0], eps[n])
        log_normal = -0.5 * (eps[n].square().sum() + 3 * math.log(2 * math.pi))
        torch.testing.assert_close(log_q[n], log_normal - torch.linalg.slogdet(jac).logabsdet)


def _schema():
    return Schema(name="toy", target="label", columns=(
        Column("age", ColumnKind.INTEGER, min=0, max=20, heavy_tailed=True),
        Column("score", ColumnKind.CONTINUOUS, min=-1.0, max=1.0),
        Column("colour", ColumnKind.CATEGORICAL, categories=("red", "green", "blue")),
        Column("size", ColumnKind.ORDINAL, categories=("S", "M", "L")),
        Column("label", ColumnKind.BINARY, categories=("no", "yes")),
    ))


def _frame(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    colour = rng.integers(0, 3, n)
    score = np.clip(0.5 * (colour - 1) + 0.2 * rng.normal(size=n), -1, 1)
    label = (score + 0.3 * rng.normal(size=n) > 0).astype(int)
    schema = _schema()
    return pd.DataFrame({
        "age": rng.integers(0, 21, n),
        "score": score,
        "colour": pd.Categorical.from_codes(colour, dtype=schema["colour"].dtype),
        "size": pd.Categorical.from_codes(rng.integers(0, 3, n), dtype=schema["size"].dtype),
        "label": pd.Categorical.from_codes(label, dtype=schema["label"].dtype),
    })


@pytest.mark.parametrize("log_heavy_tails", [False, True])
def test_layout_uses_public_bounds_only_and_decodes_dequantized_rows_exactly(log_heavy_tails):
    schema, frame = _schema(), _frame()
    layout = Layout(schema, tail_bound=3.0, dequantize_integers=True, log_heavy_tails=log_heavy_tails)
    assert layout.logged == ([0] if log_heavy_tails else [])
    raw = layout.raw(frame)
    y, _ = layout.to_flow(raw + 0.5 * torch.tensor([float(d.discrete) for d in layout.dims], dtype=torch.float64))
    assert y.min() >= -2.5 and y.max() <= 2.5
    pd.testing.assert_frame_equal(layout.decode(y), frame)
    # nothing about the rows: the same schema gives the same map for a different table
    other = Layout(schema, tail_bound=3.0, dequantize_integers=True, log_heavy_tails=log_heavy_tails)
    torch.testing.assert_close(other.to_flow(raw), layout.to_flow(raw))


def test_a_stepped_column_is_dequantized_on_its_grid_and_sampled_on_it():
    """A continuous column with a public step (KDD's rates, to two decimals) is discrete: each grid
    value owns one unit cell, so a point mass at a bound becomes a box the flow can fit, and decoding
    returns grid values exactly."""
    schema = Schema(name="rates", columns=(Column("rate", ColumnKind.CONTINUOUS, min=0.0, max=1.0, step=0.01),
                                           Column("plain", ColumnKind.CONTINUOUS, min=0.0, max=1.0)))
    frame = pd.DataFrame({"rate": [0.0, 0.07, 0.5, 1.0], "plain": [0.0, 0.07, 0.5, 1.0]})
    layout = Layout(schema, tail_bound=3.0, dequantize_integers=True, log_heavy_tails=True)
    assert layout.discrete == [0] and [d.size for d in layout.dims] == [101, 1.0]
    raw = layout.raw(frame)
    torch.testing.assert_close(raw[:, 0], torch.tensor([0.0, 7.0, 50.0, 100.0], dtype=torch.float64))
    for u in (0.0, 0.5, 0.999):  # anywhere in a value's cell decodes to that value
        decoded = layout.decode(layout.to_flow(raw + torch.tensor([u, 0.0], dtype=torch.float64))[0])
        np.testing.assert_allclose(decoded["rate"], frame["rate"], rtol=0, atol=1e-12)
    y = torch.linspace(-3, 3, 1001, dtype=torch.float64)[:, None].repeat(1, 2)
    grid = layout.decode(y)["rate"].to_numpy() / 0.01
    np.testing.assert_allclose(grid, grid.round(), atol=1e-9)
    # without dequantization the column stays continuous
    assert Layout(schema, tail_bound=3.0, dequantize_integers=False, log_heavy_tails=True).discrete == []


def test_a_missing_value_has_a_flag_or_a_last_code_and_decodes_back_to_missing():
    """Nullable numbers get a missing flag after every column (a table without gaps keeps its layout),
    drawn uniformly over the public range where missing; a nullable category a last code."""
    schema = Schema(name="gaps", columns=(Column("age", ColumnKind.INTEGER, min=0, max=9, nullable=True),
                                          Column("gain", ColumnKind.CONTINUOUS, min=0.0, max=999.0, heavy_tailed=True, nullable=True),
                                          Column("colour", ColumnKind.CATEGORICAL, categories=("red", "blue"), nullable=True)))
    frame = schema.conform(pd.DataFrame({"age": [3, None, 9, None], "gain": [None, 10.0, 0.0, 999.0],
                                         "colour": ["red", None, "blue", None]}))
    layout = Layout(schema, tail_bound=3.0, dequantize_integers=True, log_heavy_tails=True)
    assert [(d.column.name, d.flag) for d in layout.dims] == [("age", False), ("gain", False), ("colour", False),
                                                              ("age", True), ("gain", True)]
    assert layout.categorical == [2, 3, 4] and layout.categories == [3, 2, 2]
    raw = layout.raw(frame)
    torch.testing.assert_close(raw[:, 2:], torch.tensor([[0, 0, 1], [2, 1, 0], [1, 0, 0], [2, 1, 0]], dtype=torch.float64))
    filled, log_q = layout.fill_missing(raw, torch.Generator().manual_seed(0))
    absent = raw[:, :2].isnan()
    assert torch.equal(filled[:, :2].isnan(), torch.zeros_like(absent))
    assert ((filled[:, 0] >= 0) & (filled[:, 0] < 10)).all() and ((filled[:, 1] >= 0) & (filled[:, 1] <= 999)).all()
    torch.testing.assert_close(filled[:, :2][~absent], raw[:, :2][~absent])
    torch.testing.assert_close(filled[:, 2:], raw[:, 2:])
    torch.testing.assert_close(log_q, -(absent * torch.tensor([math.log(10.0), math.log(999.0)], dtype=torch.float64)).sum(dim=1))
    discrete = torch.tensor([float(d.discrete) for d in layout.dims], dtype=torch.float64)
    y, _ = layout.to_flow(layout.fill_missing(raw + 0.5 * discrete, torch.Generator().manual_seed(1))[0])
    pd.testing.assert_frame_equal(layout.decode(y), frame)


def test_log_scaled_column_spreads_small_values_and_its_log_det_matches_autograd():
    schema = Schema(name="money", columns=(Column("gain", ColumnKind.CONTINUOUS, min=0.0, max=99999.0, heavy_tailed=True),
                                           Column("rate", ColumnKind.CONTINUOUS, min=0.0, max=10.0)))
    layout = Layout(schema, tail_bound=3.0, dequantize_integers=True, log_heavy_tails=True)
    values = torch.tensor([[0.0, 1.0], [100.0, 5.0], [5000.0, 9.0]], dtype=torch.float64)
    y, log_det = layout.to_flow(values)
    assert y[1, 0] - y[0, 0] > 1.0  # linear scaling would move 100 of 99,999 by 0.005
    for n in range(len(values)):
        jac = torch.autograd.functional.jacobian(lambda v: layout.to_flow(v[None])[0][0], values[n])
        torch.testing.assert_close(log_det[n], torch.linalg.slogdet(jac).logabsdet)


# ---------------------------------------------------------------------------------------------
# The generator
# ---------------------------------------------------------------------------------------------

SMALL = {"hidden": [16], "bins": 4, "epochs": 1.0, "batch_size": 32, "embedding_dim": 2,
         "dequantizer_hidden": 8, "dequantizer_features": 4}


@pytest.fixture(scope="module")
def private_fit():
    gen = SPEC.build(SMALL)
    ledger = gen.fit(_frame(), _schema(), Budget(1.0, 1e-5), seed=3)
    return gen, ledger


@pytest.mark.slow
def test_private_fit_returns_a_formal_ledger_within_budget(private_fit):
    gen, ledger = private_fit
    assert ledger.guarantee == "formal" and not ledger.is_non_private
    (entry,) = ledger.entries
    assert entry.type == "subsampled_gaussian"
    assert entry.details["clipping"] == "per_unit" and entry.details["sampling"] == "poisson"
    assert entry.event.noise_multiplier > 0.5
    assert entry.epsilon <= 1.0 and entry.delta == 1e-5
    assert gen.dequantization_ == "uniform"  # A14 default when private


def test_samples_are_valid_rows_of_the_schema(private_fit):
    gen, _ = private_fit
    synthetic = gen.sample(500, seed=0)
    _schema().validate(synthetic, "synthetic")
    assert list(synthetic.columns) == _schema().names and len(synthetic) == 500


def test_rows_the_flow_cannot_invert_are_redrawn_and_reported(private_fit, monkeypatch):
    gen, _ = private_fit
    inverse, calls = gen.flow_.inverse, []

    def first_rows_break_once(z):
        calls.append(len(z))
        y = inverse(z)
        if len(calls) == 1:
            y[:3, 0], y[3, 1] = float("nan"), float("inf")
        return y

    monkeypatch.setattr(gen.flow_, "inverse", first_rows_break_once)
    with pytest.warns(RuntimeWarning, match="4 of 500 sampled rows were non-finite"):
        synthetic = gen.sample(500, seed=0)
    assert calls == [500, 4] and len(synthetic) == 500
    _schema().validate(synthetic, "synthetic")

    def one_row_always_breaks(z):
        y = inverse(z)
        y[0, 0] = float("nan")
        return y

    monkeypatch.setattr(gen.flow_, "inverse", one_row_always_breaks)
    with pytest.raises(RuntimeError, match="non-finite for 1 of 500 rows after 20 rounds"):
        gen.sample(500, seed=0)
    monkeypatch.setattr(gen.flow_, "inverse", lambda z: torch.full_like(z, float("nan")))
    with pytest.raises(RuntimeError, match="non-finite for all 500 rows drawn"):
        gen.sample(500, seed=0)


@pytest.mark.slow
@pytest.mark.parametrize("epsilon, error, message", [
    (1.0, FloatingPointError, r"phase 'dp_hflow', step 1 of .*are no longer finite"),  # the DP engine's check
    (math.inf, RuntimeError, r"training diverged, parameters .*made"),  # the check after fitting
])
def test_a_fit_whose_parameters_diverge_fails_with_their_names(monkeypatch, epsilon, error, message):
    gen = SPEC.build(SMALL)
    monkeypatch.setattr(dp_hflow, "AdaBelief", lambda params, **kwargs: torch.optim.SGD(params, lr=math.inf))
    with pytest.raises(error, match=message):
        gen.fit(_frame(200), _schema(), Budget(epsilon, 1e-5), seed=0)


def test_private_steps_stop_at_max_steps_and_non_private_ones_do_not():
    params = {**SMALL, "epochs": 2.0, "max_steps": 5}  # 2 epochs of 2,000 rows at batch 32: 125 steps
    (entry,) = SPEC.build(params).fit(_frame(), _schema(), Budget(1.0, 1e-5), seed=0).entries
    assert entry.event.steps == 5
    (entry,) = SPEC.build({**params, "epochs": 0.1}).fit(_frame(), _schema(), Budget(math.inf), seed=0).entries
    assert "(6 AdaBelief steps)" in entry.description


def test_log_prob_is_finite_per_row(private_fit):
    gen, _ = private_fit
    ll = gen.log_prob(_frame(50, seed=9))
    assert ll.shape == (50,) and np.isfinite(ll).all()
    # the integer column is dequantized (a probability mass), so the density is over `score` only
    assert gen.density_columns == (["score"] if gen.dequantize_integers else ["age", "score"])


@pytest.mark.slow
def test_a_table_with_gaps_is_fitted_scored_and_drawn_with_its_missing_shares():
    """Before, dp_hflow refused any nullable column. Now it draws missing values at about the training
    share and scores rows with gaps by a finite likelihood bound."""
    schema, frame = _schema(), _frame(1000)
    schema = Schema(name="gaps", target=schema.target, columns=tuple(
        dataclasses.replace(c, nullable=c.name in ("age", "score", "colour")) for c in schema.columns))
    rng = np.random.default_rng(1)
    for column, share in (("age", 0.3), ("score", 0.2), ("colour", 0.1)):
        frame.loc[rng.random(len(frame)) < share, column] = None
    frame = schema.conform(frame)
    gen = SPEC.build({**SMALL, "epochs": 6.0})
    gen.fit(frame, schema, Budget(math.inf), seed=0)
    drawn = schema.conform(gen.sample(4000, seed=1))
    for column in ("age", "score", "colour"):
        assert abs(drawn[column].isna().mean() - frame[column].isna().mean()) < 0.05, column
    assert drawn["label"].notna().all()
    ll = gen.log_prob(frame.iloc[:200])
    assert np.isfinite(ll).all()


@pytest.mark.slow
def test_same_seed_gives_the_same_synthetic_rows():
    def run(seed):
        gen = SPEC.build({**SMALL, "epochs": 0.5})
        gen.fit(_frame(), _schema(), Budget(1.0, 1e-5), seed=seed)
        return gen.sample(200, seed=1)
    a, b, c = run(0), run(0), run(1)
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c)


@pytest.mark.slow
def test_non_private_mode_learns_the_dependence_and_says_so():
    gen = SPEC.build({**SMALL, "epochs": 3.0})
    ledger = gen.fit(_frame(), _schema(), Budget(math.inf), seed=0)
    assert ledger.is_non_private and ledger.guarantee == "formal"
    assert gen.dequantization_ == "variational"  # A14 default when non-private
    synthetic = gen.sample(2000, seed=0)
    # score depends on colour in the data (means −0.5, 0, 0.5 for red, green, blue)
    means = synthetic.groupby("colour", observed=True)["score"].mean()
    assert means["red"] < means["green"] < means["blue"]


def test_unknown_or_invalid_hyper_parameters_are_refused():
    with pytest.raises(SpecError, match="unknown"):
        SPEC.build({"layers": 3})
    with pytest.raises(ValueError, match="dequantization"):
        SPEC.build({"dequantization": "gaussian"})
    with pytest.raises(ValueError, match="linear"):
        SPEC.build({"linear": "dense"})
