"""Linear layers used several times in one forward pass (DP-HFlow's MADE, shared by all flow blocks),
with per-example gradients kept factored across the uses.

Example n's gradient of a layer used k times is G_n = Σ_j (δ_nj h_njᵀ) ⊙ M
(docs/methods/dp-hflow.md#per-example-gradients).
The engine adds per-use `LayerGrad`s with `+`; the default `+` materialises (n, out, in) tensors
for every use. `SharedOuterProductGrad` instead stacks the factors, so:
- squared row norms use the Gram identity ‖Σ_j δ_j[i] h_j ⊙ M_i‖² = Σ_{j,k} δ_j[i] δ_k[i] (M (h_j ⊙ h_k))_i;
- the clipped sum Σ_n w_n G_n is one matmul over the stacked uses;
- only L1 row norms (per-unit clipping) and sparsification materialise G_n, once, by one batched matmul.
"""

from __future__ import annotations

import torch
from opacus.grad_sample import register_grad_sampler
from torch import Tensor, nn

from opacus.grad_sample.linear import compute_linear_grad_sample

from dpgym.privacy import finite_examples, LayerGrad, MaterializedGrad, register_fast_rule, zero_examples
from dpgym.plugins.nn.layers import MaskedLinear, masked_linear_grad_sample


L1_CHUNK = 16


class SharedOuterProductGrad(LayerGrad):
    """Per-example gradients Σ_j (g_j a_jᵀ) ⊙ M (weight) and Σ_j g_j (bias) of a linear-type layer
    over its k uses; g_j (n, out), a_j (n, in). Units are output rows [W[i, :] | b[i]]."""

    def __init__(self, backprops: list[Tensor], activations: list[Tensor], weight: nn.Parameter,
                 bias: nn.Parameter | None, mask: Tensor | None):
        self.g, self.a, self.weight, self.bias, self.mask = backprops, activations, weight, bias, mask

    @property
    def batch_size(self) -> int:
        return self.g[0].shape[0]

    def __add__(self, other: LayerGrad) -> LayerGrad:
        if isinstance(other, SharedOuterProductGrad) and other.weight is self.weight:
            return SharedOuterProductGrad(self.g + other.g, self.a + other.a, self.weight, self.bias, self.mask)
        return super().__add__(other)

    def _masked_rows(self, a_term: Tensor) -> Tensor:
        return a_term.sum(dim=1, keepdim=True) if self.mask is None else a_term @ self.mask.T

    def unit_sq_norms(self) -> Tensor:
        uses = len(self.g)
        norms = torch.zeros_like(self.g[0])
        for j in range(uses):
            for k in range(j, uses):
                pair = self.g[j] * self.g[k] * self._masked_rows(self.a[j] * self.a[k])
                norms = norms + (pair if j == k else 2 * pair)
        if self.bias is not None:
            norms = norms + sum(self.g).square()
        return norms

    def _weight_per_example(self, rows: slice = slice(None)) -> Tensor:
        """(n, out, in): Σ_j g_j a_jᵀ ⊙ M, one batched matmul over the stacked uses."""
        g = torch.stack([x[rows] for x in self.g], dim=2)  # (n, out, k)
        a = torch.stack([x[rows] for x in self.a], dim=1)  # (n, k, in)
        grad = torch.bmm(g, a)
        return grad if self.mask is None else grad.mul_(self.mask)

    def unit_l1_norms(self) -> Tensor:
        # Small chunks of examples keep the (chunk, out, in) block in cache: ~10× faster than one
        # (n, out, in) tensor for the MADE's output layer (measured on 2 cores).
        n = self.batch_size
        norms = torch.cat([self._weight_per_example(slice(s, s + L1_CHUNK)).abs_().sum(dim=2)
                           for s in range(0, n, L1_CHUNK)]) if n else self.g[0].new_zeros(0, self.g[0].shape[1])
        return norms + sum(self.g).abs() if self.bias is not None else norms

    def weighted_sum(self, weights: Tensor) -> dict[nn.Parameter, Tensor]:
        w = weights if weights.dim() == 2 else weights[:, None]
        gw = torch.cat([g * w for g in self.g])
        grad_w = gw.T @ torch.cat(self.a)
        out = {self.weight: grad_w if self.mask is None else grad_w * self.mask}
        if self.bias is not None:
            out[self.bias] = gw.sum(dim=0)
        return out

    def finite_rows(self) -> SharedOuterProductGrad:
        ok = finite_examples(*self.g, *self.a)
        return SharedOuterProductGrad([zero_examples(g, ok) for g in self.g], [zero_examples(a, ok) for a in self.a],
                                      self.weight, self.bias, self.mask)

    def materialize(self) -> MaterializedGrad:
        grads = {self.weight: self._weight_per_example()}
        if self.bias is not None:
            grads[self.bias] = sum(self.g)
        return MaterializedGrad(grads)


class SharedLinear(nn.Linear):
    """nn.Linear whose per-example gradients stay factored across repeated uses."""


class SharedMaskedLinear(MaskedLinear):
    """MaskedLinear whose per-example gradients stay factored across repeated uses."""


@register_fast_rule(SharedLinear, SharedMaskedLinear)
def shared_linear_rule(layer: nn.Linear, activations: Tensor, backprops: Tensor) -> LayerGrad:
    if activations.dim() != 2:
        raise NotImplementedError("shared linear layers take (batch, features) inputs")
    return SharedOuterProductGrad([backprops], [activations], layer.weight, layer.bias, getattr(layer, "mask", None))


# The Opacus engine (the comparison path) looks grad samplers up by exact type.
register_grad_sampler(SharedMaskedLinear)(masked_linear_grad_sample)
register_grad_sampler(SharedLinear)(compute_linear_grad_sample)
