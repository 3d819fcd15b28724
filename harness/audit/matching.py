"""Which audit speaks for which leaderboard row: an audit tested the mechanism a row's cells ran when
their identities match (`audit_identity`)."""

from __future__ import annotations

import json
from typing import Any

from dpgym.results.records import CellRecord


def audit_identity(method: dict[str, Any], dataset: str, dataset_version: Any, dataset_checksum: Any,
                   epsilon: Any, delta: Any) -> str:
    """What decides a cell's mechanism, everything of its key but the seed and the metrics: the method's
    name, version, package and parameters (defaults filled in), the dataset's name, version and checksum,
    ε and δ. An audit of the same identity tested the mechanism the cell ran; the guarantee is left out,
    since the harness may lower a cell's to nominal."""
    return json.dumps([method.get("name"), method.get("version"), method.get("package"), method.get("params"), dataset,
                       dataset_version, dataset_checksum, float(epsilon), float(delta)], sort_keys=True, default=str)


def match_audits(results: list[CellRecord], audits: list[dict[str, Any]]
                 ) -> tuple[dict[tuple[str, str, float, float], dict[str, Any]], list[dict[str, Any]]]:
    """Each row's (generator, dataset, ε, δ) audit among `audits` (`stored_audits`), and the audits that match
    no row. Where several audits test a row's mechanism (other fits, audit rows or seed), the row shows the
    finished one with the most fits, whose bound rests on the most evidence; one bound of several, chosen by
    its size, would need a correction for the choice."""
    rows: dict[str, set[tuple[str, str, float, float]]] = {}
    for r in results:
        cell = r.cell
        identity = audit_identity(r.method.to_dict(), cell.dataset, r.dataset.version, r.dataset.checksum,
                                  cell.epsilon, cell.delta)
        rows.setdefault(identity, set()).add((cell.method, cell.dataset, cell.epsilon, cell.delta))
    matched, unmatched = {}, []
    for audit in sorted(audits, key=lambda a: (a["status"] == "ok", a["fits_done"], a["key"])):  # the last one wins
        identity = audit_identity(audit["method"], audit["dataset"], audit.get("dataset_version"),
                                  audit.get("dataset_checksum"), audit["epsilon_claimed"], audit["delta"])
        for row in rows.get(identity, ()):
            matched[row] = audit
        if identity not in rows:
            unmatched.append(audit)
    return matched, unmatched
