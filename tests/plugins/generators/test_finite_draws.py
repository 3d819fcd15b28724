"""Sampling a flow whose inverse overflows on some draws: redrawn, never repaired to a made-up value."""

from __future__ import annotations

import pytest
import torch

from dpgym.plugins.nn.sampling import finite_draws


def test_non_finite_rows_are_redrawn_and_counted():
    gen = torch.Generator().manual_seed(0)

    def draw(m: int) -> torch.Tensor:
        rows = torch.randn(m, 2, generator=gen)
        rows[rows[:, 0] > 1.0, 1] = float("nan")  # about 16 % of the draws overflow
        return rows

    with pytest.warns(RuntimeWarning, match=r"dp_test: \d+ of 1000 sampled rows were non-finite"):
        rows = finite_draws(draw, 1000, 2, "dp_test")
    assert rows.shape == (1000, 2) and torch.isfinite(rows).all() and (rows[:, 0] <= 1.0).all()


def test_no_rows_asked_is_an_empty_sample_without_a_draw():
    def draw(m: int) -> torch.Tensor:
        raise AssertionError("drew rows for an empty sample")

    assert finite_draws(draw, 0, 3, "dp_test").shape == (0, 3)


def test_a_model_whose_whole_first_draw_overflows_is_degenerate():
    with pytest.raises(RuntimeError, match="dp_test: the flow's inverse is non-finite for all 5 rows drawn"):
        finite_draws(lambda m: torch.full((m, 2), float("inf")), 5, 2, "dp_test")
