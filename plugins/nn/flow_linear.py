"""Linear flow layers that emit their log|det W| as an extra output column, so the log-det term of a
flow's per-example loss reaches the parameters through the layer's own output gradient and is
clipped per example with the data term (docs/methods/dp-hflow.md#per-example-gradients).

`LowRankLinear.log_abs_det()` called outside the forward pass would hand its gradient to the
parameters directly, skipping per-example clipping (the DP-SGD engine refuses that). Here the layer
returns [W x + b | log|det W|] per row; the per-example gradient of row n is the data path (eqs. 3–4
of the paper, `dpgym.plugins.nn.layers`) plus e_n[d] · ∂log|det W|/∂θ, where e_n[d] is the output
gradient of that row's log-det column (−1 for a negative log-likelihood). The log-det gradient is
data-independent but must stay inside the clipped per-example gradient: under Poisson sampling an
unclipped term summed over the batch would leak the batch size.
"""

from __future__ import annotations

import torch
from opacus.grad_sample import register_grad_sampler
from torch import Tensor, nn

from dpgym.plugins.nn.layers import LowRankLinear, LULinear, low_rank_grad_sample, lu_grad_sample


class LogDetOutput:
    """Mixin: forward(x) → [W x + b | log|det W|] of shape (n, d + 1); `split` separates them."""

    def forward(self, x: Tensor) -> Tensor:
        z = super().forward(x)
        return torch.cat([z, self.log_abs_det().expand(len(x), 1)], dim=1)

    @staticmethod
    def split(output: Tensor) -> tuple[Tensor, Tensor]:
        return output[:, :-1], output[:, -1]


class LowRankFlowLinear(LogDetOutput, LowRankLinear):
    """z = (diag(s) + A B) x + b with the log-det column (r = rank; docs/methods/dp-hflow.md#low-rank-linear-layer)."""

    def log_abs_det_grads(self) -> dict[nn.Parameter, Tensor]:
        """∂log|det W|/∂θ in closed form: ∂/∂W = W⁻ᵀ, so ∂/∂ŝ_i = s_i (W⁻¹)_ii, ∂/∂A = W⁻ᵀ Bᵀ,
        ∂/∂B = Aᵀ W⁻ᵀ, ∂/∂b = 0."""
        s = self.log_scale.exp()
        w_inv_t = torch.linalg.inv(torch.diag(s) + self.left @ self.right).T
        return {
            self.log_scale: s * torch.diagonal(w_inv_t),
            self.left: w_inv_t @ self.right.T,
            self.right: self.left.T @ w_inv_t,
            self.bias: torch.zeros_like(self.bias),
        }


class LUFlowLinear(LogDetOutput, LULinear):
    """z = P L U x + b with the log-det column (docs/methods/dp-hflow.md#lu-linear-layer); log|det| = Σ û."""

    def log_abs_det_grads(self) -> dict[nn.Parameter, Tensor]:
        return {
            self.lower: torch.zeros_like(self.lower),
            self.upper: torch.zeros_like(self.upper),
            self.log_diag: torch.ones_like(self.log_diag),
            self.bias: torch.zeros_like(self.bias),
        }


def _with_log_det(data_path):
    def grad_sample(layer, activations: list[Tensor], backprops: Tensor) -> dict[nn.Parameter, Tensor]:
        e, e_logdet = backprops[:, :-1], backprops[:, -1]
        grads = data_path(layer, activations, e)
        with torch.no_grad():
            constant = layer.log_abs_det_grads()
        return {p: g + e_logdet.view(-1, *[1] * constant[p].dim()) * constant[p] for p, g in grads.items()}
    grad_sample.__doc__ = f"{data_path.__name__} on the z columns plus the log-det column's share."
    return grad_sample


register_grad_sampler(LowRankFlowLinear)(_with_log_det(low_rank_grad_sample))
register_grad_sampler(LUFlowLinear)(_with_log_det(lu_grad_sample))
