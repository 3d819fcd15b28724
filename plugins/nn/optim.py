"""AdaBelief (Zhuang et al. 2020, "AdaBelief Optimizer: Adapting Stepsizes by the Belief in Observed
Gradients", NeurIPS, Algorithm 2), the optimizer of DP-HFlow (lr 1e-3, β = (0.9, 0.999);
docs/methods/dp-hflow.md#training).

Written here rather than taken from `adabelief-pytorch` (last release 2021, whose defaults changed
between versions): eps = 1e-16, no weight decay, no rectification, no AMSGrad. It is the
Adam update with the second moment of (g − m) instead of g.
"""

from __future__ import annotations


import torch
from torch.optim import Optimizer


class AdaBelief(Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-16):
        if lr <= 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1) or eps < 0:
            raise ValueError(f"invalid AdaBelief settings lr={lr}, betas={betas}, eps={eps}")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["s"] = torch.zeros_like(p)
                state["step"] += 1
                m, s, g = state["m"], state["s"], p.grad
                m.mul_(beta1).add_(g, alpha=1 - beta1)
                # s_t = β2 s_{t−1} + (1 − β2)(g_t − m_t)² + ε   (Algorithm 2)
                s.mul_(beta2).addcmul_(g - m, g - m, value=1 - beta2).add_(group["eps"])
                bias1 = 1 - beta1 ** state["step"]
                bias2 = 1 - beta2 ** state["step"]
                denom = (s / bias2).sqrt_().add_(group["eps"])
                p.addcdiv_(m, denom, value=-group["lr"] / bias1)
        return loss
