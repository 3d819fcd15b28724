"""DP-VAE: one DP-SGD phase on encoder and decoder, calibrated to the budget, deterministic samples."""

from __future__ import annotations

import math

import pytest
from torch import nn

from dpgym import Budget, Guarantee
from dpgym.privacy.reaccount import reaccount
from dpgym.plugins.generators.dp_vae import SPEC

TINY = {"steps": 15, "batch_size": 64}


@pytest.fixture(scope="module")
def rows(adult_split):
    return adult_split.train.iloc[:1500].reset_index(drop=True)


@pytest.fixture(scope="module")
def fits(rows, adult_schema):
    out = {}
    for name, seed, eps in (("a", 0, 0.5), ("b", 0, 0.5), ("inf", 0, math.inf)):
        gen = SPEC.build(TINY)
        out[name] = (gen, gen.fit(rows, adult_schema, Budget(eps, 1e-5), seed=seed))
    return out


def test_ledger_is_one_flat_clipped_phase_spending_the_budget(fits):
    _, ledger = fits["a"]
    (entry,) = ledger.entries
    assert ledger.guarantee is Guarantee.FORMAL
    assert entry.event.steps == 15 and entry.details["clipping"] == "flat"
    assert entry.event.sample_rate == pytest.approx(64 / 1500)
    assert 0.5 * 0.99 <= ledger.epsilon <= 0.5
    assert reaccount(ledger, Budget(0.5, 1e-5)).verdict == "ok"


def test_only_the_decoder_is_released(fits):
    assert {k for k, v in vars(fits["a"][0]).items() if isinstance(v, nn.Module)} == {"decoder_"}


def test_samples_are_schema_form_and_deterministic(fits, adult_schema):
    a, b = fits["a"][0], fits["b"][0]
    sample = a.sample(200, seed=3)
    adult_schema.validate(sample)
    assert sample.equals(b.sample(200, seed=3))


def test_infinite_budget_is_non_private(fits, adult_schema):
    gen, ledger = fits["inf"]
    assert ledger.is_non_private
    adult_schema.validate(gen.sample(50, seed=0))


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="positive"):
        SPEC.build({"clip_norm": -1.0})
    with pytest.raises(ValueError, match="decoding"):
        SPEC.build({"decoding": "mode"})


SAP = {"architecture": "sap", "latent_dim": 2, "optimizer": "sgd", "lr": 0.001, "clip_norm": 0.2,
       "noise": "published", "decoding": "sample"}


def test_sap_architecture_trains_at_the_published_noise_until_the_budget_is_spent(rows, adult_schema):
    """The paper's DP-VAE: ψ = 4 at ε = 0.51, for as many steps as that allows (here the cap)."""
    gen = SPEC.build({**SAP, "steps": 40})
    ledger = gen.fit(rows, adult_schema, Budget(0.51, 1e-5), seed=0)
    (entry,) = ledger.entries
    assert entry.event.steps == 40 and entry.event.noise_multiplier <= 4.0
    assert reaccount(ledger, Budget(0.51, 1e-5)).verdict == "ok"
    assert {k for k, v in vars(gen).items() if isinstance(v, nn.Module)} == {"encoder_", "decoder_"}
    sample = gen.sample(300, seed=1)
    adult_schema.validate(sample)
    assert sample.equals(gen.sample(300, seed=1))
    assert sample["race"].nunique() > 1  # categories are drawn from the sigmoid outputs, not argmax


@pytest.mark.slow
def test_published_noise_stops_where_the_budget_runs_out(rows, adult_schema):
    """At ψ = 5 and q = 64/1500 the budget of ε = 0.36 lasts far fewer than the cap's steps."""
    gen = SPEC.build({**SAP, "steps": 100_000})
    ledger = gen.fit(rows.iloc[:1500], adult_schema, Budget(0.36, 1e-5), seed=0)
    (entry,) = ledger.entries
    assert 10 < entry.event.steps < 100_000
    assert entry.event.noise_multiplier == pytest.approx(5.0, rel=0.02)
    assert 0.36 * 0.99 <= ledger.epsilon <= 0.36


def test_published_noise_needs_the_sap_architecture():
    with pytest.raises(ValueError, match="architecture='sap'"):
        SPEC.build({"noise": "published"})
    with pytest.raises(ValueError, match="architecture"):
        SPEC.build({"architecture": "keras"})
