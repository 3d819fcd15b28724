"""Monotone rational-quadratic spline on [−B, B] with identity tails (Durkan et al. 2019, Neural
Spline Flows, eqs. 4–8 and appendix A), elementwise, with its exact log|dS/dx| and inverse.

Parameters arrive unconstrained, one set per element: K bin widths, K bin heights and K−1 interior
knot derivatives (3K−1 numbers per dimension, docs/methods/dp-hflow.md#spline). The boundary derivatives are 1
so the spline joins the identity tails smoothly. A raw derivative of 0 gives derivative 1, so all
zero parameters give the identity map.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F

MIN_BIN_WIDTH = 1e-3
MIN_BIN_HEIGHT = 1e-3
MIN_DERIVATIVE = 1e-3
# softplus(x + _UNIT_SHIFT) + MIN_DERIVATIVE = 1 at x = 0
_UNIT_SHIFT = math.log(math.expm1(1 - MIN_DERIVATIVE))


def params_per_dim(bins: int) -> int:
    return 3 * bins - 1


def rq_spline(inputs: Tensor, params: Tensor, tail_bound: float, inverse: bool = False) -> tuple[Tensor, Tensor]:
    """Apply S (or S⁻¹) elementwise. inputs (...,), params (..., 3K−1). Returns (outputs,
    log|dS/dx|) where for the inverse the log-derivative is that of S⁻¹ (i.e. −log S′ at the output)."""
    bins = (params.shape[-1] + 1) // 3
    raw_w, raw_h, raw_d = params[..., :bins], params[..., bins:2 * bins], params[..., 2 * bins:]
    inside = (inputs >= -tail_bound) & (inputs <= tail_bound)
    # evaluate on clamped inputs so the unused branch of `where` stays finite (no NaN gradients)
    out, logabsdet = _spline_inside(inputs.clamp(-tail_bound, tail_bound), raw_w, raw_h, raw_d, tail_bound, inverse)
    return torch.where(inside, out, inputs), torch.where(inside, logabsdet, torch.zeros_like(logabsdet))


def _knots(raw: Tensor, min_size: float, tail_bound: float) -> tuple[Tensor, Tensor]:
    bins = raw.shape[-1]
    sizes = min_size + (1 - min_size * bins) * torch.softmax(raw, dim=-1)
    cum = F.pad(torch.cumsum(sizes, dim=-1), (1, 0))
    cum = 2 * tail_bound * cum - tail_bound
    cum = torch.cat([torch.full_like(cum[..., :1], -tail_bound), cum[..., 1:-1],
                     torch.full_like(cum[..., :1], tail_bound)], dim=-1)
    return cum, cum[..., 1:] - cum[..., :-1]


def _gather(values: Tensor, index: Tensor) -> Tensor:
    return values.gather(-1, index[..., None])[..., 0]


def _spline_inside(x: Tensor, raw_w: Tensor, raw_h: Tensor, raw_d: Tensor, tail_bound: float,
                   inverse: bool) -> tuple[Tensor, Tensor]:
    cum_w, widths = _knots(raw_w, MIN_BIN_WIDTH, tail_bound)
    cum_h, heights = _knots(raw_h, MIN_BIN_HEIGHT, tail_bound)
    interior = MIN_DERIVATIVE + F.softplus(raw_d + _UNIT_SHIFT)
    ones = torch.ones_like(interior[..., :1])
    derivs = torch.cat([ones, interior, ones], dim=-1)

    knots = cum_h if inverse else cum_w
    # bin index k with knots[k] ≤ x < knots[k+1]; the last knot is nudged so x = B lands in bin K−1
    edges = knots.clone()
    edges[..., -1] += 1e-6
    k = (torch.sum(x[..., None] >= edges, dim=-1) - 1).clamp(0, raw_w.shape[-1] - 1)

    x_k, w_k = _gather(cum_w, k), _gather(widths, k)
    y_k, h_k = _gather(cum_h, k), _gather(heights, k)
    d_k, d_k1 = _gather(derivs, k), _gather(derivs, k + 1)
    slope = h_k / w_k
    curvature = d_k + d_k1 - 2 * slope

    if inverse:
        dy = x - y_k
        a = h_k * (slope - d_k) + dy * curvature
        b = h_k * d_k - dy * curvature
        c = -slope * dy
        disc = (b.square() - 4 * a * c).clamp(min=0)
        xi = (2 * c) / (-b - disc.sqrt())
        out = xi * w_k + x_k
    else:
        xi = (x - x_k) / w_k
        numerator = h_k * (slope * xi.square() + d_k * xi * (1 - xi))
        out = y_k + numerator / (slope + curvature * xi * (1 - xi))
    one_minus = 1 - xi
    denominator = slope + curvature * xi * one_minus
    deriv_num = slope.square() * (d_k1 * xi.square() + 2 * slope * xi * one_minus + d_k * one_minus.square())
    logderiv = torch.log(deriv_num) - 2 * torch.log(denominator)
    return out, (-logderiv if inverse else logderiv)
