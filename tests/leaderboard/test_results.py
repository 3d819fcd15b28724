"""The committed reference results (leaderboard/results/<suite>/, docs/results.md) stay what the docs
promise: each folder belongs to a suite and holds the leaderboard, the report and the manifest; the
manifest names the revision that produced them; a suite naming references has its comparisons beside
it; the whole stays small enough to clone; the README links every committed leaderboard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpgym.engine.suite import load_suite

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "leaderboard" / "results"
SUITES = ROOT / "leaderboard" / "suites"
REQUIRED = ("leaderboard.json", "leaderboard.md", "report.html", "run.json")
MAX_TOTAL_BYTES = 50 * 1024**2
MAX_REPORT_BYTES = 5 * 1024**2

committed = sorted(path for path in RESULTS.iterdir() if path.is_dir()) if RESULTS.is_dir() else []


def test_results_are_committed() -> None:
    assert committed, "leaderboard/results/ holds no suite's results"


@pytest.mark.parametrize("folder", committed, ids=lambda path: path.name)
def test_each_folder_is_a_suite_with_its_leaderboard_report_and_manifest(folder: Path) -> None:
    assert (SUITES / f"{folder.name}.toml").is_file(), f"{folder.name}: no leaderboard/suites/{folder.name}.toml"
    missing = [name for name in REQUIRED if not (folder / name).is_file()]
    assert not missing, f"leaderboard/results/{folder.name} lacks {missing}"
    manifest = json.loads((folder / "run.json").read_text())
    assert manifest["suite"]["name"] == folder.name
    assert len(manifest["git_revision"].removesuffix("-dirty")) == 40, "the manifest names no git revision"
    assert manifest["machine"]["cores"] >= 1


@pytest.mark.parametrize("folder", committed, ids=lambda path: path.name)
def test_a_suite_that_names_references_has_its_comparisons_committed(folder: Path) -> None:
    for reference in load_suite(str(SUITES / f"{folder.name}.toml")).references:
        for suffix in ("md", "json"):
            assert (folder / f"compare-{reference}.{suffix}").is_file(), \
                f"leaderboard/results/{folder.name} lacks compare-{reference}.{suffix}"


def test_committed_results_stay_small() -> None:
    files = [path for path in RESULTS.rglob("*") if path.is_file()]
    total = sum(path.stat().st_size for path in files)
    assert total < MAX_TOTAL_BYTES, f"leaderboard/results/ holds {total / 1024**2:.1f} MB"
    for report in RESULTS.glob("*/report.html"):
        assert report.stat().st_size < MAX_REPORT_BYTES, f"{report.relative_to(ROOT)} is over 5 MB"


def test_the_readme_links_every_committed_leaderboard_and_report() -> None:
    readme = (ROOT / "README.md").read_text()
    for folder in committed:
        for name in ("leaderboard.md", "report.html"):
            link = f"(leaderboard/results/{folder.name}/{name})"
            assert link in readme, f"README.md does not link leaderboard/results/{folder.name}/{name}"
