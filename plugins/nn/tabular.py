"""Torch pieces the label-conditioned tabular generators (DP-MERF, DP-CGAN) share: the split of a
schema into features and class label, the output activation over a `TableEncoder` layout, and
drawing rows from that activation.

Everything here is fixed by the public schema; nothing is fitted on rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn


from dpgym import Schema, TableEncoder




@contextmanager
def seeded_torch(seed: int, device: torch.device) -> Iterator[None]:
    """Seed torch's global generator (weight initialisation) without disturbing the caller's stream."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        yield




@dataclass(frozen=True)
class LabelledLayout:
    """Features (one-hot / min-max encoded by the public schema) and the class label they are
    conditioned on: the schema's target when it is discrete, else a single implicit class."""

    schema: Schema
    features: TableEncoder
    label: str | None

    @classmethod
    def of(cls, schema: Schema) -> LabelledLayout:
        target = schema.target_column
        label = target.name if target is not None and not target.is_numeric else None
        if label is not None:
            schema.require_complete("a labelled one-hot layout's class label", [target])
        names = [c.name for c in schema.columns if c.name != label]
        return cls(schema, TableEncoder(schema, discrete="onehot", numeric_range=(0.0, 1.0), columns=names), label)

    @property
    def n_classes(self) -> int:
        return len(self.schema[self.label].categories) if self.label is not None else 1

    def labels(self, frame: pd.DataFrame) -> np.ndarray:
        """Class index of every row (all zeros without a discrete target)."""
        if self.label is None:
            return np.zeros(len(frame), dtype=np.int64)
        categories = list(self.schema[self.label].categories)
        return pd.Categorical(frame[self.label], categories=categories).codes.astype(np.int64)

    def numeric_positions(self) -> list[int]:
        return [b.start for b in self.features.blocks if b.is_numeric]

    def categorical_blocks(self) -> list[tuple[int, int]]:
        """One-hot blocks: categories (with missing when nullable) and numeric columns' missing flags."""
        return [(b.start, b.stop) for b in self.features.blocks if not b.is_numeric]

    def decode(self, features: np.ndarray, labels: np.ndarray) -> pd.DataFrame:
        """Rows in schema form (column order of the schema) from encoded features and class indices."""
        frame = self.features.decode(features)
        if self.label is not None:
            dtype = self.schema[self.label].dtype
            frame[self.label] = pd.Categorical.from_codes(labels, dtype=dtype)
        return frame[self.schema.names]


class EncodedOutput(nn.Module):
    """Maps a network's last layer to the encoded domain: a sigmoid for each min-max scaled number
    (so it stays inside the public bounds) and a softmax over each categorical one-hot block."""

    def __init__(self, layout: LabelledLayout):
        super().__init__()
        self.register_buffer("numeric", torch.as_tensor(layout.numeric_positions(), dtype=torch.long))
        self.blocks = layout.categorical_blocks()

    def forward(self, logits: Tensor) -> Tensor:
        out = torch.empty_like(logits)
        out[:, self.numeric] = torch.sigmoid(logits[:, self.numeric])
        for start, stop in self.blocks:
            out[:, start:stop] = torch.softmax(logits[:, start:stop], dim=1)
        return out


def draw_categories(encoded: np.ndarray, layout: LabelledLayout, rng: np.random.Generator) -> np.ndarray:
    """Replace each softmax block by a one-hot row drawn from it (numbers are kept as they are).

    Drawing rather than taking the argmax keeps minority categories: the generators are trained
    to match category probabilities, and an argmax would turn a 30 % category into 0 %."""
    out = encoded.copy()
    for start, stop in layout.categorical_blocks():
        probs = np.clip(encoded[:, start:stop], 0.0, None)
        probs /= probs.sum(axis=1, keepdims=True)
        cells = (probs.cumsum(axis=1) < rng.random((len(probs), 1))).sum(axis=1)
        out[:, start:stop] = 0.0
        out[np.arange(len(out)), start + np.minimum(cells, stop - start - 1)] = 1.0
    return out


def sample_labelled(network: nn.Module, labels: np.ndarray, noise_dim: int, layout: LabelledLayout,
                    device: torch.device, rng: np.random.Generator) -> pd.DataFrame:
    """Rows decoded from a label-conditioned generator network, drawn in chunks (post-processing)."""
    noise = torch.Generator(device=device).manual_seed(int(rng.integers(2**63)))
    chunks = []
    with torch.no_grad():
        for start in range(0, len(labels), 8192):
            part = torch.as_tensor(labels[start:start + 8192], device=device)
            z = torch.randn(len(part), noise_dim, generator=noise, device=device)
            chunks.append(network(z, part).double().cpu().numpy())
    encoded = np.concatenate(chunks) if chunks else np.zeros((0, layout.features.width))
    return layout.decode(draw_categories(encoded, layout, rng), labels)


def normalised_counts(noisy_counts: np.ndarray) -> np.ndarray:
    """Class proportions from noisy counts (post-processing): negatives clipped; all-zero → uniform."""
    clipped = np.clip(noisy_counts, 0.0, None)
    total = clipped.sum()
    return clipped / total if total > 0 else np.full(len(clipped), 1.0 / len(clipped))
