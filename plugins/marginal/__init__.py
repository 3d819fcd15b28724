"""The select–measure–generate machinery shared by dpgym's marginal-based generators (MST, AIM).

These methods see a table as a few discrete attributes, measure some of its marginals (counts over
attribute combinations) with Gaussian noise, and fit a graphical model to the noisy counts with
`mbi` (Private-PGM), from which synthetic rows are drawn:

- `domain`: the public schema as a discrete domain, rows encoded into it and samples decoded back
  into values; nothing is learned from the rows.
- `model`: the Gaussian measurement of a marginal, `mbi` (JAX) estimation, the model's marginals
  read from its junction tree without recompiling per query, and i.i.d. sampling.

Their budgets, selections and ledgers are zCDP's, from the public privacy toolkit (`dpgym.privacy`:
`ZcdpLedger`, `total_rho`, `exponential_mechanism`).
- `generator`: what both generators do around their mechanisms (`fit` and `sample`).
- `mst`, `aim`: the two generators' model classes; their specs live in the light entry modules
  `dpgym.plugins.generators.mst` and `dpgym.plugins.generators.aim`.

Method notes: docs/methods/aim-mst.md.
"""
