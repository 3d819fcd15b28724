"""The machinery shared by dpgym's marginal-based generators (MST, AIM, PrivBayes, PrivSyn).

These methods see a table as a few discrete attributes and measure some of its marginals (counts over
attribute combinations) with noise. MST and AIM fit a graphical model to the noisy counts with `mbi`
(Private-PGM), from which synthetic rows are drawn:

- `domain`: the public schema as a discrete domain, rows encoded into it and samples decoded back
  into values; nothing is learned from the rows.
- `model`: the Gaussian measurement of a marginal, `mbi` (JAX) estimation, the model's marginals
  read from its junction tree without recompiling per query, and i.i.d. sampling.

MST's and AIM's budgets, selections and ledgers are zCDP's, from the public privacy toolkit
(`dpgym.privacy`: `ZcdpLedger`, `total_rho`, `exponential_mechanism`).
- `generator`: what both generators do around their mechanisms (`fit` and `sample`).
- `mst`, `aim`: the two Private-PGM generators' model classes; their specs live in the light entry
  modules `dpgym.plugins.generators.mst` and `dpgym.plugins.generators.aim`.
- `privbayes`, `privsyn`: PrivBayes (a Bayesian network, pure ε-DP) and PrivSyn (DenseMarg, GUM), on
  the same schema domain without `mbi`; specs in `dpgym.plugins.generators.privbayes` and `.privsyn`.
- `draws`: one draw per row from rows of a weight table (both samplers use it).

Method notes: docs/methods/aim-mst.md, privbayes.md, privsyn.md.
"""
