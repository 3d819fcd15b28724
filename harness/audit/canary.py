"""The one-run audit (Steinke, Nasr & Jagielski 2023, "Privacy auditing with one (1) training run"):
m canaries, each put in the training set by its own fair coin, one fit, and an ε lower bound from
how many of an attack's guesses about the coins are right (docs/privacy.md#one-run-audit).

Where the distinguishing game (`dpgym.audit.game`) needs hundreds of fits, this needs one, which
is what makes auditing DP-SGD generators affordable. The price is tightness: the coins are guessed
from one release, so interference between canaries and the attack's weakness on each of them stay in
the bound. Steinke et al. show it approaches ε only when each canary's effect can be read on its own,
as with the engine's gradient canaries (`dpgym.privacy.canaries`) observed in every noisy step; from
synthetic rows alone (the black-box attacks) it stays far below ε for any correct generator.

The canaries are rows drawn uniformly from the public domain (each numeric column uniform between
its bounds in the audit space, log1p for heavy-tailed columns; each discrete column uniform over its
categories): never from private rows, and with many columns, far from every real row and from each
other. D is a fixed subsample of the training split; the fit sees D plus the included canaries, in a
seeded random order.

Two bounds read the same guesses (docs/privacy.md#one-run-audit):

- Steinke et al.'s Theorem 5.2: for an (ε, δ)-DP mechanism, an attack that makes r guesses about m
  independent fair coins gets v or more right with probability at most
  P[Binomial(r, e^ε/(1+e^ε)) ≥ v] + 2mδ·α, α a maximum over the binomial's left tail.
- The f-DP bound of Mahloujifar, Melis & Chaudhuri (2024, "Auditing f-differential privacy in one
  run", Theorem 3.2): for an f-DP mechanism, a recursion over the trade-off curve f decides whether
  P[v or more right] ≤ τ (`fdp_rejects`). (ε, δ)-DP is f-DP for the curve f_{ε,δ} (Dong, Roth & Su
  2022), so with that curve the recursion tests the same claim as Theorem 5.2, with no
  assumption on the mechanism's shape; with the Gaussian curve G_μ it tests μ-GDP instead.

Which guesses to make is fixed before the fit: for each score, the top k canaries are guessed in (and,
in a second rule, the bottom k out), k from `GUESS_COUNTS`; each such test is certified at
5%/(number of tests) (Bonferroni), so the largest bound among them holds at 95%. A test's ε bound is
the larger of the two bounds' at that level, and this costs no second correction: each bound rejects
only counts of right guesses at or above the least count it rejects, and caps the probability of
reaching that count below the level; so both together reject only at or above the lower of those two
counts, whose probability under the claim is the larger of the two caps.
The μ bound, the largest μ whose μ-GDP the f-DP recursion rejects on the same tests, is a statement of
its own at 95% (both statements together: 90%). It never decides the verdict: an (ε, δ)-DP mechanism,
DP-SGD's subsampled Gaussian among them, need not be μ-GDP for the μ whose Gaussian curve spends ε at δ.
Written by hand: each bound is a few lines of scipy. jax-privacy's `CanaryScoreAuditor` runs the f-DP
recursion only for Gaussian curves, over thresholds it chooses itself, and would bring JAX in; Meta's
PrivacyGuard also fixes the Gaussian curve; and no library runs this game on tabular generators.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from scipy import special, stats

from dpgym.data.encoding import TableEncoder, unit_space
from dpgym.privacy.budget import Budget
from dpgym.privacy.mechanisms import gaussian_epsilon
from dpgym.schema import Schema
from dpgym.specs import Capability

GUESS_COUNTS = (10, 30, 100, 300)
CONFIDENCE = 0.95


def p_value(canaries: int, guesses: int, correct: int, epsilon: float, delta: float) -> float:
    """The largest probability an (ε, δ)-DP mechanism allows of `correct` or more right among `guesses`
    guesses about `canaries` independent fair coins (Steinke et al. 2023, Thm. 5.2)."""
    if correct == 0:
        return 1.0
    accuracy = 1 / (1 + math.exp(-epsilon))
    tail = float(stats.binom.sf(correct - 1, guesses, accuracy))
    # α = max over i of P[correct − i ≤ Binomial < correct] / i
    below = stats.binom.pmf(np.arange(correct - 1, -1, -1), guesses, accuracy)
    alpha = float(np.max(np.cumsum(below) / np.arange(1, correct + 1)))
    return min(1.0, tail + 2 * canaries * delta * alpha)


def epsilon_lower(canaries: int, guesses: int, correct: int, delta: float, level: float) -> float:
    """The largest ε whose p-value is below `level` (0 when even ε = 0 explains the guesses)."""
    return _largest_rejected(lambda epsilon: p_value(canaries, guesses, correct, epsilon, delta) < level)


def fdp_rejects(inverse: Callable[[float], float], canaries: int, guesses: int, correct: int, level: float) -> bool:
    """Whether `correct` or more right among `guesses` guesses about `canaries` fair coins has probability
    at most `level` for every f-DP mechanism: Algorithm 3 of Mahloujifar, Melis & Chaudhuri (2024), whose
    Theorem 3.2 proves it. `inverse` is f̄⁻¹, the inverse of y ↦ 1 − f(y) for the trade-off curve f.

    Why the recursion: with p_j = P[exactly j right], a_i = Σ_{j≥i} j·p_j/m and b_i = Σ_{j≥i} (r−j)·p_j/m
    (r guesses) obey a_{i+1} ≤ 1 − f(b_i) (their Theorem 3.1: one canary's guess moves any event at most
    as f allows, averaged over the canaries by convexity) and a_i − a_{i+1} = i/(r−i)·(b_i − b_{i+1}).
    Supposing P[≥ v right] = τ′ ≥ τ starts the chain at a_v ≥ τ′v/m, b_v ≤ τ′(r−v)/m; stepping down with
    b_i = f̄⁻¹(a_{i+1}) gives lower bounds on every a_i and b_i (their Lemma A.4), which grow with τ′
    (Lemma A.5). Since a_i + b_i = (r/m)·P[≥ i right] ≤ r/m, a step past r/m refutes the supposition, and
    the count is rejected at level τ. Strict (the paper allows equality) and stopped at the first
    excess, so f̄⁻¹ is never read above 1."""
    total = guesses / canaries
    right, wrong = level * correct / canaries, level * (guesses - correct) / canaries
    for i in range(correct - 1, -1, -1):
        least = inverse(right)
        right += i / (guesses - i) * (least - wrong)
        wrong = least
        if right + wrong > total:
            return True
    return False


def dp_inverse(epsilon: float, delta: float) -> Callable[[float], float]:
    """f̄⁻¹ for (ε, δ)-DP's trade-off curve f(x) = max(0, 1 − δ − e^ε·x, e^−ε·(1 − δ − x)), exact for any
    (ε, δ)-DP mechanism: the least x with 1 − f(x) ≥ y."""
    grow, shrink = math.exp(epsilon), math.exp(-epsilon)
    return lambda y: max(0.0, (y - delta) * shrink, 1 - delta - grow * (1 - y))


def gaussian_inverse(mu: float) -> Callable[[float], float]:
    """f̄⁻¹ for μ-GDP's trade-off curve G_μ(x) = Φ(Φ⁻¹(1 − x) − μ): y ↦ Φ(Φ⁻¹(y) − μ)."""
    return lambda y: float(special.ndtr(special.ndtri(y) - mu))


def fdp_epsilon_lower(canaries: int, guesses: int, correct: int, delta: float, level: float) -> float:
    """The largest ε whose (ε, δ)-DP the f-DP recursion rejects at `level`: a bound on ε, like
    `epsilon_lower`, that assumes nothing about the mechanism's trade-off curve."""
    return _largest_rejected(lambda epsilon: fdp_rejects(dp_inverse(epsilon, delta), canaries, guesses, correct, level))


def mu_lower(canaries: int, guesses: int, correct: int, level: float) -> float:
    """The largest μ whose μ-GDP the f-DP recursion rejects at `level`: a bound on μ that holds only as a
    statement about Gaussian trade-off curves (module docstring)."""
    return _largest_rejected(lambda mu: fdp_rejects(gaussian_inverse(mu), canaries, guesses, correct, level))


def _largest_rejected(rejected: Callable[[float], bool]) -> float:
    """The largest parameter a test rejects, by doubling then bisecting; 0 when it rejects even 0. Valid
    because each test here is monotone (a larger ε or μ only loosens its cap on the tail), so the rejected
    parameters run from 0 up, and the result exceeds the true parameter only if the test rejects the
    true one."""
    if not rejected(0.0):
        return 0.0
    low, high = 0.0, 1.0
    while rejected(high):
        low, high = high, 2 * high
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if rejected(middle) else (low, middle)
    return low


def guess_rules(canaries: int) -> list[tuple[int, int]]:
    """(guessed in, guessed out) per rule: the top k in alone, and the top k in with the bottom k out."""
    counts = [k for k in GUESS_COUNTS if 2 * k <= canaries]
    return [(k, 0) for k in counts] + [(k, k) for k in counts]


def certify(scores: dict[str, np.ndarray], included: np.ndarray, delta: float) -> dict[str, Any]:
    """Every score under every guess rule, each at level (1 − CONFIDENCE)/(number of tests), by both
    bounds; the audit's bound is the best of them. Returns each attack's best test (for the report), with
    the bound that gave it ("steinke" or "f-dp") and its best μ bound, and the overall best."""
    canaries = len(included)
    rules = guess_rules(canaries)
    level = (1 - CONFIDENCE) / max(1, len(rules) * len(scores))
    attacks = {}
    for name, score in scores.items():
        order = np.argsort(-score, kind="stable")  # highest first: most likely in
        best, mu = None, 0.0
        for guessed_in, guessed_out in rules:
            top, bottom = order[:guessed_in], order[canaries - guessed_out:]
            correct = int(included[top].sum() + (~included[bottom]).sum())
            guesses = guessed_in + guessed_out
            steinke = epsilon_lower(canaries, guesses, correct, delta, level)
            f_dp = fdp_epsilon_lower(canaries, guesses, correct, delta, level)
            mu = max(mu, mu_lower(canaries, guesses, correct, level))
            if best is None or max(steinke, f_dp) > best["lower"]:
                threshold = float(score[top[-1]])
                predicted = score >= threshold
                best = {"lower": max(steinke, f_dp), "bound": "f-dp" if f_dp > steinke else "steinke",
                        "steinke": steinke, "f_dp": f_dp, "point": _accuracy_epsilon(correct, guesses),
                        "guessed_in": guessed_in, "guessed_out": guessed_out, "correct": correct,
                        "threshold": threshold, "orientation": 1,
                        "false_positives": int((predicted & ~included).sum()), "negatives": int((~included).sum()),
                        "false_negatives": int((~predicted & included).sum()), "positives": int(included.sum()),
                        "scores": [float(s) for s in score]}
        attacks[name] = {**best, "mu_lower": mu, "mu_lower_epsilon": gdp_epsilon(mu, delta)}
    chosen = max(attacks, key=lambda a: (attacks[a]["lower"], attacks[a]["point"]))
    return {"attack": chosen, "attacks": attacks, "level": level, "tests": len(rules) * len(scores)}


def gdp_epsilon(mu: float, delta: float) -> float:
    """The ε a μ-GDP mechanism spends at δ (the exact Gaussian conversion the re-accounting uses): what a μ
    bound means in ε if, and only if, the trade-off curve is Gaussian."""
    return gaussian_epsilon(delta, 1.0 / mu) if mu > 0 else 0.0


def _accuracy_epsilon(correct: int, guesses: int) -> float:
    """The ε of randomized response with the guesses' observed accuracy (no confidence: a point estimate)."""
    if correct * 2 <= guesses:
        return 0.0
    return math.inf if correct == guesses else math.log(correct / (guesses - correct))


# --- the canaries and the fit --------------------------------------------------------------------


def canary_records(schema: Schema, count: int, seed: int) -> pd.DataFrame:
    """`count` rows drawn uniformly from the public domain (module docstring)."""
    rng = np.random.default_rng(np.random.SeedSequence(entropy=seed, spawn_key=(2**31,)))
    columns = {}
    for c in schema.columns:
        if c.is_numeric:
            unit = rng.random(count)
            values = (c.min + np.expm1(unit * math.log1p(c.max - c.min)) if c.heavy_tailed
                      else c.min + unit * (c.max - c.min))
            values = np.clip(values, c.min, c.max)
            columns[c.name] = np.round(values) if c.kind == "integer" else values
        else:
            columns[c.name] = np.asarray(c.categories, dtype=object)[rng.integers(0, len(c.categories), count)]
    return schema.conform(pd.DataFrame(columns), "the audit's canaries")


def canary_coins(seed: int, count: int) -> np.ndarray:
    """Each canary's fair coin: in the training set or not."""
    return np.random.default_rng(np.random.SeedSequence(entropy=seed, spawn_key=(2**31 + 1,))).random(count) < 0.5


def nearest_distances(points: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each point's Euclidean distance to its nearest row."""
    from sklearn.neighbors import NearestNeighbors

    return NearestNeighbors(n_neighbors=1).fit(rows).kneighbors(points)[0][:, 0]


def run_fit(cell: Any, options: Any, train: pd.DataFrame, schema: Schema, spec: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The one fit: D plus the included canaries, the generator's unmodified fit (with gradient canaries
    switched on in the DP-SGD engine), a sample, and each attack's score of every canary."""
    from dpgym.privacy.canaries import gradient_canaries  # torch: only when a fit runs

    started = time.perf_counter()
    canaries = canary_records(schema, options.canaries, options.seed)
    included = canary_coins(options.seed, options.canaries)
    without = train.sample(n=options.audit_rows, random_state=options.seed)
    training = pd.concat([without, canaries[included]], ignore_index=True)
    training = training.sample(frac=1.0, random_state=options.seed).reset_index(drop=True)
    fit_seed, sample_seed = np.random.SeedSequence(entropy=options.seed, spawn_key=(2**31 + 2,)).generate_state(2)
    generator = spec.build(params)
    with gradient_canaries(included, int(fit_seed)) as gradients:
        ledger = generator.fit(training, schema, Budget(cell.epsilon, cell.delta), int(fit_seed))
    synthetic = schema.conform(generator.sample(options.sample_rows, int(sample_seed)), f"generator {spec.name!r}'s sample")
    encoder = TableEncoder(schema)
    scores = {"nearest": -nearest_distances(unit_space(canaries, encoder), unit_space(synthetic, encoder))}
    if Capability.LOG_PROB in spec.capabilities:
        log_prob = np.asarray(generator.log_prob(canaries), dtype=float)
        scores["log_prob"] = np.nan_to_num(log_prob, nan=-1e300, neginf=-1e300, posinf=1e300)
    if gradients.steps:
        scores["gradient"] = gradients.scores
    return {"fit": 0, "included": included.tolist(), "ledger_epsilon": ledger.epsilon,
            "seconds": time.perf_counter() - started, "dp_sgd_steps": gradients.steps,
            "scores": {name: [float(s) for s in score] for name, score in scores.items()}}


def analyse(record: dict[str, Any], delta: float) -> dict[str, Any]:
    """The audit's summary fields from the fit's record."""
    included = np.array(record["included"], dtype=bool)
    certified = certify({name: np.array(s) for name, s in record["scores"].items()}, included, delta)
    headline = certified["attacks"][certified["attack"]]
    mu_attack = max(certified["attacks"], key=lambda a: certified["attacks"][a]["mu_lower"])
    mu = certified["attacks"][mu_attack]
    return {"attack": certified["attack"], "epsilon_lower": headline["lower"], "bound": headline["bound"],
            "epsilon_point": headline["point"], "epsilon_interval": [headline["lower"], None],
            "mu_lower": mu["mu_lower"], "mu_lower_epsilon": mu["mu_lower_epsilon"], "mu_attack": mu_attack,
            "fits_done": 1, "attacks": certified["attacks"],
            "tests": certified["tests"], "test_level": certified["level"], "dp_sgd_steps": record["dp_sgd_steps"],
            "roc": {"labels": included.tolist(), "certifying": [True] * len(included)}}
