"""A stand-in for synthcity's plugin registry, for testing dpgym's adapter without synthcity's stack.

Its plugins "fit" by keeping the rows and "generate" a bootstrap of them: it tests the plumbing, not
a generator. Like the real AIM plugin, `aim` exposes the ρ its mechanism would spend as
`plugin.model.model.rho`. Every `get` call is appended to the file $FAKE_SYNTHCITY_LOG.
"""

import json
import os
from types import SimpleNamespace

from dpgym.privacy.mechanisms import zcdp_epsilon


def _rho_for(epsilon, delta):
    low, high = 0.0, epsilon
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if zcdp_epsilon(middle, delta) <= epsilon else (low, middle)
    return low


class _Plugin:
    def __init__(self, name, options):
        self.name, self.options, self.generated = name, options, 0

    def fit(self, frame):
        self.rows = frame
        if self.name == "aim":
            self.model = SimpleNamespace(model=SimpleNamespace(rho=_rho_for(self.options["epsilon"], self.options["delta"])))
        return self

    def generate(self, count):
        self.generated += 1
        assert self.generated == 1, "the adapter must release once, at fit"
        frame = self.rows.sample(count, replace=True, random_state=self.options["random_state"])
        return SimpleNamespace(dataframe=lambda: frame.reset_index(drop=True))


class Plugins:
    def get(self, name, **options):
        with open(os.environ["FAKE_SYNTHCITY_LOG"], "a") as log:
            log.write(json.dumps({"plugin": name, **options}) + "\n")
        return _Plugin(name, options)
