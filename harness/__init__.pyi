# The Python API and the plugin contract, each name once; `dpgym/__init__.py` loads them lazily from here.
from .api import Results, open, run, score
from .audit.learners import Finding
from .audit.statistics import clopper_pearson
from .data.cache import computed_once, digest
from .data.datafiles import (
    REPO_DATA,
    DatasetUnavailable,
    combined_checksum,
    data_root,
    files_availability,
    sha256_of,
    verified,
)
from .data.encoding import TableEncoder, levels, missing_rows
from .data.inference import PARQUET_SUFFIXES, UnreviewedSchemaWarning, read_table
from .data.splits import SplitError, split_rows
from .hookspecs import DPGYM_API_VERSION, hookimpl
from .privacy.budget import Budget, Guarantee
from .privacy.events import (
    Adjacency,
    EventError,
    ExponentialEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PrivacyEvent,
    SubsampledGaussianEvent,
    ZcdpEvent,
)
from .privacy.ledger import Ledger, LedgerEntry, PrivacyViolation
from .privacy.release import Measurement, Release
from .engine.isolation import Environment, isolated_spec
from .engine.threads import cell_threads
from .schema import Column, ColumnKind, Schema, SchemaError
from .specs import (
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
    ReleasingGenerator,
    SpecError,
    SpecLookup,
    Split,
)

__version__: str
