"""The shipped suites keep tuning data and scored data apart: a default chosen on rows a
leaderboard reports would have read them without a mechanism (docs/privacy.md)."""

from pathlib import Path

from dpgym.engine.suite import load_suite

SUITES = Path(__file__).parents[2] / "leaderboard" / "suites"
# the public tuning data: RAND HIE for tabular defaults, the checkerboard for 2-D ones
TUNING_DATASETS = {"randhie", "checkerboard"}


def _datasets(paths) -> set[str]:
    """Base dataset names (`adult:undersample=0.4` is `adult`) of the suites at `paths`."""
    return {name.split(":")[0] for path in paths for name in load_suite(str(path)).datasets}


def test_tuning_suites_and_scoring_suites_share_no_dataset():
    tuning = sorted(SUITES.glob("tuning-*.toml"))
    scoring = [path for path in SUITES.glob("*.toml") if path not in tuning]
    assert tuning and scoring
    assert _datasets(tuning) == TUNING_DATASETS
    assert not TUNING_DATASETS & _datasets(scoring)
