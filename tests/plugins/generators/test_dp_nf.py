"""dp_nf: the flow is an exact, invertible, autoregressive density; the engine clips the flow's whole
per-example gradient (ActNorm's log-det included); steps follow T_max(ε); ledgers re-account."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch.func import functional_call, grad, vmap

from dpgym import Budget, Column, ColumnKind, Guarantee, Schema
from dpgym.privacy.accountants import Phase, PRVAccountant
from dpgym.privacy.clipping import Flat, split_clip_norm
from dpgym.privacy.dpsgd import _HookEngine, _OpacusEngine
from dpgym.privacy.reaccount import reaccount
from dpgym.plugins.generators.dp_nf import SPEC
from dpgym.plugins.generators.dp_nf.model import GaussianMixturePrior
from dpgym.plugins.generators.dp_mog.model import Mixture
from dpgym.plugins.nn.flows import MADE, MAF

SCHEMA = Schema("ring", (Column("x", ColumnKind.CONTINUOUS, min=-3.0, max=3.0),
                         Column("y", ColumnKind.CONTINUOUS, min=-3.0, max=3.0),
                         Column("tag", ColumnKind.BINARY, categories=("0", "1"))))
SMALL = {"blocks": 2, "hidden": 16, "max_steps": 40, "batch_size": 50, "accountant": "rdp"}  # RDP: fast calibration


def ring(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    angle = rng.uniform(0, 2 * np.pi, n)
    r = 2 + 0.1 * rng.standard_normal(n)
    return pd.DataFrame({"x": r * np.cos(angle), "y": r * np.sin(angle),
                         "tag": pd.Categorical(rng.choice(["0", "1"], n), categories=["0", "1"])})


def _flow(seed=0, dim=3) -> MAF:
    torch.manual_seed(seed)
    flow = MAF(dim, blocks=3, hidden=12, actnorm=True, alpha_bound=7.0)
    with torch.no_grad():  # move ActNorm off the identity so its gradients are exercised
        for an in flow.actnorms:
            an.log_scale.uniform_(-0.5, 0.5)
            an.bias.uniform_(-0.5, 0.5)
    return flow


def test_inverse_undoes_forward():
    flow = _flow()
    x = torch.randn(64, 3)
    u, _ = flow(x)
    torch.testing.assert_close(flow.inverse(u), x, atol=1e-5, rtol=1e-5)


def test_log_det_equals_autograd_jacobian():
    flow = _flow()
    x = torch.randn(5, 3)
    _, log_det = flow(x)
    for i in range(5):
        jac = torch.autograd.functional.jacobian(lambda v: flow(v[None])[0][0], x[i])
        assert log_det[i].item() == pytest.approx(torch.linalg.slogdet(jac).logabsdet.item(), abs=1e-4)


def test_made_output_i_depends_only_on_inputs_before_i():
    torch.manual_seed(0)
    made = MADE(4, 10)
    x = torch.randn(4)
    for out in (0, 1):
        jac = torch.autograd.functional.jacobian(lambda v: made(v[None])[out][0], x)  # (4 outputs, 4 inputs)
        assert torch.all(jac.triu() == 0)


def test_two_dimensional_density_integrates_to_one():
    flow = _flow(dim=2)
    grid = torch.linspace(-8, 8, 401)
    xx, yy = torch.meshgrid(grid, grid, indexing="ij")
    with torch.no_grad():
        density = flow.log_prob(torch.stack([xx.ravel(), yy.ravel()], 1)).exp()
    assert (density.sum() * (grid[1] - grid[0]) ** 2).item() == pytest.approx(1.0, abs=0.02)


@pytest.mark.parametrize("engine", [_HookEngine, _OpacusEngine])
def test_engine_clips_the_whole_per_example_gradient_of_the_flow(engine):
    flow, x, clip = _flow(), torch.randn(32, 3) * 2, 0.5
    layers = split_clip_norm([flow], clip)
    eng = engine([flow], layers, Flat(), None)
    eng.attach()
    (-flow.log_prob(x)).sum().backward()
    got = eng.collect()
    eng.detach()
    params = {k: v.detach() for k, v in flow.named_parameters()}

    def nll(p, xi):  # independent of the engine: autograd of one example's −log p, batched by vmap
        u, log_det = functional_call(flow, p, (xi[None],))
        return 0.5 * (u.square().sum() + 3 * math.log(2 * math.pi)) - log_det.sum()

    per = vmap(grad(nll), in_dims=(None, 0))(params, x)
    norms = torch.sqrt(sum(g.flatten(1).square().sum(1) for g in per.values()))
    factor = (clip / (norms + 1e-6)).clamp(max=1)
    named = dict(flow.named_parameters())
    assert set(got) == set(named.values())
    assert (norms > clip).all()  # every example is clipped, so the check is not vacuous
    for k, g in per.items():
        torch.testing.assert_close(got[named[k]], (g * factor.view(-1, *[1] * (g.dim() - 1))).sum(0), atol=1e-5, rtol=1e-4)


@pytest.mark.slow
def test_steps_are_the_largest_within_budget_at_the_target_noise():
    gen = SPEC.build({**SMALL, "max_steps": 5_000})
    budget = Budget(0.3, 1e-5)
    accountant = PRVAccountant.for_target(0.3)
    steps = gen._steps(accountant, 0.01, budget)
    assert 1 < steps < 5_000
    assert accountant.epsilon([Phase(0.01, 2.1, steps)], 1e-5) <= 0.3
    assert accountant.epsilon([Phase(0.01, 2.1, int(steps * 1.01) + 2)], 1e-5) > 0.3


@pytest.mark.slow
def test_private_fit_reaccounts_and_records_the_gdp_figure_as_approximate():
    gen = SPEC.build({**SMALL, "accountant": "prv"})
    budget = Budget(1.0, 1e-5)
    ledger = gen.fit(ring(2000), SCHEMA, budget, seed=0)
    assert ledger.guarantee is Guarantee.FORMAL and ledger.composition == "prv"
    (entry,) = ledger.entries
    assert entry.type == "subsampled_gaussian" and entry.event.steps == gen.steps_ == 40
    assert entry.details["clipping"] == "flat" and entry.event.clip_norm == 12.0
    assert entry.details["epsilon_gdp_clt_poisson"] < ledger.epsilon  # reported beside, never claimed
    assert "approximation" in entry.details["epsilon_gdp_clt_note"]
    check = reaccount(ledger, budget)
    assert check.verdict == "ok" and check.epsilon <= budget.epsilon


@pytest.mark.slow
def test_gmm_prior_is_charged_to_the_same_budget():
    gen = SPEC.build({**SMALL, "prior": "dp_mog", "prior_components": 2, "prior_iterations": 3})
    budget = Budget(1.0, 1e-5)
    ledger = gen.fit(ring(2000), SCHEMA, budget, seed=0)
    assert [e.type for e in ledger.entries] == ["gaussian"] * 9 + ["subsampled_gaussian"]
    check = reaccount(ledger, budget)
    assert check.verdict == "ok" and ledger.epsilon <= budget.epsilon
    alone = SPEC.build(SMALL)
    alone.fit(ring(2000), SCHEMA, budget, seed=0)
    assert gen.sgd_noise_multiplier_ > alone.sgd_noise_multiplier_  # the prior's releases cost something


def test_gmm_prior_log_prob_matches_the_mixture():
    rng = np.random.default_rng(0)
    mix = Mixture(np.array([0.4, 0.6]), rng.standard_normal((2, 2)), np.stack([np.eye(2) * 0.3, np.diag([1.0, 0.5])]))
    u = rng.standard_normal((20, 2))
    got = GaussianMixturePrior(mix).log_prob(torch.tensor(u, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(got, mix.log_prob(u), atol=1e-4)


@pytest.mark.slow
def test_fit_is_deterministic_and_samples_conform():
    a, b = SPEC.build(SMALL), SPEC.build(SMALL)
    for g in (a, b):
        g.fit(ring(1000), SCHEMA, Budget(1.0, 1e-5), seed=3)
    test = ring(200, seed=7)
    np.testing.assert_array_equal(a.log_prob(test), b.log_prob(test))
    pd.testing.assert_frame_equal(a.sample(100, seed=1), b.sample(100, seed=1))
    SCHEMA.conform(a.sample(100, seed=1))


@pytest.mark.slow
def test_training_raises_the_heldout_likelihood():
    gen = SPEC.build({**SMALL, "max_steps": 300})
    test = ring(500, seed=5)
    gen.fit(ring(5000), SCHEMA, Budget(math.inf), seed=0)
    untrained = SPEC.build({**SMALL, "max_steps": 1})
    untrained.fit(ring(5000), SCHEMA, Budget(math.inf), seed=0)
    assert gen.log_prob(test).mean() > untrained.log_prob(test).mean() + 0.5  # measured: −3.3 vs −4.3


def test_gdp_is_not_accepted_as_the_claiming_accountant():
    with pytest.raises(ValueError, match="rigorous"):
        SPEC.build({"accountant": "gdp"})
