"""dpgym's core: the plugin contract, public schemas, privacy accounting, runner and leaderboard.

The harness imports no model code; generators, learners, datasets and metrics are plugins.
"""

from dpgym.hookspecs import DPGYM_API_VERSION, hookimpl
from dpgym.privacy import Budget, Guarantee, Ledger, LedgerEntry
from dpgym.schema import Column, ColumnKind, Schema, SchemaError
from dpgym.specs import (
    DatasetSpec,
    Direction,
    Generator,
    GeneratorSpec,
    Learner,
    LearnerSpec,
    MetricContext,
    MetricResult,
    MetricSpec,
    Split,
)

__version__ = "0.1.0"

__all__ = [
    "DPGYM_API_VERSION", "Budget", "Column", "ColumnKind", "DatasetSpec", "Direction", "Generator", "GeneratorSpec",
    "Guarantee", "Learner", "LearnerSpec", "Ledger", "LedgerEntry", "MetricContext", "MetricResult", "MetricSpec", "Schema",
    "SchemaError", "Split", "hookimpl",
]
