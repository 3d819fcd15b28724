"""dpgym: a benchmark harness for differentially private synthetic tabular data.

`dpgym.run`, `dpgym.open` and `dpgym.score` drive the benchmark from Python (`dpgym.api`); the rest of
this module is the plugin contract: the hooks, the specs a plugin returns, the public schema, and
the budget, ledger and privacy events a generator records. `dpgym.privacy` is the public privacy
toolkit (DP-SGD, accountants, calibration, zCDP) for plugins that run their own mechanisms.
Everything else under `dpgym`, `dpgym.plugins` included, is internal and may change without notice.

Every public name is declared once, in `__init__.pyi`, and its module loads on first use
(`lazy_loader`), so `import dpgym` costs milliseconds and `dpgym --help` answers at once.
"""

import lazy_loader

__version__ = "0.1.0"

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
