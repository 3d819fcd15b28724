"""Sampling a trained flow whose inverse can overflow."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import Tensor

REDRAW_ROUNDS = 20


def finite_draws(draw: Callable[[int], Tensor], n: int, width: int, model: str) -> Tensor:
    """n rows of `draw(m)` (m ≥ 1 rows inverted through the model, on the CPU, `width` columns) that
    are finite everywhere.

    A trained flow can send a few base draws to NaN or ±inf (a near-singular linear layer, a spline
    or an affine scale pushed past float32). Those rows are redrawn, so the sample follows the
    model's distribution conditioned on a finite inverse; any other repair (a fixed value, a clip)
    would pile mass where the model put none. The count is reported as a warning. A model whose
    first full draw is non-finite throughout is degenerate, and redrawing cannot help."""
    kept, missing, redrawn = [], n, 0
    for _ in range(REDRAW_ROUNDS):
        if not missing:
            break
        rows = draw(missing)
        finite = torch.isfinite(rows).all(dim=1)
        if not redrawn and not finite.any():
            raise RuntimeError(f"{model}: the flow's inverse is non-finite for all {missing} rows drawn; "
                               "the fitted model is degenerate")
        kept.append(rows[finite])
        missing = int((~finite).sum())
        redrawn += missing
    else:
        if missing:
            raise RuntimeError(f"{model}: the flow's inverse stayed non-finite for {missing} of {n} rows "
                               f"after {REDRAW_ROUNDS} rounds of redrawing; the fitted model is degenerate")
    if redrawn:
        warnings.warn(f"{model}: {redrawn} of {n} sampled rows were non-finite after inverting the flow and "
                      "were redrawn", RuntimeWarning, stacklevel=3)
    return torch.cat(kept) if kept else torch.empty(0, width)
