"""A MADE conditioner (Germain et al. 2015) conditioned on a learned block embedding, so one network
serves several flow blocks: θ^j = NN_ν(x, q(j)) (DP-HFlow's "conditional spline flow",
docs/methods/dp-hflow.md#shared-conditioner).

The context q(j) = Eᵀ onehot(j) is an unmasked input added to every pre-activation (hidden and output) through
W_c (nflows-style conditional MADE), which keeps the outputs autoregressive in x. Every layer is a
plain or masked linear layer, so per-example gradients come from their registered rules; a layer
used by k blocks in one forward pass gets the sum of its k per-example gradients, kept factored
(`dpgym.plugins.nn.shared`) until the engine clips it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from dpgym.plugins.nn.layers import made_masks
from dpgym.plugins.nn.shared import SharedLinear, SharedMaskedLinear


class ConditionalMADE(nn.Module):
    """x (n, d), block j → (n, d, outputs_per_feature); output block i depends on x[:, :i] only."""

    def __init__(self, features: int, hidden: Sequence[int], outputs_per_feature: int, contexts: int,
                 embedding_dim: int):
        super().__init__()
        self.features, self.outputs_per_feature, self.contexts = features, outputs_per_feature, contexts
        masks = made_masks(features, list(hidden), outputs_per_feature)
        widths = [features, *hidden, features * outputs_per_feature]
        self.masked = nn.ModuleList(SharedMaskedLinear(i, o, m) for i, o, m in zip(widths[:-1], widths[1:], masks))
        self.embedding = SharedLinear(contexts, embedding_dim, bias=False)
        # The context also feeds the output layer, so output block 1 (which sees no input) differs per block.
        self.context = nn.ModuleList(SharedLinear(embedding_dim, w, bias=False) for w in widths[1:])
        # Zero output layer: every block starts as the identity spline.
        nn.init.zeros_(self.masked[-1].weight)
        nn.init.zeros_(self.masked[-1].bias)
        nn.init.zeros_(self.context[-1].weight)

    def forward(self, x: Tensor, context: int) -> Tensor:
        h, q = self._last_hidden(x, context)
        out = self.masked[-1](h) + self.context[-1](q)
        return out.view(len(x), self.features, self.outputs_per_feature)

    def feature_outputs(self, x: Tensor, context: int, feature: int) -> Tensor:
        """`forward(x, context)[:, feature]` without the other features' outputs. Inverting the flow
        takes one pass per feature and needs one feature's outputs from each; the output layer,
        features × outputs_per_feature wide, is most of a pass."""
        h, q = self._last_hidden(x, context)
        rows = slice(feature * self.outputs_per_feature, (feature + 1) * self.outputs_per_feature)
        last, ctx = self.masked[-1], self.context[-1]
        return F.linear(h, last.weight[rows] * last.mask[rows], last.bias[rows]) + F.linear(q, ctx.weight[rows])

    def _last_hidden(self, x: Tensor, context: int) -> tuple[Tensor, Tensor]:
        """The last hidden layer's activations, and the block embedding q(context)."""
        onehot = torch.zeros(len(x), self.contexts, dtype=x.dtype, device=x.device)
        onehot[:, context] = 1.0
        q = self.embedding(onehot)
        h = x
        for layer, ctx in zip(self.masked[:-1], self.context[:-1]):
            h = torch.relu(layer(h) + ctx(q))
        return h, q
