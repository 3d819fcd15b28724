"""DP-MERF (Harder, Adamczewski & Park, AISTATS 2021): release the class-conditional mean
embeddings of the data under random features once with the Gaussian mechanism, then train a
generator to match them (post-processing: no further privacy cost).

Feature map (the reference tabular code's kernel for mixed data, on our public encoding): numbers
are min-max scaled by the schema's public bounds and categories one-hot encoded (`TableEncoder`);
with p numeric and c categorical feature columns,

    φ(x) = [ √(2/D)·cos(Ω x_num), √(2/D)·sin(Ω x_num),  x_cat / √c ],   Ω ∈ R^{D/2 × p}, Ω_ij ~ N(0, 1/ℓ²)

i.e. D random Fourier features of the Gaussian kernel exp(−‖x−x'‖²/2ℓ²) on the numbers (Rahimi &
Recht 2007) plus a linear kernel on the one-hot categories. ‖φ(x)‖₂ is the same for every row:
the D/2 (cos, sin) pairs give Σ (2/D)(cos² + sin²) = 1, and the c one-hot blocks give c·(1/c) = 1,
so ‖φ(x)‖₂² = [p > 0] + [c > 0] =: B ≤ 2. A nullable column's missing value keeps this: a discrete
column's is one more slot of its block, a number's a [present, missing] block counted among the c.

Bandwidth ℓ (no private row is looked at; the reference code took the median distance of 10
"discarded" training rows, for free): the root-mean-square distance between two independent
points drawn uniformly from the public domain of the encoded numbers, [0, 1]^p, which is
ℓ² = E‖u − u'‖² = p/6 (each coordinate contributes E(u − u')² = 1/6). It is the median heuristic
applied to the public domain instead of the data. A number for `bandwidth` overrides it (it must
itself be public).

Released statistic, one Gaussian mechanism (Balle & Wang 2018 analytic calibration): with K
classes (the schema's discrete target; K = 1 without one) and y_i the one-hot class of row i,

    R(X) = ( S, m ),   S = Σ_i φ(x_i) y_iᵀ ∈ R^{F×K},   m = Σ_i y_i ∈ R^K   (the class counts).

Sensitivity under add/remove-one-row adjacency (n is private, so sums, not means): adding row
(x, y) adds φ(x) yᵀ to S and y to m, hence ‖R(X ∪ {r}) − R(X)‖₂² = ‖φ(x)‖₂²‖y‖₂² + ‖y‖₂² = B + 1,
so Δ₂ = √(B + 1) (√3 for a table with numbers and categories). Both parts get N(0, σ²) with
σ = Δ₂ · calibrate_gaussian(ε, δ): one ledger entry `gaussian` (l2_sensitivity Δ₂, sigma σ)
spends the whole budget. Per-class mean embeddings μ_k = S_k / max(m̂_k, 1) and class proportions
m̂ / Σm̂ are computed from the noisy release (post-processing).

Generator (as in the reference code): input 10 Gaussian noise dims and the class, two hidden
layers of 4d and 2d units with batch norm and ReLU, output of width d (the encoded width); then a
sigmoid per number and a softmax per categorical block. Loss Σ_k ‖μ_k − mean φ(G(z, k))‖² on
batches with classes in the released proportions; Adam, learning rate 1e-2, 200 iterations on
batches of 3,000 rows (the reference: 200 epochs of one batch of 0.1·n; n is private, so a fixed size).

Defaults and where they come from ("tuned on" marks a value chosen from rows that a suite scores):
- num_features 2000, iterations 200, learning_rate 1e-2, noise_dim 10: the reference tabular code
  (ParkLabML/DP-MERF; its 200 epochs become 200 iterations).
- bandwidth None: the public rule above, derived from the schema (the reference code's median heuristic read
  private rows).
- batch_size 3000: a fixed size in place of the reference's 0.1·n; why 3,000: not recorded.
- device "auto": set by the harness. There is no accountant choice: one Gaussian release, calibrated exactly.
"""

from __future__ import annotations

from dpgym import Capability, Deferred, GeneratorSpec, Guarantee, hookimpl


SPEC = GeneratorSpec(
    name="dp_merf",
    version="1",
    factory=Deferred("dpgym.plugins.generators.dp_merf.model:DPMERF"),
    guarantee=Guarantee.FORMAL,
    capabilities=frozenset({Capability.DEVICE}),
    defaults={"num_features": 2000, "bandwidth": None, "iterations": 200, "batch_size": 3000,
              "learning_rate": 1e-2, "noise_dim": 10},
    quick_params={"num_features": 64, "iterations": 5, "batch_size": 64},
    description="DP-MERF: random-feature mean embeddings per class, one Gaussian release, generator matched to it",
)


@hookimpl
def dpgym_generators() -> list[GeneratorSpec]:
    return [SPEC]
