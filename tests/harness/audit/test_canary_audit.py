"""The one-run audit (`dpgym audit --canaries`): its bound, the canaries, the DP-SGD engine's gradient
canaries, and faults it catches in a single fit."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from torch import nn

from dpgym import Budget
from dpgym.audit.canary import canary_coins, canary_records, certify, epsilon_lower, guess_rules, p_value
from dpgym.cli import main
from dpgym.privacy import DPSGD
from dpgym.privacy.canaries import gradient_canaries
from tests.harness.audit.audit_faults import PLANTED


def test_perfect_guesses_under_pure_dp_give_the_closed_form_bound():
    # δ = 0: P[all r right] = p^r with p = e^ε/(1 + e^ε), so the bound solves p^r = level.
    for guesses in (10, 100, 300):
        p = 0.05 ** (1 / guesses)
        assert epsilon_lower(1000, guesses, guesses, 0.0, 0.05) == pytest.approx(math.log(p / (1 - p)), rel=1e-6)


def test_the_bound_grows_with_correct_guesses_and_is_zero_at_chance():
    assert epsilon_lower(1000, 200, 100, 1e-5, 0.05) == 0.0
    bounds = [epsilon_lower(1000, 200, v, 1e-5, 0.05) for v in (120, 150, 180, 200)]
    assert bounds == sorted(bounds) and bounds[0] > 0
    # δ only loosens: the same guesses certify less when the claim allows δ > 0
    assert epsilon_lower(1000, 200, 180, 1e-3, 0.05) < epsilon_lower(1000, 200, 180, 0.0, 0.05)
    assert p_value(1000, 200, 180, 0.0, 0.0) < p_value(1000, 200, 180, 1.0, 0.0) <= 1.0


def test_certify_corrects_for_every_rule_and_score():
    rng = np.random.default_rng(0)
    included = rng.random(1000) < 0.5
    chance = {"a": rng.normal(size=1000), "b": rng.normal(size=1000)}
    found = certify(chance, included, 1e-5)
    assert found["tests"] == 2 * len(guess_rules(1000)) and found["level"] == pytest.approx(0.05 / found["tests"])
    assert all(a["lower"] == 0.0 for a in found["attacks"].values())
    separated = {"leak": included + rng.normal(0, 0.01, 1000)}
    best = certify(separated, included, 1e-5)["attacks"]["leak"]
    assert best["correct"] == best["guessed_in"] + best["guessed_out"] and best["lower"] > 3


def test_canaries_come_from_the_public_schema_and_their_coins_are_seeded(adult_schema):
    canaries = canary_records(adult_schema, 500, seed=3)
    assert len(canaries) == 500 and len(canaries.drop_duplicates()) == 500
    for c in adult_schema.columns:
        if c.is_numeric:
            assert canaries[c.name].between(c.min, c.max).all()
    assert canary_records(adult_schema, 500, seed=3).equals(canaries)
    coins = canary_coins(3, 1000)
    assert (coins == canary_coins(3, 1000)).all() and 400 < coins.sum() < 600


def _train(epsilon: float, quieter: float = 1.0, canaries: int = 1000, seed: int = 0):
    """A small classifier trained with DP-SGD (flat clipping) with gradient canaries; `quieter` divides the
    calibrated noise multiplier after calibration, a planted fault the ledger does not show."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(1000, 20, generator=generator)
    y = (x[:, 0] > 0).float()
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    included = canary_coins(seed, canaries)
    participations = np.zeros(canaries)
    with gradient_canaries(included, seed) as audited:
        dp = DPSGD(Budget(epsilon, 1e-5), seed=seed)
        phase = dp.add_phase("model", model, optimizer, n_rows=len(x), batch_size=100, steps=500, clipping="flat")
        dp.calibrate()
        phase.noise_multiplier /= quieter
        for idx in phase.batches():
            assert idx.max() < len(x)  # the canaries are not handed to the model as rows
            participations[phase._canaries.sampled.numpy()] += 1
            phase.step(nn.functional.binary_cross_entropy_with_logits(model(x[idx]).squeeze(1), y[idx], reduction="none"))
    return audited, included, participations


def test_gradient_canaries_are_sampled_as_rows_and_only_when_included():
    audited, included, participations = _train(1.0)
    assert participations[~included].sum() == 0
    assert participations[included].mean() == pytest.approx(500 * 0.1, rel=0.05)  # q·T, q = 100/1000
    assert audited.steps == 500 and audited.phases == 1


def test_gradient_canaries_catch_noise_below_the_ledger_and_pass_the_honest_engine():
    honest, included, _ = _train(1.0)
    quiet, quiet_included, _ = _train(1.0, quieter=10)
    assert certify({"gradient": honest.scores}, included, 1e-5)["attacks"]["gradient"]["lower"] < 1.0
    assert certify({"gradient": quiet.scores}, quiet_included, 1e-5)["attacks"]["gradient"]["lower"] > 1.0


def test_one_fit_catches_a_generator_that_resamples_its_training_rows(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DPGYM_PLUGINS", PLANTED)
    argv = ["audit", "--generators", "resampler,independent", "--datasets", "adult", "--epsilons", "1",
            "--canaries", "1000", "--audit-rows", "1000", "--synthetic-rows", "5000", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert "canaries" in capsys.readouterr().out
    audits = {a["generator"]: a for a in json.loads((tmp_path / "audits.json").read_text())["audits"]}
    assert audits["resampler"]["verdict"] == "violation" and audits["resampler"]["mode"] == "one_run"
    assert audits["independent"]["verdict"] == "consistent" and audits["independent"]["fits_done"] == 1
    detail = json.loads((tmp_path / audits["resampler"]["detail"]).read_text())
    assert detail["attack"] == "nearest" and len(detail["attacks"]["nearest"]["scores"]) == 1000


def test_one_fit_catches_dp_sgd_noise_below_the_ledger_in_a_real_generator(tmp_path, monkeypatch):
    """dp_vae_quiet trains with a tenth of the σ its ledger records; its gradient canaries show it."""
    monkeypatch.setenv("DPGYM_PLUGINS", PLANTED)
    argv = ["audit", "--generators", "dp_vae,dp_vae_quiet", "--set", "dp_vae.steps=300", "--set", "dp_vae_quiet.steps=300",
            "--datasets", "adult", "--epsilons", "1", "--canaries", "1000", "--audit-rows", "2000", "--out", str(tmp_path)]
    assert main(argv) == 0
    audits = {a["generator"]: a for a in json.loads((tmp_path / "audits.json").read_text())["audits"]}
    assert audits["dp_vae_quiet"]["verdict"] == "violation" and audits["dp_vae_quiet"]["attack"] == "gradient"
    assert audits["dp_vae"]["verdict"] == "consistent" and audits["dp_vae"]["dp_sgd_steps"] == 300


def test_canaries_must_allow_the_smallest_guess_rule(tmp_path, capsys):
    assert main(["audit", "--generators", "uniform", "--datasets", "adult", "--epsilons", "1", "--canaries", "5",
                 "--out", str(tmp_path)]) == 2
    assert "--canaries must be" in capsys.readouterr().err
