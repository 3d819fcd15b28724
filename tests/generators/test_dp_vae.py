"""DP-VAE: one DP-SGD phase on encoder and decoder, calibrated to the budget, deterministic samples."""

from __future__ import annotations

import math

import pytest
from torch import nn

from harness import Budget, Guarantee
from harness.privacy.reaccount import reaccount
from plugins.generators.dp_vae import SPEC

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
    assert entry.params["steps"] == 15 and entry.params["clipping"] == "flat"
    assert entry.params["sample_rate"] == pytest.approx(64 / 1500)
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
