"""A cell's result, typed: what `result.json` holds, as the harness builds it while the cell runs and
reads it back afterwards.

The JSON is format 2 (`RESULT_FORMAT`): a cell's identity, its method and dataset, its budget and
seeds, then what happened (status, timings, privacy, metrics, error). Format 1 (which called every
method a "generator") is still read, and upgraded as it is read. The cell's ledger travels with its
record (`CellRecord.ledger`) from the process that ran it to the store, which writes it to
ledger.json beside result.json.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

from dpgym.privacy.ledger import Ledger, Reaccounting
from dpgym.specs import CellInfo

RESULT_FORMAT = "dpgym-result/2"
SCORED = "scored"  # the method kind of synthetic rows made elsewhere (`dpgym score`): no ledger, never ranked
RESULT_FORMAT_1 = "dpgym-result/1"


class Status(enum.StrEnum):
    """What the runner writes; a status an older dpgym wrote (e.g. "timeout") reads as it is, a failure."""

    RUNNING = "running"  # only while the cell runs; never stored
    OK = "ok"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"  # the dataset's files are not on this machine: nobody's fault


def _json_epsilon(value: float) -> float | str:
    return "inf" if math.isinf(value) else value


@dataclass
class MethodRecord:
    """The generator or learner a cell ran, with its hyper-parameters (defaults filled in)."""

    kind: str
    name: str
    label: str
    version: str
    package: str
    guarantee: str
    params: dict[str, Any]
    guarantee_reason: str = ""  # why the harness lowered the declared guarantee, if it did

    def to_dict(self) -> dict[str, Any]:
        raw = {"kind": self.kind, "name": self.name, "label": self.label, "version": self.version,
               "package": self.package, "guarantee": self.guarantee, "params": self.params}
        return {**raw, "guarantee_reason": self.guarantee_reason} if self.guarantee_reason else raw

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> MethodRecord:
        return cls(raw.get("kind", "generator"), raw.get("name", ""), raw.get("label", raw.get("name", "")),
                   raw.get("version", ""), raw.get("package", ""), raw.get("guarantee", ""), raw.get("params", {}),
                   raw.get("guarantee_reason", ""))


@dataclass
class DatasetRecord:
    name: str
    version: str
    checksum: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "checksum": self.checksum}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> DatasetRecord:
        return cls(raw.get("name", ""), raw.get("version", ""), raw.get("checksum", ""))


@dataclass
class Timings:
    """Wall-clock seconds of each stage the cell reached, and of the whole cell."""

    load_seconds: float | None = None
    fit_seconds: float | None = None
    sample_seconds: float | None = None
    evaluate_seconds: float | None = None
    audit_seconds: float | None = None
    total_seconds: float | None = None

    def to_dict(self) -> dict[str, float]:
        return {name: value for name, value in self.__dict__.items() if value is not None}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Timings:
        return cls(**{name: float(value) for name, value in raw.items() if name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class PrivacyRecord:
    """What the ledger claims, and the harness's independent re-accounting of it."""

    claimed_epsilon: float
    claimed_delta: float
    composition: str
    reaccounted: Reaccounting

    def to_dict(self) -> dict[str, Any]:
        return {"claimed_epsilon": _json_epsilon(self.claimed_epsilon), "claimed_delta": self.claimed_delta,
                "composition": self.composition, "reaccounted": self.reaccounted.to_dict()}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> PrivacyRecord:
        return cls(float(raw.get("claimed_epsilon", math.nan)), float(raw.get("claimed_delta", math.nan)),
                   raw.get("composition", "basic"), Reaccounting.from_dict(raw.get("reaccounted", {})))
        # float("inf") reads the "inf" written for ∞


@dataclass(frozen=True)
class ErrorRecord:
    """Where a cell failed (its stage), with what exception."""

    stage: str
    type: str
    message: str
    traceback: str = ""
    reason: str = ""  # why the worker stopped a cell it ran ("timeout", "memory", "crashed (signal …)")

    def to_dict(self) -> dict[str, Any]:
        optional = {"traceback": self.traceback, "reason": self.reason}
        return {"stage": self.stage, "type": self.type, "message": self.message,
                **{name: value for name, value in optional.items() if value}}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ErrorRecord:
        return cls(raw.get("stage", "?"), raw.get("type", "?"), raw.get("message", ""), raw.get("traceback", ""),
                   raw.get("reason", ""))

    def summary(self) -> str:
        return f"{self.stage}: {self.type}: {self.message}"


@dataclass
class CellRecord:
    """One cell's result.json."""

    task: str  # "synthetic_data" or "private_learning"
    cell: CellInfo
    method: MethodRecord
    dataset: DatasetRecord
    budget: dict[str, Any]  # as `Budget.to_dict` writes it
    seeds: dict[str, int]
    status: str = Status.RUNNING
    device: str = "cpu"
    timings: Timings = field(default_factory=Timings)
    warnings: list[str] = field(default_factory=list)
    peak_rss_mb: float = 0.0
    peak_gpu_mb: float | None = None
    execution: dict[str, Any] | None = None  # the worker process that ran it (pid, host, threads, CPU time)
    privacy: PrivacyRecord | None = None
    metrics: dict[str, float] | None = None
    metric_detail: dict[str, Any] | None = None
    audit: dict[str, Any] | None = None  # a private learner's plausibility audit (dpgym.audit.learners)
    error: ErrorRecord | None = None
    ledger: Ledger | None = field(default=None, compare=False)  # written to ledger.json, not result.json

    @property
    def key(self) -> str:
        return self.cell.key

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    def ledger_file(self) -> dict[str, Any] | None:
        """ledger.json: the ledger, the cell's budget and the harness's re-accounting of it."""
        if self.ledger is None:
            return None
        reaccounted = {"reaccounted": self.privacy.reaccounted.to_dict()} if self.privacy else {}
        return {**self.ledger.to_dict(), "budget": self.budget, **reaccounted}

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "format": RESULT_FORMAT, "task": self.task, "cell": self.cell.to_dict(), "method": self.method.to_dict(),
            "dataset": self.dataset.to_dict(), "budget": self.budget, "seeds": self.seeds, "device": self.device,
            "timings": self.timings.to_dict(), "warnings": self.warnings, "status": str(self.status),
            "peak_rss_mb": self.peak_rss_mb,
        }
        optional = {"peak_gpu_mb": self.peak_gpu_mb, "execution": self.execution,
                    "privacy": self.privacy.to_dict() if self.privacy else None, "metrics": self.metrics,
                    "metric_detail": self.metric_detail, "audit": self.audit,
                    "error": self.error.to_dict() if self.error else None}
        return raw | {name: value for name, value in optional.items() if value is not None}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> CellRecord:
        raw = upgraded(raw)
        return cls(
            task=raw.get("task", "synthetic_data"), cell=CellInfo.from_dict(raw["cell"]),
            method=MethodRecord.from_dict(raw.get("method", {})), dataset=DatasetRecord.from_dict(raw.get("dataset", {})),
            budget=raw.get("budget", {}), seeds=raw.get("seeds", {}), status=str(raw["status"]),
            device=raw.get("device", "cpu"), timings=Timings.from_dict(raw.get("timings", {})),
            warnings=list(raw.get("warnings", [])), peak_rss_mb=float(raw.get("peak_rss_mb", 0.0)),
            peak_gpu_mb=raw.get("peak_gpu_mb"), execution=raw.get("execution"),
            privacy=PrivacyRecord.from_dict(raw["privacy"]) if raw.get("privacy") else None,
            metrics=raw.get("metrics"), metric_detail=raw.get("metric_detail"), audit=raw.get("audit"),
            error=ErrorRecord.from_dict(raw["error"]) if raw.get("error") else None)


def upgraded(result: dict[str, Any]) -> dict[str, Any]:
    """A stored result in the current format: one of format 1 gets its method's kind (from its task)
    and has its "generator" entries renamed "method"; nothing else differs."""
    if result.get("format") != RESULT_FORMAT_1:
        return result
    kind = "learner" if result.get("task") == "private_learning" else "generator"
    cell = {("method" if name == "generator" else name): value for name, value in result["cell"].items()}
    method = {"kind": kind, **result.get("generator", {})}
    return {**{name: value for name, value in result.items() if name != "generator"}, "format": RESULT_FORMAT,
            "cell": {"key": cell.get("key", ""), "kind": kind, **cell}, "method": method}
