"""The model code of `aim`, imported only when a cell uses it. The method, its defaults and where
they come from: the docstring of `dpgym.plugins.generators.aim`, which holds the spec."""

from __future__ import annotations

import itertools
import math
import time
from typing import TYPE_CHECKING

import numpy as np

from dpgym.plugins.marginal.generator import MarginalGenerator
from dpgym.plugins.marginal.model import (
    ESTIMATORS, Clique, Measurements, ModelMarginals, estimate, forget_compiled_estimates, marginal_counts, measure, model_domain,
    model_size_mb,
)
from dpgym.privacy import (
    ZcdpLedger, exponential_mechanism, gaussian_rho, gaussian_sigma, selection_epsilon, selection_rho,
)

if TYPE_CHECKING:
    import mbi

    from dpgym.plugins.marginal.mirror_descent import FittedModel

# Where a fit's CPU time goes (`AIM.phase_seconds_`): the model-size limit of each candidate, scoring
# the candidates and drawing one, Private-PGM's estimates, and the model's marginals after each.
PHASES = ("size limit", "scoring", "estimation", "projection")

# E‖N(0, σ²)ⁿ‖₁ = σ·n·√(2/π): the L1 error a measurement of n cells at noise σ is expected to have.
EXPECTED_ABSOLUTE_NOISE = math.sqrt(2 / math.pi)


class AIM(MarginalGenerator):
    """1-way marginals, then rounds that each draw the candidate the model approximates worst and
    measure it, until ρ is spent."""

    method = "AIM"

    def __init__(self, numeric_bins: int, estimation_iters: int, degree: int, max_cells: int, rounds_per_column: int,
                 measurement_share: float, max_model_size: float, round_tolerance: float = 0.0,
                 estimator: str = "numpy"):
        super().__init__(numeric_bins, estimation_iters)
        if not round_tolerance >= 0:
            raise ValueError(f"round_tolerance must be ≥ 0, got {round_tolerance}")
        if estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}")
        if degree < 1:
            raise ValueError(f"degree must be ≥ 1, got {degree}")
        if max_cells < 1:
            raise ValueError(f"max_cells must be ≥ 1, got {max_cells}")
        if rounds_per_column < 1:
            raise ValueError(f"rounds_per_column must be ≥ 1, got {rounds_per_column}")
        if not 0 < measurement_share < 1:
            raise ValueError(f"measurement_share must lie in (0, 1), got {measurement_share}")
        if max_model_size <= 0:
            raise ValueError(f"max_model_size must be > 0, got {max_model_size}")
        self.degree = degree
        self.max_cells = max_cells
        self.rounds_per_column = rounds_per_column
        self.measurement_share = measurement_share
        self.max_model_size = max_model_size
        self.round_tolerance = round_tolerance
        self.estimator = estimator

    def candidates(self, sizes: dict[str, int]) -> dict[Clique, float]:
        """Every marginal inside a workload marginal (all `degree`-way ones of at most `max_cells`
        cells, each of weight 1), with its weight: how many attributes it shares with the workload,
        Σ_s |r ∩ s| over workload marginals s."""
        degree = min(self.degree, len(sizes))
        workload = [w for w in itertools.combinations(sizes, degree) if math.prod(sizes[a] for a in w) <= self.max_cells]
        if not workload:
            raise ValueError(f"AIM: no {degree}-way marginal has at most max_cells={self.max_cells} cells, so the "
                             "workload is empty; raise max_cells or lower degree")
        # In the schema's column order, not a set's: the exponential mechanism picks a candidate by its
        # index, so an order that followed string hashing would make a seed's draws vary by process.
        closure = dict.fromkeys(r for w in workload for k in range(1, degree + 1) for r in itertools.combinations(w, k))
        closure.update(dict.fromkeys((name,) for name in sizes))  # every 1-way marginal is measured first
        return {r: float(sum(len(set(r) & set(w)) for w in workload)) for r in sorted(closure, key=len)}

    def _fit_model(self, cells: dict[str, np.ndarray], rho: float, ledger: ZcdpLedger,
                   rng: np.random.Generator) -> ModelMarginals:
        sizes = self.domain_.sizes
        domain = model_domain(sizes)
        candidates = self.candidates(sizes)
        answers = {r: marginal_counts(cells, sizes, r) for r in candidates}
        rounds = self.rounds_per_column * len(sizes)
        private = not math.isinf(rho)
        # Each of the planned rounds gets ρ/T: the share α measures, the rest selects.
        sigma = gaussian_sigma(self.measurement_share * rho / rounds)
        epsilon = selection_epsilon((1 - self.measurement_share) * rho / rounds)

        measurements = Measurements()
        for name in sizes:
            noisy = measure(answers[(name,)], sigma, rng)
            measurements.add((name,), noisy, sigma)
            ledger.measurement(sigma, f"AIM: 1-way marginal of {name!r}")
            self._released((name,), noisy, sigma)
        self.phase_seconds_ = dict.fromkeys(PHASES, 0.0)
        self.iterations_: list[int] = []  # each estimate's mirror-descent iterations (numpy estimator)
        clock = time.process_time()

        def lap(phase: str) -> None:
            nonlocal clock
            now = time.process_time()
            self.phase_seconds_[phase] += now - clock
            clock = now

        def refit(warm_start: FittedModel | None, tolerance: float) -> FittedModel:
            fitted = estimate(domain, measurements, self.estimation_iters, warm_start=warm_start, tolerance=tolerance,
                              estimator=self.estimator)
            self.iterations_.append(fitted.iterations)
            return fitted

        model = refit(None, self.round_tolerance)
        lap("estimation")
        marginals = ModelMarginals(model)
        lap("projection")

        round_number, final = 0, False
        while not final:
            round_number += 1
            if private:
                spent = ledger.rho
                final = rho - spent < 2 * (gaussian_rho(sigma) + selection_rho(epsilon))
                if final:  # what is left would not pay for two more rounds: spend it all on this one
                    sigma = gaussian_sigma(self.measurement_share * (rho - spent))
                    epsilon = selection_epsilon((1 - self.measurement_share) * (rho - spent))
                size_limit = self.max_model_size * (spent + gaussian_rho(sigma) + selection_rho(epsilon)) / rho
            else:  # a non-private run: the planned rounds with exact marginals and the best candidates
                final = round_number == rounds
                size_limit = self.max_model_size

            allowed = self.within_size_limit(candidates, model, domain, size_limit)
            lap("size limit")
            bias = EXPECTED_ABSOLUTE_NOISE * sigma
            estimates = marginals.project_many(list(allowed))
            scores = np.array([weight * (np.abs(answers[r] - estimates[r].ravel()).sum() - bias * answers[r].size)
                               for r, weight in allowed.items()])
            sensitivity = max(allowed.values())
            chosen = list(allowed)[exponential_mechanism(scores, epsilon, sensitivity, rng)]
            ledger.selection(epsilon, sensitivity, f"AIM round {round_number}: the worst-approximated candidate")
            if self.estimator == "mbi" and chosen not in measurements.precision:  # the compiled ones are done with
                forget_compiled_estimates()
            lap("scoring")
            noisy = measure(answers[chosen], sigma, rng)
            measurements.add(chosen, noisy, sigma)
            ledger.measurement(sigma, f"AIM round {round_number}: the selected marginal")
            self._released(chosen, noisy, sigma)

            model = refit(model, self.round_tolerance)
            lap("estimation")
            if final:
                break
            refitted = ModelMarginals(model)
            if private and np.abs(refitted.project(chosen) - marginals.project(chosen)).sum() <= bias * answers[chosen].size:
                # The measurement moved the model less than its noise: anneal, spending 4× per round.
                sigma, epsilon = sigma / 2, epsilon * 2
            marginals = refitted
            lap("projection")
        # As the reference implementation, Private-PGM runs once more after the last round, its full count.
        final_model = refit(model, 0.0)
        lap("estimation")
        return ModelMarginals(final_model)

    def within_size_limit(self, candidates: dict[Clique, float], model: FittedModel, domain: mbi.Domain,
                          size_limit: float) -> dict[Clique, float]:
        """The candidates the model can take: inside one of its cliques already, or keeping its size
        within the limit, which grows with the share of the budget spent."""
        return {r: weight for r, weight in candidates.items()
                if any(set(r) <= set(clique) for clique in model.cliques)
                or model_size_mb(domain, [*model.cliques, r]) <= size_limit}
