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
from scipy import stats

from dpgym.audit.canary import (analyse, canary_coins, canary_records, certify, dp_inverse, epsilon_lower,
                                fdp_epsilon_lower, fdp_rejects, gaussian_inverse, gdp_epsilon, guess_rules, mu_lower,
                                p_value)
from dpgym.cli import main
from dpgym.privacy import DPSGD, calibrate_gaussian
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


def test_at_zero_the_fdp_bound_rejects_only_where_fair_coins_are_unlikely_and_all_right_exactly_at_two_to_the_minus_k():
    # At ε = 0 (or μ = 0) the coins are independent of the release: the count of right guesses is
    # Binomial(k, 1/2), so a valid test rejects only counts whose fair-coin tail is below the level.
    level = 0.05 / 16
    for guesses in (10, 30, 100, 300):
        binomial_first = next(c for c in range(guesses + 1) if stats.binom.sf(c - 1, guesses, 0.5) <= level)
        for inverse in (dp_inverse(0.0, 0.0), gaussian_inverse(0.0)):
            rejected = [c for c in range(guesses + 1) if fdp_rejects(inverse, 1000, guesses, c, level)]
            assert rejected == list(range(rejected[0], guesses + 1))  # every count from the first rejected up
            assert binomial_first <= rejected[0] <= binomial_first + 1  # valid, and at most one count looser
    # k right of k: the recursion is the binomial's own, P = 2^-k
    for guesses in (10, 30):
        assert fdp_rejects(gaussian_inverse(0.0), 1000, guesses, guesses, 1.01 * 2.0**-guesses)
        assert not fdp_rejects(gaussian_inverse(0.0), 1000, guesses, guesses, 0.99 * 2.0**-guesses)


def test_the_fdp_bounds_grow_with_correct_guesses_and_match_the_closed_form_for_all_right_under_pure_dp():
    # δ = 0, all r right: the recursion's tail is e^ε/(1 + e^ε) to the power r, Steinke et al.'s closed form
    for guesses in (10, 100, 300):
        p = 0.05 ** (1 / guesses)
        assert fdp_epsilon_lower(1000, guesses, guesses, 0.0, 0.05) == pytest.approx(math.log(p / (1 - p)), rel=1e-6)
    assert fdp_epsilon_lower(1000, 200, 100, 1e-5, 0.05) == 0.0 and mu_lower(1000, 200, 100, 0.05) == 0.0
    for bound in (lambda v: fdp_epsilon_lower(1000, 200, v, 1e-5, 0.05), lambda v: mu_lower(1000, 200, v, 0.05)):
        bounds = [bound(v) for v in (120, 150, 180, 200)]
        assert bounds == sorted(bounds) and bounds[0] > 0
    # the family is ordered: rejecting a μ rejects every smaller one
    assert [fdp_rejects(gaussian_inverse(mu), 1000, 200, 170, 0.01) for mu in (0.0, 0.2, 0.4, 0.5, 0.8)] == [True] * 3 + [False] * 2


def _gaussian_mechanism(mu: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """What white-box canaries see of an exactly μ-GDP release: each canary's score N(μ·coin, 1)."""
    rng = np.random.default_rng(seed)
    included = rng.random(1000) < 0.5
    return rng.normal(mu * included, 1.0), included


def test_on_an_exact_gaussian_mechanism_the_fdp_bound_is_at_least_steinkes_and_below_the_truth():
    mu, delta = 2.0, 1e-5
    truth = gdp_epsilon(mu, delta)  # 10.0: the mechanism is (10.0, 1e-5)-DP and no less
    for seed in range(4):
        scores, included = _gaussian_mechanism(mu, seed)
        best = certify({"white_box": scores}, included, delta)["attacks"]["white_box"]
        assert best["bound"] == "f-dp" and best["f_dp"] > best["steinke"] > 2.5
        assert best["lower"] < truth  # no false violation of the true claim
        # the μ bound is below the true μ, and read as ε under the (here true) Gaussian curve it is much tighter
        assert 0.9 < best["mu_lower"] < mu and best["lower"] < best["mu_lower_epsilon"] < truth


def test_a_gaussian_mechanism_with_four_times_the_claimed_mu_is_a_violation_and_the_honest_one_is_not():
    claim, delta = 1.0, 1e-5
    mu = 1 / calibrate_gaussian(claim, delta)  # 0.268: the μ whose Gaussian mechanism is (1, 1e-5)-DP
    for seed in range(3):
        scores, included = _gaussian_mechanism(4 * mu, seed)
        found = analyse({"included": included.tolist(), "scores": {"gradient": scores.tolist()}, "dp_sgd_steps": 0}, delta)
        assert found["epsilon_lower"] > claim and found["bound"] in ("steinke", "f-dp") and found["mu_lower"] > mu
        scores, included = _gaussian_mechanism(mu, seed)
        assert certify({"gradient": scores}, included, delta)["attacks"]["gradient"]["lower"] < claim


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
    out = capsys.readouterr().out
    assert "canaries" in out and "not μ-GDP for μ ≤" in out
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
