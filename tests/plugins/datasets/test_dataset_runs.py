"""The issue's acceptance runs: a missing covertype leaves the rest of the suite running, and a user
CSV with a reviewed schema goes through the smoke suite's generators end to end."""

from __future__ import annotations

import pytest

import json

from dpgym.report import write_report
from dpgym.runner import run_suite
from dpgym.store import RunStore
from dpgym.suite import MethodConfig, Suite
from tests.plugins.datasets.test_user_csv_dataset import SCHEMA, people

SMOKE = tuple(MethodConfig(g) for g in ("uniform", "independent", "real"))


@pytest.mark.slow
def test_a_suite_without_the_covertype_file_runs_the_rest_and_says_how_to_get_it(registry, tmp_path, monkeypatch):
    monkeypatch.setenv("DPGYM_DATA", str(tmp_path / "empty"))
    monkeypatch.delenv("DPGYM_ALLOW_DOWNLOAD", raising=False)
    suite = Suite("t", SMOKE[:1], ("half_moons", "covertype"), (1.0,), (0,), 1e-5, metrics=())
    summary = run_suite(suite, RunStore(tmp_path / "run"), registry, show_progress=False)
    assert (summary.ok, summary.unavailable, summary.failed) == (1, 1, 0)
    assert any("covertype unavailable" in m and "DPGYM_ALLOW_DOWNLOAD=1" in m for m in summary.messages)
    # The report lists the unavailable cell, whose error carries no traceback.
    html = write_report(tmp_path / "run", registry).read_text()
    assert "unavailable at load: DatasetUnavailable" in html


def test_a_user_csv_with_a_reviewed_schema_runs_through_the_smoke_generators(registry, tmp_path):
    people(200).to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "people.schema.toml").write_text(SCHEMA)
    suite = Suite("t", SMOKE, (f"csv:{tmp_path / 'people.csv'}",), (1.0,), (0,), 1e-5, metrics=())
    summary = run_suite(suite, RunStore(tmp_path / "run"), registry, show_progress=False)
    assert (summary.ok, summary.failed, summary.unavailable) == (3, 0, 0), summary.messages


def test_every_cell_on_an_unreviewed_schema_records_the_warning(registry, tmp_path):
    from dpgym.inference import draft_toml, infer_schema, read_table

    people(200).to_csv(tmp_path / "people.csv", index=False)
    draft = infer_schema(read_table(tmp_path / "people.csv"), "people")
    (tmp_path / "people.schema.toml").write_text(draft_toml(draft, "people.csv"))
    suite = Suite("t", SMOKE[:1], (f"csv:{tmp_path / 'people.csv'}",), (1.0,), (0, 1), 1e-5, metrics=())
    store = RunStore(tmp_path / "run")
    assert run_suite(suite, store, registry, show_progress=False).ok == 2
    results = [json.loads(p.read_text()) for p in sorted((tmp_path / "run" / "cells").glob("*/result.json"))]
    assert len(results) == 2
    assert all(any("UnreviewedSchemaWarning" in w for w in r["warnings"]) for r in results)
