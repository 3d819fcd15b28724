"""AIM (McKenna, Mullins, Sheldon & Miklau, "AIM: An Adaptive and Iterative Mechanism for
Differentially Private Synthetic Data", PVLDB 15(11), 2022): select–measure–generate that picks,
round after round, the workload marginal the current model approximates worst.

In zCDP, the total ρ calibrated so that its (ε, δ) conversion (`dpgym.privacy.zcdp_epsilon`) is the cell's ε:

1. measure every 1-way marginal with Gaussian noise σ (each round's σ, below);
2. each round, from the candidates (every marginal inside a workload marginal) that keep the model
   within its size limit, draw one with the exponential mechanism, scoring r by
   w_r·(‖M_r(D) − M_r(model)‖₁ − √(2/π)·σ·n_r) (n_r cells, weight w_r = Σ_s |r ∩ s| over workload
   marginals s, sensitivity max w_r); measure it with Gaussian noise σ; refit the model
   (Private-PGM's mirror descent, warm-started);
3. budget: T = 16·d planned rounds, each with ρ/T of which α = 0.9 measures (σ = √(T / (2αρ))) and
   1 − α selects (ε = √(8(1 − α)ρ / T)); when the model moved less than the measurement's expected
   noise (‖after − before‖₁ ≤ √(2/π)·σ·n_r) the round was too noisy to help, so σ halves and ε
   doubles (4× the budget per round); when what is left would not pay for two more rounds, the
   last round spends all of it. The model's size limit grows with the budget spent:
   max_model_size · ρ_used / ρ;
4. draw i.i.d. rows from the final model.

Every measurement is a `gaussian` ledger entry (L2 sensitivity 1 under add/remove), every
selection an `exponential` one (ε = 2βΔu); the harness re-accounts them by adding their ρ. The
number of rounds depends on the noisy answers (it is part of what the mechanism releases).

The model's marginals for every candidate are read in numpy from its junction tree, after one belief
propagation per round, every pair no clique holds from one walk of the tree per attribute
(`ModelMarginals.project_many`), not through `mbi`'s `project`, which compiles per query. The
discrete domain comes from the public schema only, as for `mst` (categories; `numeric_bins` bins over public bounds, log1p-spaced when `heavy_tailed`, one per value for small
integer ranges; a missing-value cell for nullable columns). Method notes: docs/methods/aim-mst.md.

Defaults and where they come from ("tuned on" marks a value chosen from rows that a suite scores):
- rounds_per_column 16 (T = 16·d), measurement_share 0.9 (α), max_model_size 80 (MB), the annealing
  rule and the initial 1-way measurements: the paper (Algorithm 1 and Section 6) and the authors'
  reference implementation (private-pgm, `mechanisms/aim.py`).
- degree 2, max_cells 10000 (the workload: every 2-way marginal of at most 10,000 cells, weight 1):
  the reference implementation's defaults; the paper's experiments also use 3-way workloads
  (`degree = 3`).
- estimation_iters 1000 (Private-PGM iterations per round, and once more after the last round): the
  reference implementation. round_tolerance 1e-4 (**dpgym**): a round's estimate, warm-started from
  the last, stops once the loss fell by at most 1e-4 of itself over each of two consecutive blocks
  of 50 iterations (`mbi`'s `tol` rule); 0 runs the full count every round. The estimate after
  the last round always runs the full count. estimator "numpy" (**dpgym**): Private-PGM's mirror
  descent, `mbi`'s steps in numpy, which compiles nothing; "mbi" is `mbi`'s JAX estimator, which
  compiles a program for each new set of measured cliques and runs wherever JAX does (a GPU with a
  CUDA jaxlib: untested here).
- numeric_bins 100: the authors' discretization of Adult in private-pgm (`data/adult-domain.json`), as
  for `mst`, whose docstring says more.

Cost: each round's iterations take time in proportion to the model's size, which the limit lets
grow with the budget spent. On Adult at ε = 1 a fit took 1–2 CPU-minutes with the numpy
estimator (about 9 with `mbi`'s, which compiles every round; docs/measurements.md#aim-estimator); at
ε = 4 the model reaches 10 MB by round 40 of 240, and with `mbi` a fit took on the order of a CPU-day
(docs/measurements.md#marginal). `max_model_size` and `estimation_iters` trade that time for accuracy.
"""

from __future__ import annotations

from dpgym import Capability, Deferred, GeneratorSpec, Guarantee, hookimpl

DEFAULTS = {
    "numeric_bins": 100,
    "degree": 2,
    "max_cells": 10000,
    "rounds_per_column": 16,
    "measurement_share": 0.9,
    "max_model_size": 80.0,
    "estimation_iters": 1000,
    "round_tolerance": 1e-4,
    "estimator": "numpy",
}

SPEC = GeneratorSpec(
    name="aim",
    version="2",
    factory=Deferred("dpgym.plugins.marginal.aim:AIM"),
    guarantee=Guarantee.FORMAL,
    defaults=DEFAULTS,
    capabilities=frozenset({Capability.RELEASE}),
    quick_params={"numeric_bins": 8, "rounds_per_column": 2, "estimation_iters": 50},
    description="AIM: adaptive rounds measuring the worst-approximated workload marginal (exponential "
                "mechanism, budget annealing, zCDP), a Private-PGM model sampled i.i.d.",
)


@hookimpl
def dpgym_generators() -> list[GeneratorSpec]:
    return [SPEC]
