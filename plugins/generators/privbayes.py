"""PrivBayes (Zhang, Cormode, Procopiuc, Srivastava & Xiao, "PrivBayes: Private Data Release via
Bayesian Networks", ACM TODS 42(4), 2017): a Bayesian network over the table's attributes, its
structure and its conditional distributions each released under pure ε-DP.

The budget ε splits into ε₁ = β·ε for the structure and ε₂ = (1 − β)·ε for the conditionals:

1. structure: the first attribute is drawn uniformly at random (no row is read); then, d − 1 times,
   one (attribute, parents) pair is drawn with the exponential mechanism (ε₁/(d − 1) each) among
   every attribute not yet placed and each of its maximal parent sets among those placed, scored by
   the paper's R, half the L1 distance between the pair's joint counts and the product of their
   marginals (sensitivity 2 under add/remove, derived in docs/methods/privbayes.md);
2. which parent sets are candidates is the paper's θ-usefulness rule for general domains: a pair
   (X, Π) is a candidate when its joint table has at most n·ε₂ / (d·θ) cells (its average count is
   then at least θ times the Laplace scale of its noise), and Π is maximal, no other placed
   attribute fitting beside it (the paper's Algorithm 5). The degree k of the network is what this
   bound allows: a parent set of many small attributes or one of a large one;
3. conditionals: the d joint tables of (X, Π) get Laplace noise of scale d/ε₂ (L1 sensitivity 1 each
   under add/remove), negative counts are clipped and each parent configuration normalised;
4. rows are drawn ancestrally in the order the network was built.

The guarantee is pure ε-DP under add/remove-one-row adjacency with n public (docs/privacy.md), which
the θ-usefulness bound reads. The ledger holds d − 1 `exponential` entries and d `laplace` entries;
the harness re-accounts them by pure composition. The discrete domain comes from the public schema
only, as for `mst` (`dpgym.plugins.marginal.domain`). Method notes: docs/methods/privbayes.md.

Defaults and where they come from ("tuned on" marks a value chosen from rows that a suite scores):
- structure_share 0.3 (β) and usefulness 4 (θ): the paper's recommended values, also the defaults of
  the independent re-implementation daanknoors/synthetic_data_generation.
- the score R rather than mutual information: the paper's score for general domains, of lower
  sensitivity than mutual information.
- max_cells 10000: a cap on one joint table, so that a large or infinite ε (where θ-usefulness allows
  any table) stays in memory; AIM's reference implementation caps its workload marginals at the same
  10,000 cells. At ε = 1 on Adult the θ-usefulness bound (about 350 cells) is far below it.
- numeric_bins 100: chosen on `randhie` (public tuning data no benchmark suite scores) by the
  `tuning-privbayes` suite against 16 and 32 (docs/measurements.md#tuning-privbayes); 100 is also
  `mst`'s and `aim`'s discretization (private-pgm's Adult domain).
"""

from __future__ import annotations

from dpgym import Deferred, GeneratorSpec, Guarantee, hookimpl

DEFAULTS = {"numeric_bins": 100, "structure_share": 0.3, "usefulness": 4.0, "max_cells": 10000}

SPEC = GeneratorSpec(
    name="privbayes",
    version="1",
    factory=Deferred("dpgym.plugins.marginal.privbayes:PrivBayes"),
    guarantee=Guarantee.PURE,
    defaults=DEFAULTS,
    quick_params={"numeric_bins": 8},
    description="PrivBayes: a Bayesian network chosen by the exponential mechanism (score R, θ-useful parent "
                "sets) and Laplace-noised conditionals (pure ε-DP), sampled ancestrally.",
)


@hookimpl
def dpgym_generators() -> list[GeneratorSpec]:
    return [SPEC]
