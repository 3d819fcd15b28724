"""CI regression check of a run against a committed baseline (`dpgym check`).

For every (generator, dataset, ε, δ) the baseline keeps each metric's per-seed values, the cell
failures, the guarantee label, the re-accounted ε and each seed's ledger (mechanisms and parameters).

- A metric regresses when it is worse than the baseline by more than its seed-to-seed spread
  allows: a one-sided Welch t-test at level `alpha` on the per-seed values. Identical code gives
  identical numbers on CPU, so a metric whose seeds agree exactly tolerates only float noise.
- Privacy regressions fail regardless of tolerance: a changed guarantee label, a higher
  re-accounted ε, changed mechanism parameters (e.g. a noise multiplier) at the same settings and
  seed, or a cell refused by the re-accounting.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from dpgym.data.datafiles import CHECKOUT
from dpgym.privacy.ledger import Ledger
from dpgym.results.records import CellRecord
from dpgym.results.store import RunStore
from dpgym.specs import Direction

BASELINE_FORMAT = "dpgym-baseline/3"
GROUP = ("generator", "dataset", "epsilon", "delta")
FLOAT_NOISE = 1e-9
# Ledger floats and re-accounted ε are compared to this relative precision. The accountants' numerics
# (FFTs and reductions whose last bits follow the CPU's SIMD path) differ between machines by up to
# ~2e-9 relative, which regula-falsi noise calibration carries into σ; any real change of mechanism
# (the gate's own test removes 10% of the noise) is orders of magnitude larger.
ACCOUNTING_PRECISION = 1e-6


@dataclass(frozen=True)
class Finding:
    kind: str  # "privacy", "regression", "improvement", "new"
    group: tuple[Any, ...]
    what: str
    baseline: str = ""
    now: str = ""
    tolerance: str = ""

    @property
    def fails(self) -> bool:
        return self.kind in ("privacy", "regression")


def _ledger_signature(ledger: Ledger | None) -> list[dict[str, Any]]:
    """What a cell's ledger ran, without what it claims: each entry's event and details."""
    return [{"event": e.event.to_dict(), "details": e.details} for e in ledger.entries] if ledger else []


def summarise(store: RunStore, results: list[CellRecord]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Per (generator, dataset, ε, δ): what the baseline records, from the run's cells."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for record in sorted(results, key=lambda r: r.cell.seed):
        cell = record.cell
        key = (cell.method, cell.dataset, str(cell.epsilon), cell.delta)
        group = groups.setdefault(key, {
            "generator": key[0], "dataset": key[1], "epsilon": key[2], "delta": key[3],
            "guarantee": record.method.guarantee, "seeds": [], "failures": 0,
            "privacy_refusals": 0, "reaccounted_epsilon": None, "ledgers": {}, "metrics": {},
        })
        group["seeds"].append(cell.seed)
        group["_guarantees"] = sorted({*group.get("_guarantees", []), record.method.guarantee})
        if not record.ok:
            group["failures"] += 1
            group["privacy_refusals"] += int(record.error is not None and record.error.stage == "privacy")
            continue
        reaccounted = record.privacy.reaccounted.epsilon if record.privacy else None
        if reaccounted is not None and math.isfinite(reaccounted):
            previous = group["reaccounted_epsilon"]
            group["reaccounted_epsilon"] = reaccounted if previous is None else max(previous, reaccounted)
        group["ledgers"][cell.seed] = _ledger_signature(store.ledger(cell.key))
        for name, value in (record.metrics or {}).items():
            group["metrics"].setdefault(name, []).append(value)
    return groups


def write_baseline(store: RunStore, results: list[CellRecord], path: Path, suite: str,
                   keys: set[str] | None = None) -> None:
    """The run as the new baseline, if it is whole (every cell of `keys`, its suite's, finished): a
    baseline holding failed or missing cells would let those pass every later check (a group without
    a ledger has nothing to compare)."""
    summary = summarise(store, results)
    missing = len(keys) - sum(len(g["seeds"]) for g in summary.values()) if keys is not None else 0
    if missing:
        raise ValueError(f"{store.root}: {missing} of the suite's {len(keys)} cells have not run; finish the run "
                         "before writing a baseline from it")
    failed = [f"{g['generator']} × {g['dataset']} × ε={g['epsilon']}" for g in summary.values() if g["failures"]]
    if failed:
        raise ValueError(f"{store.root}: cells failed in {', '.join(failed)}; a baseline must hold every cell's "
                         "values and ledger, so fix or re-run them (--retry-failed) first")
    groups = sorted(({**{k: v for k, v in g.items() if not k.startswith("_")},
                      "ledgers": [g["ledgers"][seed] for seed in g["seeds"]]} for g in summary.values()),
                    key=lambda g: (g["generator"], g["dataset"], g["epsilon"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": BASELINE_FORMAT, "suite": suite, "groups": groups}, indent=1,
                               sort_keys=True) + "\n")


BASELINE_GROUP_KEYS = ("generator", "dataset", "epsilon", "delta", "guarantee", "seeds", "failures",
                       "reaccounted_epsilon", "metrics")


def load_baseline(path: Path) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The baseline's groups, each with `ledgers` as {seed: ledger}."""
    raw = json.loads(path.read_text())
    found = raw.get("format") if isinstance(raw, dict) else None
    if isinstance(found, str) and found.startswith("dpgym-baseline/") and found != BASELINE_FORMAT:
        suite = raw.get("suite") if isinstance(raw.get("suite"), str) else "SUITE"
        raise ValueError(f"{path} is a {found} baseline, which this dpgym no longer reads (it reads "
                         f"{BASELINE_FORMAT}); regenerate it from a whole run of its suite: `dpgym run --suite "
                         f"{suite} --out RUN_DIR`, then `dpgym check RUN_DIR --baseline {path} --update`")
    if found != BASELINE_FORMAT:
        raise ValueError(f"{path} is not a {BASELINE_FORMAT} file")
    groups = raw.get("groups")
    if not isinstance(groups, list):
        raise ValueError(f"{path}: 'groups' must be a list of groups")
    for i, group in enumerate(groups):
        missing = [k for k in (*BASELINE_GROUP_KEYS, "ledgers") if not isinstance(group, dict) or k not in group]
        if missing:
            raise ValueError(f"{path}: group {i} lacks {missing}; rewrite the baseline with --update")
        malformed = [k for k, ok in (("seeds", isinstance(group["seeds"], list)),
                                     ("failures", isinstance(group["failures"], int)),
                                     ("metrics", isinstance(group["metrics"], dict)
                                      and all(isinstance(v, list) for v in group["metrics"].values())),
                                     ("ledgers", _well_formed_ledgers(group)))
                     if not ok]
        if malformed:
            raise ValueError(f"{path}: group {i} has malformed {malformed} (seeds and each metric a list of "
                             "per-seed values, failures a count, ledgers a list of entries per seed); rewrite it "
                             "with --update")
        group["ledgers"] = dict(zip(group["seeds"], group["ledgers"], strict=True))
    return {(g["generator"], g["dataset"], g["epsilon"], g["delta"]): g for g in groups}


def _well_formed_ledgers(group: dict[str, Any]) -> bool:
    ledgers = group["ledgers"]
    return (isinstance(ledgers, list) and isinstance(group["seeds"], list) and len(ledgers) == len(group["seeds"])
            and all(isinstance(entries, list) for entries in ledgers))


def _finite(values: list[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def _worse_by(base: list[float], now: list[float], direction: Direction, alpha: float) -> tuple[float, float]:
    """(how much worse `now` is than `base` in mean, the largest gap the seed spread explains)."""
    b, n = np.asarray(base, float), np.asarray(now, float)
    sign = 1.0 if direction is Direction.HIGHER else -1.0
    worse = sign * (b.mean() - n.mean())
    floor = FLOAT_NOISE * (1 + abs(b.mean()))
    if len(b) < 2 or len(n) < 2:
        return worse, floor
    vb, vn = b.var(ddof=1) / len(b), n.var(ddof=1) / len(n)
    se = math.sqrt(vb + vn)
    if se == 0:
        return worse, floor
    df = (vb + vn) ** 2 / ((vb**2 / (len(b) - 1) if vb else 0) + (vn**2 / (len(n) - 1) if vn else 0))
    return worse, max(floor, float(stats.t.isf(alpha, df)) * se)  # isf: 1 − alpha rounds to 1 for tiny alpha


def compare(baseline: dict[tuple[Any, ...], dict[str, Any]], current: dict[tuple[Any, ...], dict[str, Any]],
            directions: dict[str, Direction], alpha: float) -> list[Finding]:
    findings: list[Finding] = []
    for key, base in baseline.items():
        now = current.get(key)
        if now is None:
            findings.append(Finding("regression", key, "not run (in the baseline, missing from the run)"))
            continue
        findings.extend(_privacy_findings(key, base, now))
        if now["failures"] > base["failures"]:
            findings.append(Finding("regression", key, "failed cells", str(base["failures"]), str(now["failures"])))
        if len(now["seeds"]) < len(base["seeds"]):  # a cell missing from the run is no evidence either way
            findings.append(Finding("regression", key, "cells run", str(len(base["seeds"])), str(len(now["seeds"]))))
        for metric, raw_base in base["metrics"].items():
            raw_now = now["metrics"].get(metric) or []
            base_values, values = _finite(raw_base), _finite(raw_now)
            if len(raw_now) - len(values) > len(raw_base) - len(base_values):
                findings.append(Finding("regression", key, f"{metric} not a finite number in some seeds",
                                        str(len(raw_base) - len(base_values)), str(len(raw_now) - len(values))))
            if not values:
                if base_values:
                    findings.append(Finding("regression", key, metric, f"{np.mean(base_values):.4g}", "missing"))
                continue
            if len(values) < len(base_values):
                findings.append(Finding("regression", key, f"{metric} values", str(len(base_values)), str(len(values))))
            if not base_values:
                continue
            worse, tolerance = _worse_by(base_values, values, directions.get(metric, Direction.HIGHER), alpha)
            if abs(worse) > tolerance:
                findings.append(Finding("regression" if worse > 0 else "improvement", key, metric,
                                        f"{np.mean(base_values):.4g}", f"{np.mean(values):.4g}", f"±{tolerance:.2g}"))
    findings.extend(Finding("new", key, "not in the baseline") for key in current if key not in baseline)
    return findings


def _privacy_findings(key: tuple[Any, ...], base: dict[str, Any], now: dict[str, Any]) -> list[Finding]:
    out = []
    labels = now.get("_guarantees", [now["guarantee"]])  # every seed's: a change in any one is a change
    if labels != [base["guarantee"]]:
        out.append(Finding("privacy", key, "guarantee label changed", base["guarantee"], ", ".join(labels)))
    if now["privacy_refusals"]:
        out.append(Finding("privacy", key, "cells refused by the privacy re-accounting",
                           str(base.get("privacy_refusals", 0)), str(now["privacy_refusals"])))
    b_eps, n_eps = base["reaccounted_epsilon"], now["reaccounted_epsilon"]
    if b_eps is not None and n_eps is not None and n_eps > b_eps * (1 + ACCOUNTING_PRECISION) + FLOAT_NOISE:
        out.append(Finding("privacy", key, "re-accounted ε increased", f"{b_eps:.6g}", f"{n_eps:.6g}"))
    changed = [(seed, expected, ledger) for seed, ledger in sorted(now["ledgers"].items())
               if (expected := _expected_ledger(base["ledgers"], seed)) is not None
               and not same_ledger(expected, ledger)]
    if changed:
        seed, expected, ledger = changed[0]
        seeds = ", ".join(str(s) for s, _, _ in changed)
        out.append(Finding("privacy", key, "ledger mechanisms or parameters changed",
                           f"seed {seed}: {_describe_ledger(expected)}",
                           f"seed{'s' if len(changed) > 1 else ''} {seeds}; seed {seed}: {_describe_ledger(ledger)}"))
    return out


def _expected_ledger(base_ledgers: dict[Any, list[dict[str, Any]]], seed: Any) -> list[dict[str, Any]] | None:
    """The baseline's ledger for this seed. A seed the baseline did not run is held to the baseline's
    ledger only where that was the same in every seed (it did not depend on the seed); else nothing."""
    if seed in base_ledgers:
        return base_ledgers[seed]
    ledgers = list(base_ledgers.values())
    return ledgers[0] if ledgers and all(same_ledger(ledgers[0], other) for other in ledgers[1:]) else None


def same_ledger(a: Any, b: Any) -> bool:
    """Equal mechanisms and parameters, floats up to ACCOUNTING_PRECISION relative: a noise multiplier
    solved by root-finding differs in its last digits between machines, which is no change of mechanism."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, int | float) and isinstance(b, int | float) and math.isclose(a, b, rel_tol=ACCOUNTING_PRECISION)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_ledger(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_ledger(x, y) for x, y in zip(a, b))
    return a == b


def _describe_ledger(entries: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"{e['event']['type']}(" + ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
                                            for k, v in sorted({**e["event"], **e["details"]}.items())
                                            if k != "type") + ")"
        for e in entries
    )


RESULTS_DIR = CHECKOUT / "leaderboard" / "results"


def stale_results(findings: list[Finding], results_dir: Path = RESULTS_DIR) -> dict[str, list[str]]:
    """The committed results (leaderboard/results/<suite>/, docs/results.md) that hold a generator whose
    metrics moved beyond the gate's tolerance, either way, each with those generators: the change that
    moved them is to regenerate these too."""
    moved = {f.group[0] for f in findings if f.kind in ("regression", "improvement")}
    stale = {}
    for manifest in sorted(results_dir.glob("*/run.json")):
        suite = json.loads(manifest.read_text()).get("suite", {})
        names = {name for g in suite.get("generators", []) for name in (g["name"], g.get("label")) if name}
        hit = sorted(moved & names)
        if hit:
            stale[manifest.parent.name] = hit
    return stale

