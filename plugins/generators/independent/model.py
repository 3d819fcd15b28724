"""The code of `dpgym.plugins.generators.independent`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.generators.independent`, which holds the spec."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

from dpgym import Budget, Column, ColumnKind, GaussianEvent, Guarantee, LaplaceEvent, Ledger, Measurement, Release, Schema
from dpgym.privacy import calibrate_gaussian


@dataclass(frozen=True)
class Bins:
    """Histogram cells of one column, fixed by the public schema alone (bounds, kind, the
    `heavy_tailed` hint). A nullable column has one more cell, the last, for a missing value: each
    row still counts in one cell per column, so the histograms' sensitivity is unchanged."""

    edges: np.ndarray | None  # numeric columns: bin edges over the public bounds
    size: int
    nullable: bool = False

    @classmethod
    def of(cls, col: Column, numeric_bins: int) -> Bins:
        if not col.is_numeric:
            return cls(None, len(col.categories) + col.nullable, col.nullable)
        if col.kind is ColumnKind.INTEGER and col.max - col.min + 1 <= numeric_bins:
            # one bin per integer value: edges at half-integers
            edges = np.arange(col.min - 0.5, col.max + 1.0, 1.0)
        elif col.heavy_tailed:
            # evenly spaced in log1p(x − min), as DP-HFlow maps such columns: with even bins a money
            # column's mass at 0 shares its first bin with values up to 1/bins of the range, and
            # draws spread uniformly across that bin (Adult's capital-gain: KS 0.92)
            edges = col.min + np.expm1(np.linspace(0.0, math.log1p(col.max - col.min), numeric_bins + 1))
            edges[-1] = col.max
        else:
            edges = np.linspace(col.min, col.max, numeric_bins + 1)
        return cls(edges, len(edges) - 1 + col.nullable, col.nullable)

    @property
    def missing(self) -> int | None:
        """The cell of a missing value, if the column may have one."""
        return self.size - 1 if self.nullable else None

    def cells(self, values: pd.Series) -> np.ndarray:
        """The histogram cell of every value, as int64: category codes are int8 below 128 categories,
        and the class-conditional index `label * size + cell` would wrap past 127."""
        absent = values.isna().to_numpy()
        if absent.any() and not self.nullable:
            raise ValueError(f"independent: column {values.name!r} has missing values but its schema says it "
                             "is not nullable")
        if self.edges is None:
            cells = values.cat.codes.to_numpy().astype(np.int64)
        else:
            numbers = values.astype(float).to_numpy(dtype=float, na_value=np.nan)
            cells = np.clip(np.searchsorted(self.edges, numbers, side="right") - 1, 0, len(self.edges) - 2)
        return np.where(absent, self.missing if self.nullable else 0, cells)


class Independent:
    def __init__(self, mechanism: str, numeric_bins: int, given_target: bool):
        if mechanism not in ("gaussian", "laplace"):
            raise ValueError(f"mechanism must be 'gaussian' or 'laplace', got {mechanism!r}")
        if numeric_bins < 1:
            raise ValueError(f"numeric_bins must be ≥ 1, got {numeric_bins}")
        self.mechanism = mechanism
        self.numeric_bins = numeric_bins
        self.given_target = given_target

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        rng = np.random.default_rng(seed)
        self.schema_ = schema
        self.bins_ = {c.name: Bins.of(c, self.numeric_bins) for c in schema.columns}
        self.target_ = schema.target if self.given_target else None
        counts = self._counts(train)
        d = len(counts)
        if not budget.is_private:
            ledger = Ledger.non_private(Guarantee.FORMAL, "exact histograms (ε = ∞)")
        elif self.mechanism == "gaussian":
            sigma = calibrate_gaussian(budget.epsilon, budget.delta) * math.sqrt(d)
            counts = {k: v + rng.normal(0.0, sigma, v.shape) for k, v in counts.items()}
            self.noise_ = ("gaussian", sigma)
            ledger = Ledger(Guarantee.FORMAL)
            ledger.record(GaussianEvent(l2_sensitivity=math.sqrt(d), sigma=sigma), epsilon=budget.epsilon,
                          delta=budget.delta, accountant="analytic Gaussian (Balle & Wang 2018)",
                          description=f"histograms of all {d} columns, one release")
        else:
            scale = d / budget.epsilon
            counts = {k: v + rng.laplace(0.0, scale, v.shape) for k, v in counts.items()}
            self.noise_ = ("laplace", scale)
            ledger = Ledger(Guarantee.FORMAL)
            ledger.record(LaplaceEvent(l1_sensitivity=float(d), scale=scale), epsilon=budget.epsilon, accountant="pure",
                          description=f"histograms of all {d} columns, one release")
        self.noisy_ = counts if budget.is_private else None
        self.probabilities_ = {k: _normalise(v) for k, v in counts.items()}
        return ledger

    def release(self) -> Release:
        """The noisy histograms before clipping and normalising, as one measurement (all d histograms
        flattened in column order): one row moves one count of each, so the query's L2 sensitivity is √d
        and its L1 sensitivity d, the values the noise was calibrated to. An ε = ∞ fit released exact
        counts: no measurements."""
        if self.noisy_ is None:
            return Release(())
        noise, scale = self.noise_
        d = len(self.noisy_)
        values = np.concatenate([v.ravel() for v in self.noisy_.values()])
        return Release((Measurement(values, partial(_histograms, self), noise, scale,
                                    math.sqrt(d) if noise == "gaussian" else float(d), f"histograms of all {d} columns"),))

    def _counts(self, train: pd.DataFrame) -> dict[str, np.ndarray]:
        """Histogram counts per column: 1-D, or (target classes × cells) for features given the target."""
        label = None if self.target_ is None else self.bins_[self.target_].cells(train[self.target_])
        return {name: self._column_counts(train, name, label) for name in self.bins_}

    def _column_counts(self, train: pd.DataFrame, name: str, label: np.ndarray | None) -> np.ndarray:
        """Column `name`'s histogram, within each class of `label` (the target's cells) unless it is None
        or the column is the target."""
        bins = self.bins_[name]
        cells = bins.cells(train[name])
        if label is None or name == self.target_:
            return np.bincount(cells, minlength=bins.size).astype(float)
        classes = self.bins_[self.target_].size
        counts = np.bincount(label * bins.size + cells, minlength=classes * bins.size)
        return counts.reshape(classes, bins.size).astype(float)

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        label = None
        if self.target_ is not None:
            label = rng.choice(self.bins_[self.target_].size, size=n, p=self.probabilities_[self.target_])
        columns = {}
        for col in self.schema_.columns:
            probabilities = self.probabilities_[col.name]
            if probabilities.ndim == 1:
                cells = label if col.name == self.target_ else rng.choice(len(probabilities), size=n, p=probabilities)
            else:  # inverse-CDF draw from each row's class-conditional histogram
                cdf = np.cumsum(probabilities, axis=1)[label]
                cells = np.minimum((cdf < rng.random((n, 1))).sum(axis=1), probabilities.shape[1] - 1)
            bins = self.bins_[col.name]
            absent = cells == bins.missing if bins.nullable else np.zeros(n, dtype=bool)
            if bins.edges is None:
                columns[col.name] = pd.Categorical.from_codes(np.where(absent, -1, cells), dtype=col.dtype)
                continue
            value_cells = np.where(absent, 0, cells)
            values = rng.uniform(bins.edges[value_cells], bins.edges[value_cells + 1])  # uniform within the chosen bin
            if col.kind is ColumnKind.INTEGER:
                values = np.clip(np.round(values), col.min, col.max)
            columns[col.name] = pd.Series(np.where(absent, np.nan, values)).astype(col.dtype)
        return pd.DataFrame(columns)


def _histograms(generator: Independent, frame: pd.DataFrame) -> np.ndarray:
    """The exact histograms of every column on `frame`, in the fitted generator's cells, flattened as
    its release's values are (the release's query)."""
    return np.concatenate([v.ravel() for v in generator._counts(frame).values()])


def _normalise(noisy_counts: np.ndarray) -> np.ndarray:
    """Post-processing: clip negative noisy counts and normalise each histogram (each row of a
    class-conditional one); an all-zero row falls back to the feature's overall histogram, then uniform."""
    clipped = np.clip(noisy_counts, 0.0, None)
    if clipped.ndim == 2:
        overall = _normalise(clipped.sum(axis=0))
        totals = clipped.sum(axis=1, keepdims=True)
        return np.where(totals > 0, clipped / np.where(totals > 0, totals, 1.0), overall)
    total = clipped.sum()
    return clipped / total if total > 0 else np.full(len(clipped), 1.0 / len(clipped))
