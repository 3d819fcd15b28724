"""The issue's acceptance runs: a missing covertype leaves the rest of the suite running, and a user
CSV with a reviewed schema goes through the smoke suite's generators end to end."""

from __future__ import annotations

import json

import pytest

from dpgym.results.store import RunStore
from dpgym.engine.runner import run_suite
from dpgym.engine.suite import MethodConfig, Suite
from tests.harness.report.fakerun import report_of
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
    html = report_of(tmp_path / "run", registry).read_text()
    assert "unavailable at load: DatasetUnavailable" in html


def test_a_user_csv_with_a_reviewed_schema_runs_through_the_smoke_generators(registry, tmp_path):
    people(200).to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "people.schema.toml").write_text(SCHEMA)
    suite = Suite("t", SMOKE, (f"csv:{tmp_path / 'people.csv'}",), (1.0,), (0,), 1e-5, metrics=())
    summary = run_suite(suite, RunStore(tmp_path / "run"), registry, show_progress=False)
    assert (summary.ok, summary.failed, summary.unavailable) == (3, 0, 0), summary.messages


def test_every_cell_on_an_unreviewed_schema_records_the_warning(registry, tmp_path):
    from dpgym.data.inference import draft_toml, infer_schema, read_table

    people(200).to_csv(tmp_path / "people.csv", index=False)
    draft = infer_schema(read_table(tmp_path / "people.csv"), "people")
    (tmp_path / "people.schema.toml").write_text(draft_toml(draft, "people.csv"))
    suite = Suite("t", SMOKE[:1], (f"csv:{tmp_path / 'people.csv'}",), (1.0,), (0, 1), 1e-5, metrics=())
    store = RunStore(tmp_path / "run")
    assert run_suite(suite, store, registry, show_progress=False).ok == 2
    results = [json.loads(p.read_text()) for p in sorted((tmp_path / "run" / "cells").glob("*/result.json"))]
    assert len(results) == 2
    assert all(any("UnreviewedSchemaWarning" in w for w in r["warnings"]) for r in results)


def test_the_same_csv_at_two_paths_is_one_dataset_and_a_moved_file_resumes(registry, tmp_path):
    """A user dataset's cell keys, seeds and numbers come from its content and options, not its path."""
    from dpgym.engine.grid import expand

    def placed(folder: str) -> str:
        (tmp_path / folder).mkdir()
        people(200).to_csv(tmp_path / folder / "people.csv", index=False)
        (tmp_path / folder / "people.schema.toml").write_text(SCHEMA)
        return f"csv:{tmp_path / folder / 'people.csv'},test_fraction=0.25"

    here, there = placed("here"), placed("there")
    grid = {name: Suite("t", SMOKE[:2], (name,), (1.0,), (0, 1), 1e-5, metrics=("fidelity",)) for name in (here, there)}
    cells = {name: expand(suite, registry) for name, suite in grid.items()}
    assert [c.key for c in cells[here]] == [c.key for c in cells[there]]
    assert [c.seeds for c in cells[here]] == [c.seeds for c in cells[there]]
    other_split = Suite("t", SMOKE[:2], (here.replace("0.25", "0.3"),), (1.0,), (0, 1), 1e-5, metrics=("fidelity",))
    assert not {c.key for c in expand(other_split, registry)} & {c.key for c in cells[here]}

    runs = {name: RunStore(tmp_path / f"run-{i}") for i, name in enumerate((here, there))}
    for name, store in runs.items():
        assert run_suite(grid[name], store, registry, show_progress=False).ok == 4
    numbers = {name: sorted((r.cell.key, r.metrics["marginal_tvd"]) for r in store.results())
               for name, store in runs.items()}
    assert numbers[here] == numbers[there]

    # The file moves: the run resumes, every cell done, now under the dataset's new name.
    resumed = run_suite(grid[there], runs[here], registry, show_progress=False)
    assert (resumed.skipped, resumed.ok) == (4, 0)
    assert {r.cell.dataset for r in runs[here].results()} == {there}
