"""dpgym: a benchmark harness for differentially private synthetic tabular data.

This module is the whole public API a plugin needs; everything else under `dpgym` is internal and
may change without notice. Only the hooks, budgets and ledgers are imported at once; every other
name loads its module on first use (the specs and schema pull in pandas, DP-SGD torch and Opacus,
the accountants scipy and prv-accountant), so `import dpgym` costs milliseconds and `dpgym --help`
answers at once. The first-party plugins live in `dpgym.plugins` and use only this API.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dpgym.hookspecs import DPGYM_API_VERSION, hookimpl
from dpgym.privacy import Budget, Guarantee, Ledger, LedgerEntry, PrivacyViolation

__version__ = "0.1.0"

# Public names whose modules load on first use: name -> module.
_LAZY = {
    # the contract's data types (pandas): schemas and the plugin specs
    **dict.fromkeys(["Column", "ColumnKind", "Schema", "SchemaError"], "dpgym.schema"),
    **dict.fromkeys(["AuditedLearner", "Capability", "CellInfo", "CellResult", "DatasetSpec", "Deferred", "DensityModel",
                     "Direction", "Generator", "GeneratorSpec", "Learner", "LearnerSpec", "MetricContext",
                     "MetricResult", "MetricSpec", "Model", "SpecError", "SpecLookup", "Split"], "dpgym.specs"),
    # calibration of one Gaussian release, and the independent re-accounting (scipy, prv-accountant)
    "calibrate_gaussian": "dpgym.privacy.mechanisms", "gaussian_epsilon": "dpgym.privacy.mechanisms",
    "Reaccounting": "dpgym.privacy.reaccount", "reaccount": "dpgym.privacy.reaccount",
    # DP-SGD (torch, Opacus): the engine, and per-layer gradient rules for layers Opacus lacks
    "DPSGD": "dpgym.privacy.dpsgd", "PrivatePhase": "dpgym.privacy.dpsgd",
    "LayerGrad": "dpgym.privacy.clipping", "OuterProductGrad": "dpgym.privacy.clipping",
    "MaterializedGrad": "dpgym.privacy.clipping", "register_fast_rule": "dpgym.privacy.clipping",
    "opacus_rule": "dpgym.privacy.clipping", "prefix_structure": "dpgym.privacy.clipping",
    "finite_examples": "dpgym.privacy.clipping", "zero_examples": "dpgym.privacy.clipping",
    # accountants (Opacus) for calibrating subsampled-Gaussian compositions
    "Accountant": "dpgym.privacy.accountants", "Phase": "dpgym.privacy.accountants",
    "RDPAccountant": "dpgym.privacy.accountants", "GDPAccountant": "dpgym.privacy.accountants",
    "PRVAccountant": "dpgym.privacy.accountants", "make_accountant": "dpgym.privacy.accountants",
    "RDP_CONVERSIONS": "dpgym.privacy.accountants", "calibrate": "dpgym.privacy.accountants",
    "calibrate_noise_multiplier": "dpgym.privacy.accountants",
    # exact δ(ε) of one Gaussian release, and the ε of a ρ-zCDP mechanism
    "gaussian_delta": "dpgym.privacy.mechanisms", "zcdp_epsilon": "dpgym.privacy.reaccount",
    # schema-driven encoders that learn nothing from the rows
    "TableEncoder": "dpgym.encoding", "levels": "dpgym.encoding", "missing_rows": "dpgym.encoding",
    # data files: vendored or user-provided, verified by checksum
    "REPO_DATA": "dpgym.datafiles", "DatasetUnavailable": "dpgym.datafiles", "data_root": "dpgym.datafiles",
    "sha256_of": "dpgym.datafiles", "verified": "dpgym.datafiles", "files_availability": "dpgym.datafiles",
    "combined_checksum": "dpgym.datafiles",
    "read_table": "dpgym.inference", "PARQUET_SUFFIXES": "dpgym.inference",
    "UnreviewedSchemaWarning": "dpgym.inference",
    # generators that run in an environment of their own
    "Environment": "dpgym.isolation", "isolated_spec": "dpgym.isolation",
    # audit findings and their confidence intervals
    "Finding": "dpgym.audit", "clopper_pearson": "dpgym.audit",
    # the CPU threads a cell may use
    "cell_threads": "dpgym.threads",
    # arrays that depend on the real rows and a seed but not on the generator, computed once per entry
    "computed_once": "dpgym.cache", "digest": "dpgym.cache",
}

__all__ = ["DPGYM_API_VERSION", "Budget", "Guarantee", "Ledger", "LedgerEntry", "PrivacyViolation", "hookimpl", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dpgym' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


if TYPE_CHECKING:
    from dpgym.privacy.mechanisms import calibrate_gaussian, gaussian_epsilon
    from dpgym.privacy.reaccount import Reaccounting, reaccount
    from dpgym.schema import Column, ColumnKind, Schema, SchemaError
    from dpgym.specs import (
        AuditedLearner,
        Capability,
        CellInfo,
        CellResult,
        DatasetSpec,
        Deferred,
        DensityModel,
        Direction,
        Generator,
        GeneratorSpec,
        Learner,
        LearnerSpec,
        MetricContext,
        MetricResult,
        MetricSpec,
        Model,
        SpecError,
        SpecLookup,
        Split,
    )
    from dpgym.audit import Finding, clopper_pearson
    from dpgym.cache import computed_once, digest
    from dpgym.datafiles import (
        REPO_DATA,
        DatasetUnavailable,
        combined_checksum,
        data_root,
        files_availability,
        sha256_of,
        verified,
    )
    from dpgym.encoding import TableEncoder, levels, missing_rows
    from dpgym.inference import PARQUET_SUFFIXES, UnreviewedSchemaWarning, read_table
    from dpgym.isolation import Environment, isolated_spec
    from dpgym.privacy.accountants import (
        RDP_CONVERSIONS,
        Accountant,
        GDPAccountant,
        Phase,
        PRVAccountant,
        RDPAccountant,
        calibrate,
        calibrate_noise_multiplier,
        make_accountant,
    )
    from dpgym.privacy.clipping import (
        LayerGrad,
        MaterializedGrad,
        OuterProductGrad,
        finite_examples,
        opacus_rule,
        prefix_structure,
        register_fast_rule,
        zero_examples,
    )
    from dpgym.privacy.dpsgd import DPSGD, PrivatePhase
    from dpgym.privacy.mechanisms import gaussian_delta
    from dpgym.privacy.reaccount import zcdp_epsilon
    from dpgym.threads import cell_threads
