"""DP-MoG: DP-EM for a Gaussian mixture (Park, Foulds, Chaudhuri & Welling, AISTATS 2017), the
baseline of DP-NF (docs/methods/dp-nf.md#dp-mog-baseline), with exact log_prob.

Rows are mapped into the unit ball by a public affine map (`dpgym.plugins.nn.space`). EM runs J
iterations from a data-independent start (Latin-hypercube means, Σ_k = I, uniform weights, as
the baseline's code). Each M-step is the baseline's MAP update under its Normal-inverse-Wishart prior
(m₀ = 0, κ₀ = 1.01, S₀ = 0.1·I, ν₀ = D + 1), computed from Gaussian-noised expected sufficient
statistics of the E-step, three releases per iteration (add/remove-one-row adjacency, ‖x‖₂ ≤ 1,
responsibilities r_i on the simplex, so ‖r_i‖₂ ≤ 1):

- soft counts N = Σ_i r_i ∈ ℝ^K: L2 sensitivity ‖r_i‖₂ ≤ 1;
- first moments S1_k = Σ_i r_ik x_i, all k jointly: ‖(r_ik x_i)_k‖₂ ≤ ‖r_i‖₂ ‖x_i‖₂ ≤ 1;
- second moments, the upper triangles of S2_k = Σ_i r_ik x_i x_iᵀ, all k jointly:
  Σ_{a≤b} (x_a x_b)² ≤ ‖x‖₂⁴ ≤ 1, so sensitivity 1 (the noise is mirrored to keep S2 symmetric).

Weights, means and covariances are then post-processing of the noisy statistics (counts floored,
means projected into the unit ball, covariance eigenvalues floored as in the baseline code). The
baseline instead noised w, m_k and Σ_k with scales set by the non-private soft counts N_k, which
is not a proven bound; this is the rigorous form of the same mechanism
and runs exactly J M-steps (no off-by-one). All 3J releases share one noise multiplier z, calibrated
before EM. By default (`accountant="exact"`) the 3J Gaussian releases compose exactly, as one
Gaussian of noise multiplier z/√(3J) (μ-GDP: Dong, Roth & Su 2019, Cor. 2), which is also how the
harness re-accounts them, so a cell spends its whole ε. The paper's curves are the options:
the moments accountant (`"rdp"`: RDP of the Gaussian, α/(2z²) per release, summed per order;
DP-MoG (MA)) and zCDP (`"zcdp"`: ρ = 3J/(2z²); DP-MoG (zCDP)), which spend 92% and 74% of ε = 1.

Defaults and where they come from ("tuned on" marks a value chosen from rows that a suite scores):
- components 3, iterations 10: the DP-NF paper's DP-MoG on Life Science (K = 3 "as per the original work",
  J = 10; docs/methods/dp-nf.md#dp-mog-baseline).
- eigen_floor 1e-3, initial_variance 1.0 (Σ_k = I): the baseline's code. The paper-dp-nf-2d suite overrides
  initial_variance with 0.1, a suite setting, not this default: chosen on public tuning data (`checkerboard`,
  which no benchmark suite scores) by the `tuning-2d` suite, its levers and rule written before it ran: 1.0,
  0.1 or 0.01 with K = 8 at ε = 1 over 3 seeds; 0.1 had the best mean held-out log-likelihood (−4.188,
  sd 0.007), 0.01 tied within its seed sd (−4.195, sd 0.058) and 1.0 lost (−4.497), and of the tied values
  0.1 is the closer to the baseline's code (docs/measurements.md#tuning-2d).
- scaling "ball": derived from the public schema (the sensitivities need ‖u‖₂ ≤ 1).
- accountant "exact": harness convention, the tightest composition the harness re-accounts
  (docs/privacy.md#fair-budgets).
"""

from __future__ import annotations

from dpgym import Capability, Deferred, GeneratorSpec, Guarantee, hookimpl


SPEC = GeneratorSpec(
    name="dp_mog",
    version="1",
    factory=Deferred("dpgym.plugins.generators.dp_mog.model:DPMoG"),
    guarantee=Guarantee.FORMAL,
    capabilities=frozenset({Capability.LOG_PROB}),  # numpy on the CPU: no device
    defaults={"components": 3, "iterations": 10, "accountant": "exact", "scaling": "ball",
              "eigen_floor": 1e-3, "initial_variance": 1.0},
    quick_params={"iterations": 2},
    description=("DP-EM Gaussian mixture (Park et al. 2017): noisy M-step sufficient statistics, exact log_prob; "
                 "models the numeric columns only, draws categorical ones uniformly from their public categories"),
)


@hookimpl
def dpgym_generators() -> list[GeneratorSpec]:
    return [SPEC]
