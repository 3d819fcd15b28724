"""The DP-SGD trainer: clipped sums match an independent per-example computation, noise and
sampling follow the mechanism the accountant assumes, runs are deterministic, ledgers re-account."""

import json
import math

import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from dpgym.privacy.budget import Budget
from dpgym.privacy.clipping import Flat, PerLayer, PerUnit, Sparse, split_clip_norm
from dpgym.privacy.dpsgd import DPSGD, _HookEngine, _OpacusEngine
from dpgym.privacy.ledger import Ledger, PrivacyViolation
from dpgym.privacy.reaccount import reaccount
from dpgym.plugins.nn.layers import LowRankLinear, LULinear, MaskedLinear, made_masks


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 1))


def _flow(seed=0):
    torch.manual_seed(seed)
    masks = made_masks(6, [12])
    return nn.Sequential(MaskedLinear(6, 12, masks[0]), nn.Tanh(), MaskedLinear(12, 6, masks[1]),
                         LowRankLinear(6, rank=1), LULinear(6), nn.LayerNorm(6))


def _data(n=64, seed=1):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=gen)
    return x, (x[:, :1] + 0.3 * torch.randn(n, 1, generator=gen) > 0).float()


def _per_example_loss(model, x, y):
    return nn.functional.binary_cross_entropy_with_logits(model(x)[:, :1], y, reduction="none").squeeze(1)


def _reference_per_example(model, x, y):
    """Per-example gradients from torch.func, independent of the engines."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    one = lambda p, xi, yi: _per_example_loss(lambda v: functional_call(model, p, (v,)), xi[None], yi[None]).sum()  # noqa: E731
    return vmap(grad(one), in_dims=(None, 0, 0))(params, x, y)


def _reference_clip(model, x, y, thresholds, mode):
    per = _reference_per_example(model, x, y)
    named = dict(model.named_parameters())
    layer_of = {id(p): m for m, _ in thresholds for p in m.parameters(recurse=False)}
    c_of = {m: c for m, c in thresholds}
    layers = {}
    for k, p in named.items():
        layers.setdefault(layer_of[id(p)], []).append(k)
    sq = {m: sum(per[k].flatten(1).square().sum(1) for k in ks) for m, ks in layers.items()}
    if mode == "flat":
        c = math.sqrt(sum(v * v for v in c_of.values()))
        factor = {m: (c / (torch.sqrt(sum(sq.values())) + 1e-6)).clamp(max=1) for m in layers}
    else:
        factor = {m: (c_of[m] / (sq[m].sqrt() + 1e-6)).clamp(max=1) for m in layers}
    return {named[k]: (per[k] * factor[m].view(-1, *[1] * (per[k].dim() - 1))).sum(0)
            for m, ks in layers.items() for k in ks}


def _engine_sum(engine_cls, model, x, y, strategy, thresholds):
    engine = engine_cls([model], thresholds, strategy, torch.Generator().manual_seed(0))
    engine.attach()
    _per_example_loss(model, x, y).sum().backward()
    summed = engine.collect()
    engine.detach()
    return summed


@pytest.mark.parametrize("engine", [_HookEngine, _OpacusEngine])
@pytest.mark.parametrize("strategy, mode", [(Flat(), "flat"), (PerLayer(), "per_layer")])
def test_engines_match_explicit_per_example_clipping(engine, strategy, mode):
    model = _mlp()
    x, y = _data()
    thresholds = split_clip_norm([model], 0.05)
    got = _engine_sum(engine, model, x, y, strategy, thresholds)
    for p, g in _reference_clip(model, x, y, thresholds, mode).items():
        torch.testing.assert_close(got[p], g, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("strategy", [Flat(), PerLayer(), PerUnit()])
def test_fast_engine_equals_opacus_engine_on_custom_layers(strategy):
    model = _flow()
    x, y = _data()
    thresholds = split_clip_norm([model], 0.1)
    fast = _engine_sum(_HookEngine, model, x, y, strategy, thresholds)
    slow = _engine_sum(_OpacusEngine, model, x, y, strategy, thresholds)
    assert set(fast) == set(slow) == {p for p in model.parameters()}
    for p in fast:
        torch.testing.assert_close(fast[p], slow[p], atol=1e-6, rtol=1e-5)


def test_a_layer_used_twice_is_clipped_on_its_summed_per_example_gradient():
    torch.manual_seed(0)
    shared, head = nn.Linear(6, 6), nn.Linear(6, 1)
    model = nn.ModuleDict({"shared": shared, "head": head})
    x, y = _data()

    def loss(m, xb, yb):
        return nn.functional.binary_cross_entropy_with_logits(head(shared(torch.tanh(shared(xb)))), yb, reduction="none").squeeze(1)

    thresholds = split_clip_norm([model], 0.05)
    results = []
    for cls in [_HookEngine, _OpacusEngine]:
        engine = cls([model], thresholds, PerLayer(), None)
        engine.attach()
        loss(model, x, y).sum().backward()
        results.append(engine.collect())
        engine.detach()
    for p in model.parameters():
        torch.testing.assert_close(results[0][p], results[1][p], atol=1e-6, rtol=1e-5)


@pytest.mark.slow
def test_gradient_reaching_a_parameter_outside_its_layer_is_refused():
    layer = LowRankLinear(6)
    dp = DPSGD(Budget(1.0, 1e-5), accountant="rdp")
    phase = dp.add_phase("flow", layer, torch.optim.SGD(layer.parameters(), lr=0.1), n_rows=64, batch_size=16, steps=3)
    x, _ = _data()
    with pytest.raises(PrivacyViolation, match="outside"):
        for idx in phase.batches():
            phase.step(layer(x[idx]).square().sum(1) - layer.log_abs_det())


def _train(seed, clipping="per_layer", engine=None, steps=5, accountant="rdp", eps=2.0):
    model = _mlp()
    x, y = _data(256)
    dp = DPSGD(Budget(eps, 1e-5), accountant=accountant, seed=seed)
    phase = dp.add_phase("mlp", model, torch.optim.Adam(model.parameters(), lr=0.01), n_rows=256,
                         batch_size=32, steps=steps, clip_norm=1.0, clipping=clipping, engine=engine)
    for idx in phase.batches():
        phase.step(_per_example_loss(model, x[idx], y[idx]))
    return model, dp


@pytest.mark.slow
def test_training_is_deterministic_under_a_seed():
    a, _ = _train(seed=7)
    b, _ = _train(seed=7)
    c, _ = _train(seed=8)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters()))


def test_sparse_zero_gives_bit_identical_training_to_per_layer():
    a, _ = _train(seed=3, clipping="per_layer")
    b, _ = _train(seed=3, clipping=Sparse(0.0))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


@pytest.mark.slow
def test_poisson_batches_have_mean_q_n_and_variable_size():
    model = _mlp()
    dp = DPSGD(Budget(10.0, 1e-5), accountant="rdp")
    phase = dp.add_phase("mlp", model, torch.optim.SGD(model.parameters(), lr=0.0), n_rows=1000,
                         sample_rate=0.05, steps=400)
    sizes = []
    for idx in phase.batches():
        sizes.append(len(idx))
        assert len(set(idx.tolist())) == len(idx)
        phase.step(torch.zeros(len(idx)))
    sizes = torch.tensor(sizes, dtype=torch.float)
    assert sizes.mean().item() == pytest.approx(50, rel=0.05)
    assert sizes.std().item() == pytest.approx(math.sqrt(1000 * 0.05 * 0.95), rel=0.15)


@pytest.mark.slow
def test_noise_std_on_the_averaged_gradient_is_sigma_c_over_expected_batch():
    model = nn.Linear(50, 40)
    dp = DPSGD(Budget(1.0, 1e-5), accountant="rdp")
    phase = dp.add_phase("lin", model, torch.optim.SGD(model.parameters(), lr=1.0), n_rows=500,
                         batch_size=25, steps=10, clip_norm=2.0)
    before = model.weight.detach().clone()
    for idx in phase.batches():
        phase.step(torch.zeros(len(idx)))  # zero gradients: the update is pure noise
        break
    step = before - model.weight.detach()
    assert step.std().item() == pytest.approx(phase.noise_multiplier * 2.0 / 25, rel=0.05)


@pytest.mark.slow
def test_steps_beyond_the_calibrated_count_are_refused():
    model = _mlp()
    dp = DPSGD(Budget(1.0, 1e-5), accountant="rdp")
    phase = dp.add_phase("mlp", model, torch.optim.SGD(model.parameters(), lr=0.1), n_rows=64, batch_size=8, steps=2)
    x, y = _data()
    for idx in phase.batches():
        phase.step(_per_example_loss(model, x[idx], y[idx]))
    phase.steps_taken = 2
    phase._attached = True
    with pytest.raises(PrivacyViolation):
        phase.step(torch.zeros(0))


def _toy_phase(model: nn.Module, lr: float = 0.1):
    dp = DPSGD(Budget(1.0, 1e-5), accountant="rdp")
    return dp.add_phase("toy", {"net": model}, torch.optim.SGD(model.parameters(), lr=lr), n_rows=64,
                        sample_rate=1.0, steps=3)


def test_an_example_with_a_non_finite_gradient_counts_as_a_zero_gradient_not_a_stop():
    """Stopping would reveal the row (spec A5): one row that overflows must not change whether the fit ends."""
    x = torch.randn(64, 1, generator=torch.Generator().manual_seed(1))
    x[5] = 0.0  # √|w·0| has a finite value and a NaN gradient
    weights = []
    for silence_row_5 in (False, True):
        torch.manual_seed(0)
        model = nn.Linear(1, 1, bias=False)
        phase = _toy_phase(model)
        for idx in phase.batches():
            loss = model(x[idx]).abs().sqrt().squeeze(1)
            if silence_row_5:  # the same value for row 5, with a zero gradient
                loss = torch.where(idx == 5, loss.detach(), loss)
            phase.step(loss)
        assert phase.steps_taken == 3
        weights.append(model.weight.detach().clone())
    assert torch.isfinite(weights[0]).all()
    torch.testing.assert_close(weights[0], weights[1], rtol=0, atol=0)


def test_parameters_that_stop_being_finite_stop_training_naming_step_and_parameter():
    torch.manual_seed(0)
    model = nn.Linear(1, 1, bias=False)
    phase = _toy_phase(model, lr=math.inf)  # the first noisy step leaves no finite weight
    x = torch.randn(64, 1)
    with pytest.raises(FloatingPointError, match=r"phase 'toy', step 1 of 3: the parameters \['net.weight'\] are no"):
        for idx in phase.batches():
            phase.step(model(x[idx]).squeeze(1))


@pytest.mark.slow
def test_private_training_learns():
    model, _ = _train(seed=0, steps=150, eps=8.0)
    x, y = _data(256)
    accuracy = ((model(x) > 0).float() == y).float().mean().item()
    assert accuracy > 0.75


@pytest.mark.slow
@pytest.mark.parametrize("accountant", ["rdp", "prv"])
def test_ledger_entry_records_the_mechanism_and_re_accounts_ok(accountant):
    _, dp = _train(seed=0, steps=20, accountant=accountant)
    ledger = dp.ledger()
    (entry,) = ledger.entries
    assert entry.type == "subsampled_gaussian" and entry.event.clip_norm > 0
    assert {"clip_norms", "clipping", "sampling"} <= set(entry.details)
    assert entry.event.steps == 20 and entry.details["clipping"] == "per_layer" and entry.details["sampling"] == "poisson"
    assert accountant in entry.accountant and "opacus" in entry.accountant
    assert ledger.epsilon <= 2.0
    restored = Ledger.from_dict(json.loads(json.dumps(ledger.to_dict())))
    result = reaccount(restored, Budget(2.0, 1e-5))
    assert result.verdict == "ok"
    assert result.epsilon <= ledger.epsilon + 1e-3 and result.rdp_epsilon >= result.epsilon - 1e-2


@pytest.mark.slow
def test_two_phases_are_calibrated_jointly_and_claimed_composed():
    ae, disc = _mlp(0), _mlp(1)
    x, y = _data(256)
    dp = DPSGD(Budget(1.0, 1e-5), accountant="rdp", seed=0)
    first = dp.add_phase("autoencoder", ae, torch.optim.SGD(ae.parameters(), lr=0.1), n_rows=256,
                         batch_size=16, steps=40)
    second = dp.add_phase("discriminator", disc, torch.optim.SGD(disc.parameters(), lr=0.1), n_rows=256,
                          batch_size=32, steps=60, noise_weight=2.0)
    for phase, model in [(first, ae), (second, disc)]:
        for idx in phase.batches():
            phase.step(_per_example_loss(model, x[idx], y[idx]))
    ledger = dp.ledger()
    assert second.noise_multiplier == pytest.approx(2 * first.noise_multiplier)
    assert ledger.composition == "rdp" and 0.99 <= ledger.epsilon <= 1.0
    assert ledger.epsilon < sum(e.epsilon for e in ledger.entries)
    assert reaccount(ledger, Budget(1.0, 1e-5)).verdict == "ok"


def test_batch_norm_is_refused():
    model = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4))
    with pytest.raises(NotImplementedError, match="BatchNorm1d"):
        DPSGD(Budget(1.0, 1e-5)).add_phase("bn", model, torch.optim.SGD(model.parameters(), lr=0.1),
                                           n_rows=64, batch_size=8, steps=1)


def test_gdp_ledgers_are_marked_nominal():
    _, dp = _train(seed=0, steps=3, accountant="gdp")
    assert dp.ledger().guarantee == "nominal" and dp.ledger().composition == "gdp"


def test_a_parameter_tied_across_two_layers_is_refused():
    """Clipped once per layer, a row's gradient on it could reach 2C while the noise is for C."""
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
    model[2].weight = model[0].weight
    with pytest.raises(ValueError, match=r"parameters \['model.0.weight'\] are shared by more than one layer"):
        DPSGD(Budget(1.0, 1e-5)).add_phase("tied", model, torch.optim.SGD(model.parameters(), lr=0.1),
                                           n_rows=64, batch_size=8, steps=1)


def test_an_optimiser_stepping_parameters_outside_the_phase_is_refused():
    """The head's raw gradient would move it with neither clipping nor noise."""
    encoder, head = nn.Linear(6, 4), nn.Linear(4, 1)
    optimizer = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.1)
    with pytest.raises(ValueError, match=r"update 2 parameter\(s\) \[\(1, 4\), \(1,\)\] outside the phase's networks"):
        DPSGD(Budget(1.0, 1e-5)).add_phase("enc", encoder, optimizer, n_rows=64, batch_size=8, steps=1)


class _PerColumn(nn.Module):
    """One Linear(1, 1) applied to every column: its input has rows × columns leading entries."""

    def __init__(self):
        super().__init__()
        self.encode = nn.Linear(1, 1)

    def forward(self, x):
        return self.encode(x.reshape(-1, 1)).reshape(x.shape)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["fast", "opacus"])
def test_a_layer_whose_input_is_not_one_entry_per_row_is_refused(engine):
    """Clipped per slice, one row of 6 columns could move the sum by 6 clip norms."""
    model = _PerColumn()
    dp = DPSGD(Budget(1.0, 1e-5), seed=0)
    phase = dp.add_phase("cols", model, torch.optim.SGD(model.parameters(), lr=0.1), n_rows=64, batch_size=16,
                         steps=3, engine=engine)
    x, _ = _data()
    with pytest.raises(PrivacyViolation, match=r"Linear got an input with leading dimension \d+ in a step of \d+ rows"):
        for idx in phase.batches():
            if len(idx):
                phase.step(model(x[idx]).sum(1))


@pytest.mark.slow
def test_a_loss_not_of_one_entry_per_sampled_row_is_refused():
    model = _mlp()
    dp = DPSGD(Budget(1.0, 1e-5), seed=0)
    phase = dp.add_phase("mlp", model, torch.optim.SGD(model.parameters(), lr=0.1), n_rows=64, batch_size=16, steps=2)
    x, y = _data()
    with pytest.raises(ValueError, match=r"expected one loss per sampled row"):
        for idx in phase.batches():
            phase.step(_per_example_loss(model, x[idx], y[idx]).repeat(2))
