"""synthcity's private generators, run inside `.venv-synthcity` by `dpgym.engine.isolation`.

This module is imported only in that environment (synthcity pins torch < 2.3 and numpy < 2): it
must not import dpgym. The host side, with the guarantee labels and the reasons for them, is
`plugins/generators/synthcity.py`; the contract is in `harness/engine/isolated_runner.py`.

Every plugin releases its synthetic table once, at fit (AIM's `generate` re-runs the whole
mechanism on the private rows, so sampling it twice would release twice); `sample` draws rows from
that table, which is post-processing. Values are clipped to the schema's public bounds and integer
columns rounded, also post-processing.
"""

import math
import pickle
import random

import numpy as np
import pandas as pd


def _read(train_csv, schema):
    discrete = {c["name"]: str for c in schema["columns"] if "categories" in c}
    return pd.read_csv(train_csv, dtype=discrete, keep_default_na=False, na_values=[""])


def _to_schema(frame, schema):
    """Post-processing: public bounds, integer rounding, category labels as text."""
    out = {}
    for column in schema["columns"]:
        values = frame[column["name"]]
        if "categories" in column:
            out[column["name"]] = values.astype(str)
            continue
        values = pd.to_numeric(values).clip(column["min"], column["max"])
        if column["kind"] == "integer":
            values = values.round().clip(math.ceil(column["min"]), math.floor(column["max"])).astype("int64")
        out[column["name"]] = values
    return pd.DataFrame(out)


def _seed(seed):
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _ledger(guarantee, entries):
    """A ledger in dpgym's format 2 (dpgym.privacy.ledger), written here without importing dpgym."""
    return {"format": "dpgym-ledger/2", "guarantee": guarantee, "composition": "basic", "entries": entries}


def _entry(event, epsilon, delta, accountant, description, details=None):
    """`event`: the privacy event's type and parameters (dpgym.privacy.events), add/remove adjacency."""
    return {"event": {**event, "adjacency": "add_remove"}, "epsilon": epsilon, "delta": delta, "accountant": accountant,
            "description": description, "details": details or {}}


def _not_private(description):
    return _ledger("none", [_entry({"type": "non_private"}, "inf", 0.0, "none", description)])


class SynthcityPlugin:
    """One synthcity plugin: how to build it from the budget, and what its ledger records."""

    def __init__(self, name, budget_arguments, ledger):
        self.name, self.budget_arguments, self.ledger = name, budget_arguments, ledger

    def fit(self, train_csv, schema, epsilon, delta, seed, params):
        from synthcity.plugins import Plugins

        if math.isinf(epsilon) and self.budget_arguments:
            raise ValueError("synthcity's {} needs a finite ε (it has no non-private mode)".format(self.name))
        frame = _read(train_csv, schema)
        _seed(seed)
        budget = {"epsilon": epsilon, "delta": delta}
        plugin = Plugins().get(self.name, random_state=seed % 2**32, device="cpu",
                               **{k: budget[k] for k in self.budget_arguments}, **params)
        plugin.fit(frame)
        released = _to_schema(plugin.generate(count=len(frame)).dataframe(), schema)
        return pickle.dumps(released), self.ledger(plugin, len(frame), epsilon, delta, params)

    def sample(self, model, n, seed):
        released = pickle.loads(model)
        rows = np.random.default_rng(seed).integers(0, len(released), n)
        return released.iloc[rows].to_dict("records")


def _aim_ledger(plugin, rows, epsilon, delta, params):
    """AIM composes all its Gaussian measurements and exponential selections in zCDP, within the ρ
    its Mechanism base class derives from (ε, δ); the harness converts ρ back independently."""
    return _ledger("nominal", [_entry(
        {"type": "zcdp", "rho": float(plugin.model.model.rho)}, epsilon, delta, "zCDP (private-pgm's cdp_rho)",
        "AIM: Gaussian measurements and exponential-mechanism selections composed in zCDP")])


def _dpgan_ledger(plugin, rows, epsilon, delta, params):
    """DP-SGD on the discriminator: the noise multiplier Opacus calibrated, every optimiser step."""
    from opacus.optimizers import DPOptimizer

    optimizer = next(m.optimizer for m in plugin.model.modules() if isinstance(getattr(m, "optimizer", None), DPOptimizer))
    batches = math.ceil(rows / params["batch_size"])
    return _ledger("nominal", [_entry(
        {"type": "subsampled_gaussian", "sample_rate": 1 / batches, "noise_multiplier": optimizer.noise_multiplier,
         "clip_norm": optimizer.max_grad_norm, "steps": params["n_iter"] * batches * params["discriminator_n_iter"]},
        epsilon, delta, "Opacus make_private_with_epsilon (RDP), as synthcity calibrates it",
        "discriminator steps, fixed-size shuffled batches (synthcity sets poisson_sampling=False)",
        {"clipping": "flat", "sampling": "shuffled fixed-size batches"})])


# One object per plugin, named as the host's adapter strings name them ("synthcity_adapter:aim").
aim = SynthcityPlugin("aim", ("epsilon", "delta"), _aim_ledger)
dpgan = SynthcityPlugin("dpgan", ("epsilon", "delta"), _dpgan_ledger)
privbayes = SynthcityPlugin("privbayes", ("epsilon",), lambda *_: _not_private(
    "synthcity PrivBayes: Laplace noise scaled for probabilities added to counts; domains from the rows"))
pategan = SynthcityPlugin("pategan", ("epsilon", "delta"), lambda *_: _not_private(
    "synthcity PATE-GAN: its student discriminator trains on the private rows"))
adsgan = SynthcityPlugin("adsgan", (), lambda *_: _not_private("ADS-GAN: no DP mechanism"))
