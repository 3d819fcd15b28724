"""DP-CGAN: DP-SGD over the true n with Poisson sampling, a re-accountable ledger, valid samples."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from dpgym import Budget, Guarantee
from dpgym.privacy.reaccount import reaccount
from dpgym.plugins.generators import dp_cgan

SMALL = {"steps": 6, "batch_size": 32, "hidden": 16, "noise_dim": 8}


def fitted(rows, schema, budget=Budget(1.0, 1e-5), seed=0, **params):
    gen = dp_cgan.SPEC.build({**SMALL, **params})
    return gen, gen.fit(rows, schema, budget, seed)


def test_discriminator_is_accounted_over_the_true_number_of_rows(adult_rows, adult_schema):
    _, ledger = fitted(adult_rows, adult_schema)
    labels, sgd = ledger.entries
    assert sgd.type == "subsampled_gaussian"
    assert sgd.details["n_rows"] == len(adult_rows) == 600  # not MNIST's 60,000
    assert sgd.event.sample_rate == pytest.approx(32 / 600)
    assert sgd.details["sampling"] == "poisson" and sgd.event.adjacency == "add_remove"
    assert sgd.event.steps == 6 and sgd.event.clip_norm == pytest.approx(1.1)
    assert sgd.event.noise_multiplier > 0
    assert labels.type == "gaussian" and labels.event.l2_sensitivity == 1.0


def test_ledger_spends_the_budget_and_reaccounts(adult_rows, adult_schema):
    """The class counts carry the noise of a (0.05 ε, 0.05 δ) release; composed jointly with DP-SGD,
    whose noise takes what is left, the cell spends its whole budget (adding them up spent 93%)."""
    budget = Budget(1.0, 1e-5)
    _, ledger = fitted(adult_rows, adult_schema, budget)
    assert ledger.guarantee is Guarantee.FORMAL and ledger.composition == "prv"
    assert 0.99 <= ledger.epsilon <= 1.0 and ledger.delta == 1e-5
    assert ledger.entries[0].epsilon == pytest.approx(0.05)  # label_share of ε for the class counts, alone
    check = reaccount(ledger, budget)
    assert check.verdict == "ok" and check.epsilon >= 0.97


def test_generator_step_leaves_the_discriminator_alone(adult_rows, adult_schema, monkeypatch):
    """Only DP-SGD steps move the discriminator: record its parameters around each generator step."""
    moved = []
    original = torch.optim.Adam.step
    gen = dp_cgan.SPEC.build(SMALL)
    train = gen._train

    def checked_train(phase, discriminator, d_opt, g_opt, x, y, generator):
        before = {}

        def g_step(self, *args, **kwargs):
            before["d"] = [p.detach().clone() for p in discriminator.parameters()]
            out = original(self, *args, **kwargs)
            moved.append(any(not torch.equal(a, p) for a, p in zip(before["d"], discriminator.parameters())))
            assert all(p.grad is None for p in discriminator.parameters())
            return out

        monkeypatch.setattr(g_opt, "step", g_step.__get__(g_opt))
        return train(phase, discriminator, d_opt, g_opt, x, y, generator)

    gen._train = checked_train
    gen.fit(adult_rows, adult_schema, Budget(1.0, 1e-5), 0)
    assert moved == [False] * SMALL["steps"]


def test_non_private_mode_has_a_non_private_ledger(adult_rows, adult_schema):
    _, ledger = fitted(adult_rows, adult_schema, Budget(math.inf))
    assert ledger.is_non_private and ledger.guarantee is Guarantee.FORMAL
    assert reaccount(ledger, Budget(math.inf)).verdict == "ok"


def test_samples_are_valid_rows_of_the_schema(adult_rows, adult_schema):
    gen, _ = fitted(adult_rows, adult_schema)
    synthetic = adult_schema.conform(gen.sample(300, seed=1), "dp_cgan sample")
    assert list(synthetic.columns) == adult_schema.names and len(synthetic) == 300


def test_same_seed_same_samples_and_another_seed_differs(adult_rows, adult_schema):
    def run(seed):
        gen, _ = fitted(adult_rows, adult_schema, seed=seed)
        return gen.sample(200, seed=7)

    pd.testing.assert_frame_equal(run(0), run(0))
    assert not run(0).equals(run(1))


def test_invalid_hyper_parameters_are_refused():
    with pytest.raises(ValueError, match="label_share"):
        dp_cgan.SPEC.build({"label_share": 1.0})
    with pytest.raises(ValueError):
        dp_cgan.SPEC.build({"clip_norm": 0.0})
