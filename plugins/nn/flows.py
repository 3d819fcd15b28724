"""Masked autoregressive flow (Papamakarios et al. 2017) as DP-NF builds it (docs/methods/dp-nf.md#model):
[MADE, reverse, ActNorm] × L blocks over a standard-normal prior, with exact log-density and
sequential sampling.

Every trainable layer has a per-example gradient rule, so the DP-SGD engine clips it: MADE uses
`dpgym.plugins.nn.layers.MaskedLinear`; `ActNorm` returns its log-determinant as an extra output column,
so that data-independent term reaches its parameters through the layer's output (the engine
refuses gradients that bypass a layer's forward, which would skip clipping).
"""

from __future__ import annotations

import math

import torch
from opacus.grad_sample import register_grad_sampler
from torch import Tensor, nn

from dpgym.privacy import MaterializedGrad, register_fast_rule
from dpgym.plugins.nn.layers import MaskedLinear, made_masks

LOG_2PI = math.log(2 * math.pi)


class ActNorm(nn.Module):
    """y = (x − b) ⊙ exp(s), log|det| = Σ s (Kingma & Dhariwal 2018), initialised as the identity
    (s = b = 0; no data-dependent initialisation, as in DP-NF's code). `forward` returns
    [y, Σ s] with shape (n, D + 1)."""

    def __init__(self, features: int):
        super().__init__()
        self.log_scale = nn.Parameter(torch.zeros(features))
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x: Tensor) -> Tensor:
        y = (x - self.bias) * self.log_scale.exp()
        return torch.cat([y, self.log_scale.sum().expand(x.shape[0], 1)], dim=1)

    def inverse(self, y: Tensor) -> Tensor:
        return y * (-self.log_scale).exp() + self.bias


def _actnorm_grads(layer: ActNorm, x: Tensor, backprops: Tensor) -> dict[nn.Parameter, Tensor]:
    """∂/∂s = g_y ⊙ y + g_ld (the log-det column), ∂/∂b = −g_y ⊙ exp(s), per example."""
    scale = layer.log_scale.exp()
    g_y, g_ld = backprops[:, :-1], backprops[:, -1:]
    return {layer.log_scale: g_y * (x - layer.bias) * scale + g_ld, layer.bias: -g_y * scale}


@register_grad_sampler(ActNorm)
def actnorm_grad_sample(layer: ActNorm, activations: list[Tensor], backprops: Tensor) -> dict[nn.Parameter, Tensor]:
    return _actnorm_grads(layer, activations[0].to(backprops.dtype), backprops)


@register_fast_rule(ActNorm)
def actnorm_rule(layer: ActNorm, activations: Tensor, backprops: Tensor) -> MaterializedGrad:
    return MaterializedGrad(_actnorm_grads(layer, activations.to(backprops.dtype), backprops))


class MADE(nn.Module):
    """D → H → … → 2D masked MLP with ReLU (Germain et al. 2015); output i's (α_i, μ_i) see inputs < i.
    Weights and biases start U(±1/√fan_in) (torch's default, as in DP-NF's code)."""

    def __init__(self, features: int, hidden: int, layers: int = 2):
        super().__init__()
        widths = [features] + [hidden] * layers + [2 * features]
        masks = made_masks(features, [hidden] * layers, outputs_per_feature=2)
        self.linears = nn.ModuleList(MaskedLinear(a, b, m) for a, b, m in zip(widths[:-1], widths[1:], masks, strict=True))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        h = x
        for i, linear in enumerate(self.linears):
            h = linear(h)
            if i < len(self.linears) - 1:
                h = torch.relu(h)
        out = h.view(x.shape[0], -1, 2)  # made_masks interleaves: outputs (2i, 2i+1) belong to feature i
        return out[..., 0], out[..., 1]  # α (log-scale), μ (shift)


class MAF(nn.Module):
    """[MADE, reverse, ActNorm] × blocks over N(0, I). Density direction:
    u = (x − μ(x)) ⊙ exp(−α(x)), log-det −Σα; reverse the order; ActNorm.

    alpha_bound: None (DP-NF's code: α unbounded) or B > 0 for a soft clamp α ← B·tanh(α/B), a
    stability guard against exp overflow under DP noise (a deviation from DP-NF's code when used).
    """

    def __init__(self, features: int, blocks: int = 5, hidden: int = 100, actnorm: bool = True,
                 alpha_bound: float | None = None):
        super().__init__()
        self.features = features
        self.alpha_bound = alpha_bound
        self.mades = nn.ModuleList(MADE(features, hidden) for _ in range(blocks))
        self.actnorms = nn.ModuleList(ActNorm(features) for _ in range(blocks)) if actnorm else None

    def _alpha(self, alpha: Tensor) -> Tensor:
        return alpha if self.alpha_bound is None else self.alpha_bound * torch.tanh(alpha / self.alpha_bound)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(u, Σ log|det|) with u the prior-space point of each row."""
        log_det = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
        for i, made in enumerate(self.mades):
            alpha, mu = made(x)
            alpha = self._alpha(alpha)
            x = (x - mu) * torch.exp(-alpha)
            log_det = log_det - alpha.sum(dim=1)
            x = x.flip(1)
            if self.actnorms is not None:
                out = self.actnorms[i](x)
                x, log_det = out[:, :-1], log_det + out[:, -1]
        return x, log_det

    def log_prob(self, x: Tensor) -> Tensor:
        u, log_det = self(x)
        return -0.5 * (u.square().sum(dim=1) + self.features * LOG_2PI) + log_det

    @torch.no_grad()
    def inverse(self, u: Tensor) -> Tensor:
        """x with forward(x)[0] = u: ActNorm⁻¹, reverse, then D sequential MADE passes per block."""
        for i in reversed(range(len(self.mades))):
            if self.actnorms is not None:
                u = self.actnorms[i].inverse(u)
            u = u.flip(1)
            x = torch.zeros_like(u)
            for d in range(self.features):
                alpha, mu = self.mades[i](x)
                alpha = self._alpha(alpha)
                x[:, d] = u[:, d] * torch.exp(alpha[:, d]) + mu[:, d]
            u = x
        return u
