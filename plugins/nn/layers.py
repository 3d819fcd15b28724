"""Linear layers of the DP-HFlow flow and its MADE conditioner, each with a closed-form per-example
gradient registered beside it as an Opacus grad sampler (so DP-SGD needs no per-example loop).

Per-example gradients below are the data path: the gradient of each example's loss through the
layer's output. A flow's −log|det W| term is data-independent; the flow adds it to every example's
loss, and `log_abs_det` gives it (with autograd) for that purpose.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from opacus.grad_sample import register_grad_sampler
from torch import Tensor, nn
from torch.nn import functional as F

from dpgym.privacy import opacus_rule, OuterProductGrad, prefix_structure, register_fast_rule


class MaskedLinear(nn.Linear):
    """h' = (W ⊙ M) h + b with a fixed 0/1 mask M (MADE, Germain et al. 2015)."""

    def __init__(self, in_features: int, out_features: int, mask: Tensor, bias: bool = True):
        super().__init__(in_features, out_features, bias=bias)
        if mask.shape != (out_features, in_features):
            raise ValueError(f"mask must be {(out_features, in_features)}, got {tuple(mask.shape)}")
        self.register_buffer("mask", mask.to(self.weight.dtype))
        self._prefix_cache: tuple[int, tuple[Tensor, Tensor] | None] | None = None

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight * self.mask, self.bias)

    def prefix(self) -> tuple[Tensor, Tensor] | None:
        """The mask's prefix structure (`prefix_structure`), recomputed whenever the mask changes."""
        version = (self.mask._version, self.mask.data_ptr())
        if self._prefix_cache is None or self._prefix_cache[0] != version:
            self._prefix_cache = (version, prefix_structure(self.mask))
        return self._prefix_cache[1]


@register_grad_sampler(MaskedLinear)
def masked_linear_grad_sample(layer: MaskedLinear, activations: list[Tensor], backprops: Tensor) -> dict[nn.Parameter, Tensor]:
    """G_n = (δ_n h_nᵀ) ⊙ M, summed over any sequence dimensions."""
    a = activations[0].to(backprops.dtype)
    out = {}
    if layer.weight.requires_grad:
        out[layer.weight] = torch.einsum("n...i,n...j->nij", backprops, a) * layer.mask
    if layer.bias is not None and layer.bias.requires_grad:
        out[layer.bias] = torch.einsum("n...k->nk", backprops)
    return out


@register_fast_rule(MaskedLinear)
def masked_linear_rule(layer: MaskedLinear, activations: Tensor, backprops: Tensor):
    if activations.dim() != 2:
        return opacus_rule(layer, activations, backprops)
    return OuterProductGrad(backprops, activations, layer.weight, layer.bias, mask=layer.mask, prefix=layer.prefix())


def made_masks(features: int, hidden: Sequence[int], outputs_per_feature: int = 1) -> list[Tensor]:
    """MADE masks (Germain et al. 2015, eqs. 12–13) with sequential degrees: output block i sees
    inputs < i only. Returns one (out, in) mask per layer, input to output."""
    degrees = [torch.arange(1, features + 1)]
    for width in hidden:
        degrees.append(torch.arange(width) % max(1, features - 1) + 1)
    masks = [(d_out[:, None] >= d_in[None, :]).float() for d_in, d_out in zip(degrees[:-1], degrees[1:])]
    out_degrees = torch.arange(1, features + 1).repeat_interleave(outputs_per_feature)
    masks.append((out_degrees[:, None] > degrees[-1][None, :]).float())
    return masks


class LowRankLinear(nn.Module):
    """z = (diag(s) + A B) x + b with s = exp(ŝ), A ∈ ℝ^{d×r}, B ∈ ℝ^{r×d} (Lu & Huang 2020;
    docs/methods/dp-hflow.md#low-rank-linear-layer)."""

    def __init__(self, features: int, rank: int = 1):
        super().__init__()
        self.log_scale = nn.Parameter(torch.zeros(features))
        self.left = nn.Parameter(torch.randn(features, rank) / math.sqrt(features))  # A
        self.right = nn.Parameter(torch.zeros(rank, features))  # B: starts at the identity map
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.log_scale.exp() + (x @ self.right.T) @ self.left.T + self.bias

    def log_abs_det(self) -> Tensor:
        """Σ ŝ_i + log|det(I_r + B diag(s)⁻¹ A)| (matrix determinant lemma)."""
        rank = self.left.shape[1]
        core = torch.eye(rank, dtype=self.left.dtype, device=self.left.device) + (self.right / self.log_scale.exp()) @ self.left
        return self.log_scale.sum() + torch.linalg.slogdet(core).logabsdet

    def inverse(self, z: Tensor) -> Tensor:
        """Woodbury: W⁻¹ = D⁻¹ − D⁻¹A(I_r + BD⁻¹A)⁻¹BD⁻¹."""
        inv_s = (-self.log_scale).exp()
        y = (z - self.bias) * inv_s
        core = torch.eye(self.left.shape[1], dtype=z.dtype, device=z.device) + (self.right * inv_s) @ self.left
        return y - (torch.linalg.solve(core, (y @ self.right.T).T).T @ self.left.T) * inv_s


@register_grad_sampler(LowRankLinear)
def low_rank_grad_sample(layer: LowRankLinear, activations: list[Tensor], backprops: Tensor) -> dict[nn.Parameter, Tensor]:
    """DP-HFlow eq. 4: ∂A = e (Bx)ᵀ, ∂B = (Aᵀe) xᵀ, ∂s = e ⊙ x (so ∂ŝ = e ⊙ x ⊙ s), ∂b = e."""
    x, e = activations[0].to(backprops.dtype), backprops
    return {
        layer.log_scale: e * x * layer.log_scale.exp(),
        layer.left: torch.einsum("ni,nk->nik", e, x @ layer.right.T),
        layer.right: torch.einsum("nk,nj->nkj", e @ layer.left, x),
        layer.bias: e,
    }


class LULinear(nn.Module):
    """z = P L U x + b: P a fixed random permutation, L unit lower triangular, U upper triangular
    with diagonal exp(û) (docs/methods/dp-hflow.md#lu-linear-layer). log|det| = Σ û."""

    def __init__(self, features: int, generator: torch.Generator | None = None):
        super().__init__()
        self.register_buffer("permutation", torch.randperm(features, generator=generator))
        self.register_buffer("inverse_permutation", torch.argsort(self.permutation))
        self.register_buffer("lower_mask", torch.tril(torch.ones(features, features), diagonal=-1))
        self.register_buffer("upper_mask", torch.triu(torch.ones(features, features), diagonal=1))
        self.lower = nn.Parameter(torch.zeros(features, features))
        self.upper = nn.Parameter(torch.zeros(features, features))
        self.log_diag = nn.Parameter(torch.zeros(features))
        self.bias = nn.Parameter(torch.zeros(features))

    def lower_matrix(self) -> Tensor:
        return self.lower * self.lower_mask + torch.eye(len(self.log_diag), dtype=self.lower.dtype, device=self.lower.device)

    def upper_matrix(self) -> Tensor:
        return self.upper * self.upper_mask + torch.diag(self.log_diag.exp())

    def forward(self, x: Tensor) -> Tensor:
        return (x @ self.upper_matrix().T @ self.lower_matrix().T)[:, self.permutation] + self.bias

    def log_abs_det(self) -> Tensor:
        return self.log_diag.sum()

    def inverse(self, z: Tensor) -> Tensor:
        v = (z - self.bias)[:, self.inverse_permutation].T
        w = torch.linalg.solve_triangular(self.lower_matrix(), v, upper=False, unitriangular=True)
        return torch.linalg.solve_triangular(self.upper_matrix(), w, upper=True).T


@register_grad_sampler(LULinear)
def lu_grad_sample(layer: LULinear, activations: list[Tensor], backprops: Tensor) -> dict[nn.Parameter, Tensor]:
    """DP-HFlow eq. 3 with e the gradient w.r.t. LUx (= Pᵀ applied to the output gradient):
    ∂L = e (Ux)ᵀ on the strict lower triangle, ∂U = (Lᵀe) xᵀ on the upper triangle (∂û = that
    diagonal × exp(û)), ∂b = the output gradient."""
    x = activations[0].to(backprops.dtype)
    e = backprops[:, layer.inverse_permutation]
    lt_e = e @ layer.lower_matrix()
    return {
        layer.lower: torch.einsum("ni,nj->nij", e, x @ layer.upper_matrix().T) * layer.lower_mask,
        layer.upper: torch.einsum("ni,nj->nij", lt_e, x) * layer.upper_mask,
        layer.log_diag: lt_e * x * layer.log_diag.exp(),
        layer.bias: backprops,
    }
