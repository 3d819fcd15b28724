"""The logistic-regression design matrix from a schema alone: numeric columns min-max scaled by
their public bounds, binary columns as one 0/1 indicator, other discrete columns one-hot.
Nothing is fitted on rows, so the encoding costs no privacy (docs/methods/expm-nf.md#adult)."""

from __future__ import annotations

import weakref

import numpy as np
import pandas as pd

from dpgym import ColumnKind, Schema, TableEncoder

# Population weights are not features, and no DP method weights its loss by them
# (docs/methods/expm-nf.md#adult).
NOT_FEATURES = frozenset({"fnlwgt"})


# The last frame encoded, by a weak reference, with its design and features. Kept here rather than
# on the Design, which every released model holds: a released model must carry no private rows.
_last_encoded: tuple[weakref.ref, Design, np.ndarray] | None = None


def _forget(reference: weakref.ref) -> None:
    """The encoded frame is gone: drop its features with it."""
    global _last_encoded
    if _last_encoded is not None and _last_encoded[0] is reference:
        _last_encoded = None


class Design:
    """Features X (float32, rows × d) and labels y ∈ {0, 1} of a binary-target schema."""

    def __init__(self, schema: Schema):
        target = schema.require_binary_target("a learner")
        self.schema = schema
        self.positive = target.categories[1]
        names = [c.name for c in schema.features if c.name not in NOT_FEATURES]
        self.binary = [n for n in names if schema[n].kind is ColumnKind.BINARY]
        self.encoder = TableEncoder(schema, columns=[n for n in names if n not in self.binary])
        self.width = self.encoder.width + len(self.binary)

    def features(self, frame: pd.DataFrame) -> np.ndarray:
        """The frame's features; the last frame's are kept while it lives, so scoring k models on
        one frame encodes it once."""
        global _last_encoded
        if _last_encoded is not None and _last_encoded[0]() is frame and _last_encoded[1] is self:
            return _last_encoded[2]
        x = self._encode(frame)
        _last_encoded = (weakref.ref(frame, _forget), self, x)
        return x

    def _encode(self, frame: pd.DataFrame) -> np.ndarray:
        indicators = [(frame[n].astype(str) == self.schema[n].categories[1]).to_numpy()[:, None] for n in self.binary]
        return np.hstack([self.encoder.encode(frame), *indicators]).astype(np.float32)

    def labels(self, frame: pd.DataFrame) -> np.ndarray:
        return (frame[self.schema.target].astype(str) == self.positive).to_numpy().astype(np.float32)
