"""Planar and Sylvester flow layers (Rezende & Mohamed 2015; van den Berg et al. 2018) and a
flow that maps a Gaussian base to R^D with an exact log-density, for sampling model parameters.

Every layer maps z (N, D) to (g(z), log|det ∂g/∂z|) with the log-det computed in closed form.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class Planar(nn.Module):
    """g(z) = z + û·tanh(wᵀz + b); û reparametrised so wᵀû ≥ −1 keeps g invertible
    (Rezende & Mohamed 2015, appendix A.1)."""

    def __init__(self, dim: int, init_scale: float = 0.01):
        super().__init__()
        self.u = nn.Parameter(torch.randn(dim) * init_scale)
        self.w = nn.Parameter(torch.randn(dim) * init_scale)
        self.b = nn.Parameter(torch.zeros(()))

    def forward(self, z: Tensor) -> tuple[Tensor, Tensor]:
        wu = self.w @ self.u
        u_hat = self.u + (F.softplus(wu) - 1 - wu) * self.w / (self.w @ self.w + 1e-12)
        pre = z @ self.w + self.b
        h = torch.tanh(pre)
        log_det = torch.log(torch.abs(1 + (1 - h**2) * (self.w @ u_hat)) + 1e-12)
        return z + h[:, None] * u_hat, log_det


class Sylvester(nn.Module):
    """g(z) = z + Q R tanh(R̂ Qᵀ z + c), Q (D × m) orthonormal from k Householder reflections, R and
    R̂ upper-triangular with tanh diagonals; log-det = Σ_j log|1 + h'_j R̂_jj R_jj| (van den Berg
    et al. 2018, eq. 13: det(I_D + AB) = det(I_m + BA))."""

    def __init__(self, dim: int, m: int = 4, reflections: int = 4, init_scale: float = 0.01):
        super().__init__()
        if m > dim:
            raise ValueError(f"Sylvester rank m={m} exceeds the dimension {dim}")
        self.m = m
        self.v = nn.Parameter(torch.randn(reflections, dim))
        self.r = nn.Parameter(torch.randn(m, m) * init_scale)
        self.r_hat = nn.Parameter(torch.randn(m, m) * init_scale)
        self.c = nn.Parameter(torch.zeros(m))
        self.register_buffer("upper", torch.triu(torch.ones(m, m), diagonal=1))

    def q(self) -> Tensor:
        q = torch.eye(self.v.shape[1], self.m, dtype=self.v.dtype)
        for v in self.v:  # apply (I − 2 v̂ v̂ᵀ) to the first m columns of the identity
            v = v / v.norm()
            q = q - 2 * v[:, None] * (v @ q)[None, :]
        return q

    def _triangular(self, raw: Tensor) -> tuple[Tensor, Tensor]:
        diag = torch.tanh(torch.diagonal(raw))  # |R_jj R̂_jj| < 1 keeps every factor positive
        return raw * self.upper + torch.diag(diag), diag

    def forward(self, z: Tensor) -> tuple[Tensor, Tensor]:
        q = self.q()
        r, r_diag = self._triangular(self.r)
        r_hat, r_hat_diag = self._triangular(self.r_hat)
        pre = (z @ q) @ r_hat.T + self.c
        h = torch.tanh(pre)
        log_det = torch.log(torch.abs(1 + (1 - h**2) * (r_diag * r_hat_diag)) + 1e-12).sum(dim=1)
        return z + (h @ r.T) @ q.T, log_det


class Affine(nn.Module):
    """g(z) = μ + exp(s) ⊙ z, learned per dimension: lets the flow match the target's scale."""

    def __init__(self, dim: int, log_scale: float = 0.0):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(dim))
        self.log_scale = nn.Parameter(torch.full((dim,), float(log_scale)))

    def forward(self, z: Tensor) -> tuple[Tensor, Tensor]:
        return self.loc + torch.exp(self.log_scale) * z, self.log_scale.sum().expand(z.shape[0])


LAYERS = {"planar": Planar, "sylvester": Sylvester}


class ParameterFlow(nn.Module):
    """θ = g_K ∘ … ∘ g_1(z), z ~ N(0, σ² I_D) with σ fixed; `sample` returns θ and log q(θ)."""

    def __init__(self, dim: int, layers: list[nn.Module], base_sigma: float = 1.0):
        super().__init__()
        self.dim, self.base_sigma = dim, float(base_sigma)
        self.layers = nn.ModuleList(layers)

    def base_log_prob(self, z: Tensor) -> Tensor:
        return (-0.5 * (z / self.base_sigma) ** 2).sum(dim=1) - self.dim * (math.log(self.base_sigma)
                                                                              + 0.5 * math.log(2 * math.pi))

    def sample(self, n: int, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        z = torch.randn(n, self.dim, generator=generator) * self.base_sigma
        log_q = self.base_log_prob(z)
        for layer in self.layers:
            z, log_det = layer(z)
            log_q = log_q - log_det
        return z, log_q
