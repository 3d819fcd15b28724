"""dpgym's public privacy toolkit, for plugins that run their own mechanisms: DP-SGD with Poisson
sampling and per-layer clipping rules, accountants and noise calibration, the Gaussian and
exponential mechanisms, and zCDP budgets. What a plugin records (budgets, ledgers, privacy events)
is the contract, exported by `dpgym` itself; re-accounting is the harness's, not part of either.

Every name is declared once, in `__init__.pyi`, and its module loads on first use (`lazy_loader`):
the accountants import scipy, prv-accountant and Opacus, DP-SGD torch.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
