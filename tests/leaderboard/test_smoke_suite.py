"""The smoke suite end to end on real Adult: the reference generators order as they must."""

from __future__ import annotations

import pytest

from dpgym.commands import metric_directions, suite_keys
from dpgym.leaderboard import write_leaderboard
from dpgym.registry import Registry
from dpgym.runner import run_suite
from dpgym.store import RunStore
from dpgym.suite import load_suite

pytestmark = pytest.mark.slow  # every test here shares one run of the smoke suite (minutes)


@pytest.fixture(scope="module")
def smoke_board(tmp_path_factory):
    registry = Registry.discover()
    out = tmp_path_factory.mktemp("smoke")
    summary = run_suite(load_suite("smoke"), RunStore(out), registry, show_progress=False)
    assert summary.failed == 0 and summary.ok == summary.total
    board, _ = write_leaderboard(out, metric_directions(registry), suite_keys(out, registry))
    return board.set_index("generator")


def test_real_beats_independent_beats_uniform_on_auroc(smoke_board):
    auroc = smoke_board["tstr_auroc_mean"]
    assert auroc["real"] > auroc["independent"] > auroc["uniform"]


def test_real_data_auroc_is_in_the_published_train_real_test_real_range(smoke_board):
    assert 0.85 <= smoke_board.loc["real", "tstr_auroc_mean"] <= 0.92


def test_independent_keeps_marginals_that_uniform_loses(smoke_board):
    tvd = smoke_board["marginal_tvd_mean"]
    assert tvd["real"] < tvd["independent"] < 0.05 < tvd["uniform"]
    assert smoke_board.loc["independent", "claimed_epsilon_max"] == pytest.approx(1.0)
