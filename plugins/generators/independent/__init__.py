"""Independent DP marginals: a noisy histogram per column on its public domain, sampled column by
column. A real DP baseline: it keeps every marginal and no dependence between columns.

With ``given_target`` (the default when the schema names a target) each feature's histogram is
taken within each target class, so the synthetic rows keep every feature–label marginal — a DP
naive-Bayes synthesizer, the simplest baseline whose synthetic data can train a classifier.

All d histograms (d columns) are released at once. Under add/remove-one-row adjacency one row
changes one count in each histogram by 1, so the joint release has L1 sensitivity d and L2
sensitivity √d; the Gaussian mechanism (analytic calibration, Balle & Wang 2018) or the Laplace
mechanism adds the same noise to every count, which splits the budget evenly across columns.

Defaults and where they come from ("tuned on" marks a value chosen from rows that a suite scores):
- mechanism "gaussian": the analytic Gaussian, calibrated exactly to (ε, δ) (docs/privacy.md#fair-budgets); why
  it rather than Laplace: not recorded beyond the sensitivities above (√d against d).
- numeric_bins 32: not recorded.
- given_target True: a design choice, not a tuned one: the synthetic rows keep every feature–label marginal, so
  a classifier can learn from them (above).
"""

from __future__ import annotations

from dpgym import Capability, Deferred, GeneratorSpec, Guarantee, hookimpl


SPEC = GeneratorSpec(
    name="independent",
    version="2",
    factory=Deferred("dpgym.plugins.generators.independent.model:Independent"),
    guarantee=Guarantee.FORMAL,
    defaults={"mechanism": "gaussian", "numeric_bins": 32, "given_target": True},
    capabilities=frozenset({Capability.RELEASE}),
    description="DP histograms of every column on its public domain (per target class by default), sampled independently",
)


@hookimpl
def dpgym_generators() -> list[GeneratorSpec]:
    return [SPEC]
