"""synthcity's private generators (optional), run in their own environment `.venv-synthcity`.

synthcity pins torch < 2.3 and numpy < 2, which cannot live beside dpgym's stack, so these
generators run through `dpgym.engine.isolation` in a separate environment that is never part of the
default install: create it with `bash scripts/setup-synthcity.sh` (or point DPGYM_SYNTHCITY_PYTHON
at an interpreter that has synthcity). Without it `dpgym list` marks them unavailable and their
cells fail with that command. The environment side is `plugins/isolated/synthcity_adapter.py`.

Guarantee labels, from reading synthcity's source (vanderschaarlab/synthcity, src/synthcity/plugins/):

- `synthcity_aim` — **nominal**. The mechanism (core/models/aim.py) composes Gaussian measurements
  and exponential selections in zCDP within ρ = cdp_rho(ε, δ), and its ledger re-accounts exactly;
  but TabularAIM.fit takes each column's domain size from the private rows (`X.nunique()`,
  core/models/tabular_aim.py), and its `generate` re-runs the whole mechanism on the private rows
  at every call (the adapter calls it once, at fit).
- `synthcity_dpgan` — **nominal**. DP-SGD on the discriminator through Opacus (core/models/gan.py),
  but with `poisson_sampling=False`, so the subsampled-Gaussian accounting Opacus calibrates with
  does not match the shuffled fixed-size batches it trains on; the tabular encoder (bounds, GMM
  modes, category sets) is fitted on the private rows (TabularGAN receives them). The ledger
  records the noise multiplier Opacus chose and every discriminator step (`discriminator_n_iter`
  steps per batch, which Opacus's calibration does not count: above 1 the cell is refused).
- `synthcity_privbayes` — **none**. plugin_privbayes.py adds Laplace noise of the scale PrivBayes
  derives for *probabilities*, 2(d−K)/(n·ε), to *counts* (its own comment says so): n times too
  little; noise only on combinations present in the rows; category sets and bins from the private
  rows (LabelEncoder, `pd.cut` over the private range), and numeric columns label-encoded on their
  distinct private values, so synthetic values are exact private values. No DP guarantee survives.
- `synthcity_pategan` — **none**. In plugin_pategan.py the student GAN is trained with
  `self.model.fit(X_train_enc, …)`, whose discriminator sees the private rows directly
  (core/models/gan.py); the encoder's bounds come from the private rows (synthcity issue #278); the
  `delta` argument is ignored (δ = 1/(n√n) from the private row count); the moments-accountant
  stopping rule is data-dependent and unprivatised.
- `synthcity_adsgan` — **none**: ADS-GAN has no DP mechanism (an identifiability penalty only).

Generators labelled `none` are ranked as non-private references, like `real`. All run on the CPU.
"""

from __future__ import annotations

from pathlib import Path

from dpgym import Environment, Guarantee, hookimpl, isolated_spec

SYNTHCITY = Environment(
    name="synthcity", python=".venv-synthcity/bin/python", env_var="DPGYM_SYNTHCITY_PYTHON",
    setup="bash scripts/setup-synthcity.sh", paths=(str(Path(__file__).resolve().parent.parent / "isolated"),),
    ready=".venv-synthcity/.dpgym-ready",
)
GAN = {"n_iter": 2000, "batch_size": 200, "lr": 1e-3}

SPECS = [
    isolated_spec("synthcity_aim", "1", "synthcity_adapter:aim", SYNTHCITY, Guarantee.NOMINAL,
                  {"degree": 2, "max_model_size": 80, "max_cells": 1000},
                  "synthcity AIM (private-pgm); domain sizes read from the private rows"),
    isolated_spec("synthcity_dpgan", "1", "synthcity_adapter:dpgan", SYNTHCITY, Guarantee.NOMINAL,
                  {**GAN, "discriminator_n_iter": 1, "dp_max_grad_norm": 2.0},
                  "synthcity DP-GAN (Opacus, non-Poisson batches; encoder fitted on the private rows)",
                  quick_params={"n_iter": 5}),
    isolated_spec("synthcity_privbayes", "1", "synthcity_adapter:privbayes", SYNTHCITY, Guarantee.NONE,
                  {"K": 0, "n_bins": 100}, "synthcity PrivBayes: not DP as implemented (noise n× too small)"),
    isolated_spec("synthcity_pategan", "1", "synthcity_adapter:pategan", SYNTHCITY, Guarantee.NONE,
                  {**GAN, "n_iter": 200, "n_teachers": 10, "lamda": 1e-3},
                  "synthcity PATE-GAN: not DP as implemented (student trains on the private rows)",
                  quick_params={"n_iter": 2}),
    isolated_spec("synthcity_adsgan", "1", "synthcity_adapter:adsgan", SYNTHCITY, Guarantee.NONE,
                  {**GAN, "n_iter": 10000, "lambda_identifiability_penalty": 0.1}, "synthcity ADS-GAN: not DP",
                  quick_params={"n_iter": 5}),
]


@hookimpl
def dpgym_generators():
    return SPECS
