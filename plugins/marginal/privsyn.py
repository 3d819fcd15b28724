"""The model code of `privsyn`, imported only when a cell uses it. The method, its defaults and where
they come from: the docstring of `dpgym.plugins.generators.privsyn`, which holds the spec; the
selection step's privacy analysis: docs/methods/privsyn.md.

Hand-written in numpy: the authors' code (DPSyn / privsyn-tabular) is a research script with its own
data loading, not a library, and the method is counts, Gaussian noise, a few projections and an
update loop over the synthetic rows.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import networkx as nx
import numpy as np
import pandas as pd

from dpgym import Budget, GaussianEvent, Guarantee, Ledger, Schema
from dpgym.plugins.marginal.domain import TableDomain
from dpgym.privacy import calibrate_gaussian, gaussian_epsilon

Clique = tuple[str, ...]

# Under add/remove, InDif(a, b) = Σ|N(a, b) − N(a)·N(b)/N| moves by less than 4 (docs/methods/privsyn.md),
# so the vector of all m pairs' InDif has L2 sensitivity 4·√m.
INDIF_SENSITIVITY = 4.0
ACCOUNTANT = "exact Gaussian composition (μ-GDP: Dong, Roth & Su 2019)"


@dataclass
class NoisyMarginal:
    """A marginal's noisy counts over its attributes (an array with one axis per attribute) and the
    noise deviation σ of each cell."""

    attributes: Clique
    counts: np.ndarray
    sigma: float

    @property
    def cells(self) -> int:
        return self.counts.size

    def projection(self, attribute: str) -> np.ndarray:
        axes = tuple(i for i, a in enumerate(self.attributes) if a != attribute)
        return self.counts.sum(axis=axes)


def marginal(cells: dict[str, np.ndarray], sizes: dict[str, int], clique: Clique) -> np.ndarray:
    shape = [sizes[a] for a in clique]
    flat = np.ravel_multi_index([cells[a] for a in clique], shape)
    return np.bincount(flat, minlength=math.prod(shape)).astype(float).reshape(shape)


def indif(joint: np.ndarray) -> float:
    """The paper's InDif on counts: the L1 distance between a pair's joint counts and the product of
    its two marginals scaled to the same total."""
    total = joint.sum()
    if total <= 0:
        return 0.0
    return float(np.abs(joint - np.outer(joint.sum(axis=1), joint.sum(axis=0)) / total).sum())


def dense_marg(pairs: list[Clique], noisy_indif: np.ndarray, cells: np.ndarray, rho: float) -> list[Clique]:
    """DenseMarg (the paper's Algorithm 1): greedily add the pair that most lowers the estimated total
    error, the expected L1 noise of the selected marginals plus the noisy InDif of those left out,
    until no pair lowers it. With ρ shared ∝ c^(2/3) over marginals of c cells, the selected set's
    expected noise is √(S / (π·ρ))·S, S = Σ c^(2/3)."""
    weights = cells ** (2.0 / 3.0)
    selected = np.zeros(len(pairs), dtype=bool)
    left_out = float(noisy_indif.sum())
    weight_sum = 0.0
    error = left_out
    while not selected.all():
        trial_weight = weight_sum + weights
        noise = np.sqrt(trial_weight / (math.pi * rho)) * trial_weight if math.isfinite(rho) else 0.0 * trial_weight
        trial = noise + left_out - noisy_indif
        trial[selected] = np.inf
        best = int(np.argmin(trial))
        if trial[best] >= error:
            break
        selected[best] = True
        error, weight_sum, left_out = float(trial[best]), weight_sum + weights[best], left_out - noisy_indif[best]
    return [pair for pair, chosen in zip(pairs, selected) if chosen]


def combine(pairs: list[Clique], sizes: dict[str, int], max_cells: int) -> list[Clique]:
    """The paper's marginal combination (Algorithm 2): cliques of three or more attributes in the graph
    of selected pairs become one marginal when it has fewer than `max_cells` cells and shares at most
    two attributes with the cliques already taken, largest first; the pairs none covers stay."""
    graph = nx.Graph(list(pairs))
    by_size: dict[int, list[Clique]] = {}
    for clique in nx.enumerate_all_cliques(graph):
        by_size.setdefault(len(clique), []).append(tuple(sorted(clique, key=list(sizes).index)))
    combined: list[Clique] = []
    taken: set[str] = set()
    for size in sorted((s for s in by_size if s >= 3), reverse=True):
        for clique in by_size[size]:
            if len(set(clique) & taken) <= 2 and math.prod(sizes[a] for a in clique) < max_cells:
                combined.append(clique)
                taken.update(clique)
    covered = {frozenset(p) for c in combined for p in itertools.combinations(c, 2)}
    return combined + [p for p in pairs if frozenset(p) not in covered]


def norm_sub(counts: np.ndarray, total: float) -> np.ndarray:
    """Norm-Sub (the paper's non-negativity step): zero the negative cells and subtract one common
    amount from the positive ones, zeroing those it would push below 0, until the cells sum to `total`."""
    flat = counts.ravel()
    if total <= 0:
        return np.zeros_like(counts)
    ordered = np.sort(flat)[::-1]
    # the largest k cells stay positive, each less δ_k = (Σ top k − total)/k; the right k is the last with top k − δ_k > 0
    shifts = (np.cumsum(ordered) - total) / np.arange(1, len(ordered) + 1)
    k = int(np.flatnonzero(ordered - shifts > 0)[-1]) if (ordered - shifts > 0).any() else 0
    return np.clip(counts - shifts[k], 0.0, None)


def make_consistent(marginals: list[NoisyMarginal], sizes: dict[str, int], iterations: int) -> None:
    """The paper's consistency post-processing, in place: every marginal gets one common total (the
    inverse-variance weighted mean of their totals); then, repeatedly, for each attribute the
    marginals holding it agree on its 1-way counts (their inverse-variance weighted mean, each
    marginal's difference spread evenly over the cells behind each value), and Norm-Sub makes every
    marginal non-negative again; until the 1-way counts agree within 1 or after `iterations`."""
    variances = [m.sigma**2 * m.cells if m.sigma > 0 else 1e-12 for m in marginals]
    total = float(np.average([m.counts.sum() for m in marginals], weights=[1 / v for v in variances]))
    total = max(total, 1.0)
    for m in marginals:
        m.counts = m.counts + (total - m.counts.sum()) / m.cells
    holders = {a: [m for m in marginals if a in m.attributes] for a in sizes}
    for _ in range(iterations):
        gap = 0.0
        for attribute, holding in holders.items():
            if len(holding) < 2:
                continue
            projections = [m.projection(attribute) for m in holding]
            behind = [m.cells / sizes[attribute] for m in holding]  # cells behind each value
            weights = np.array([1 / max(m.sigma**2 * b, 1e-12) for m, b in zip(holding, behind)])
            target = np.average(projections, axis=0, weights=weights)
            for m, projection, b in zip(holding, projections, behind):
                gap = max(gap, float(np.abs(projection - target).max()))
                shape = [sizes[attribute] if a == attribute else 1 for a in m.attributes]
                m.counts = m.counts + ((target - projection) / b).reshape(shape)
        for m in marginals:
            m.counts = norm_sub(m.counts, total)
        if gap < 1.0:
            break


class PrivSyn:
    """Noisy InDif scores, DenseMarg's selection and combination, Gaussian measurement of the 1-way and
    the selected marginals, consistency; records are then synthesised by GUM when sampled."""

    INDIF_SHARE, ONEWAY_SHARE = 0.1, 0.1  # of ρ; the selected marginals take the remaining 0.8

    def __init__(self, numeric_bins: int, combine_cells: int, consistency_iters: int, update_rounds: int,
                 initial_rate: float):
        if numeric_bins < 1:
            raise ValueError(f"numeric_bins must be ≥ 1, got {numeric_bins}")
        if combine_cells < 1:
            raise ValueError(f"combine_cells must be ≥ 1, got {combine_cells}")
        if consistency_iters < 1:
            raise ValueError(f"consistency_iters must be ≥ 1, got {consistency_iters}")
        if update_rounds < 0:
            raise ValueError(f"update_rounds must be ≥ 0, got {update_rounds}")
        if not 0 < initial_rate <= 1:
            raise ValueError(f"initial_rate must lie in (0, 1], got {initial_rate}")
        self.numeric_bins = numeric_bins
        self.combine_cells = combine_cells
        self.consistency_iters = consistency_iters
        self.update_rounds = update_rounds
        self.initial_rate = initial_rate

    def fit(self, train: pd.DataFrame, schema: Schema, budget: Budget, seed: int) -> Ledger:
        rng = np.random.default_rng(seed)
        self.domain_ = TableDomain(schema, self.numeric_bins)
        cells = self.domain_.encode(train)
        sizes = self.domain_.sizes
        names = list(sizes)
        private = budget.is_private
        # The whole budget as one Gaussian release of μ = 1/z (z the noise multiplier that spends ε at
        # δ); μ² = 2ρ adds up over releases, so the paper's ρ shares are shares of μ².
        rho = 1 / (2 * calibrate_gaussian(budget.epsilon, budget.delta) ** 2) if private else math.inf
        ledger = Ledger(Guarantee.FORMAL)

        def release(values: np.ndarray, sensitivity: float, share_rho: float, description: str) -> tuple[np.ndarray, float]:
            if not private:
                return values, 0.0
            sigma = sensitivity / math.sqrt(2 * share_rho)
            ledger.record(GaussianEvent(l2_sensitivity=sensitivity, sigma=sigma), delta=budget.delta,
                          accountant=ACCOUNTANT, description=description)
            return values + rng.normal(0.0, sigma, values.shape), sigma / sensitivity

        pairs = list(itertools.combinations(names, 2))
        selected: list[Clique] = []
        if pairs:
            scores = np.array([indif(marginal(cells, sizes, pair)) for pair in pairs])
            noisy, _ = release(scores, INDIF_SENSITIVITY * math.sqrt(len(pairs)), self.INDIF_SHARE * rho,
                               f"PrivSyn: InDif of all {len(pairs)} pairs (one vector)")
            measure_rho = (1 - self.INDIF_SHARE - self.ONEWAY_SHARE) * rho
            cell_counts = np.array([sizes[a] * sizes[b] for a, b in pairs], dtype=float)
            selected = combine(dense_marg(pairs, noisy, cell_counts, measure_rho), sizes, self.combine_cells)
        oneway_rho = (self.ONEWAY_SHARE if selected else 1 - self.INDIF_SHARE if pairs else 1.0) * rho / len(names)
        marginals = []
        for name in names:
            noisy, sigma = release(marginal(cells, sizes, (name,)), 1.0, oneway_rho, f"PrivSyn: 1-way marginal of {name!r}")
            marginals.append(NoisyMarginal((name,), noisy, sigma))
        if selected:
            weights = np.array([math.prod(sizes[a] for a in c) ** (2.0 / 3.0) for c in selected])
            shares = (1 - self.INDIF_SHARE - self.ONEWAY_SHARE) * rho * weights / weights.sum()
            for clique, share in zip(selected, shares):
                noisy, sigma = release(marginal(cells, sizes, clique), 1.0, share, f"PrivSyn: marginal of {list(clique)}")
                marginals.append(NoisyMarginal(clique, noisy, sigma))
        make_consistent(marginals, sizes, self.consistency_iters)
        self.marginals_ = marginals
        if not private:
            return Ledger.non_private(Guarantee.FORMAL, "PrivSyn: exact marginals (ε = ∞)")
        mu = math.sqrt(sum((e.event.l2_sensitivity / e.event.sigma) ** 2 for e in ledger.entries))
        ledger.claim(gaussian_epsilon(budget.delta, 1 / mu), budget.delta, "gdp")
        return ledger

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        records = gum(self.marginals_, self.domain_.sizes, n, self.update_rounds, self.initial_rate, rng)
        return self.domain_.decode({name: records[:, i] for i, name in enumerate(self.domain_.sizes)}, rng)


def gum(marginals: list[NoisyMarginal], sizes: dict[str, int], n: int, rounds: int, initial_rate: float,
        rng: np.random.Generator) -> np.ndarray:
    """GUM (gradually update method, the paper's Section 5): n records start with each attribute drawn
    to match its 1-way marginal; each round visits the marginals, worst-matched first, and moves
    records from the cells the records over-fill to the cells they under-fill. A cell below its target
    gains min(target − count, α·count) records (α·target when empty); the records moved come from the
    over-filled cells, each losing its excess. Even rounds move half the records by changing only the
    marginal's attributes and half by copying a record of the target cell whole; odd rounds copy
    (the authors' default, "S5"). α = initial_rate · 0.84^⌊round/20⌋ (their step decay, "U4")."""
    names = list(sizes)
    column = {a: i for i, a in enumerate(names)}
    records = np.zeros((n, len(names)), dtype=np.int64)
    for m in marginals:
        if len(m.attributes) == 1 and n:
            records[:, column[m.attributes[0]]] = rng.permutation(_rounded_cells(m.counts, n))
    if n == 0:
        return records
    for round_number in range(rounds):
        rate = initial_rate * 0.84 ** (round_number // 20)
        errors = [np.abs(_synthetic(records, m, sizes, column) - _target(m, n)).sum() for m in marginals]
        for index in np.argsort(errors)[::-1]:
            _update(records, marginals[index], sizes, column, n, rate, round_number % 2 == 0, rng)
    return records


def _target(m: NoisyMarginal, n: int) -> np.ndarray:
    total = m.counts.sum()
    flat = m.counts.ravel()
    return flat * (n / total) if total > 0 else np.full(flat.size, n / flat.size)


def _synthetic(records: np.ndarray, m: NoisyMarginal, sizes: dict[str, int], column: dict[str, int]) -> np.ndarray:
    keys = np.ravel_multi_index([records[:, column[a]] for a in m.attributes], [sizes[a] for a in m.attributes])
    return np.bincount(keys, minlength=m.cells).astype(float)


def _rounded_cells(counts: np.ndarray, n: int) -> np.ndarray:
    """n cell indices whose counts follow `counts` (non-negative) as closely as whole numbers can."""
    cumulative = np.rint(np.cumsum(_target(NoisyMarginal(("",), counts, 0.0), n))).astype(np.int64)
    cumulative[-1] = n
    return np.repeat(np.arange(counts.size), np.diff(np.concatenate(([0], np.maximum.accumulate(cumulative)))))


def _update(records: np.ndarray, m: NoisyMarginal, sizes: dict[str, int], column: dict[str, int], n: int,
            rate: float, half_replace: bool, rng: np.random.Generator) -> None:
    attributes = [column[a] for a in m.attributes]
    shape = [sizes[a] for a in m.attributes]
    keys = np.ravel_multi_index([records[:, i] for i in attributes], shape)
    synthetic = np.bincount(keys, minlength=m.cells).astype(float)
    target = _target(m, n)
    gain = np.where(synthetic > 0, np.minimum(target - synthetic, rate * synthetic), rate * target)
    gain = np.rint(np.clip(gain, 0, None)).astype(np.int64)
    excess = np.rint(np.clip(synthetic - target, 0, None)).astype(np.int64)
    moved = min(int(gain.sum()), int(excess.sum()))
    if moved == 0:
        return
    # The records of each cell in random order: the first `excess[c]` of cell c leave it.
    shuffled = rng.permutation(n)
    # numpy sorts 16-bit integers stably by radix, in linear time
    small = keys.astype(np.uint16) if m.cells <= 2**16 else keys
    order = shuffled[np.argsort(small[shuffled], kind="stable")]
    starts = np.concatenate(([0], np.cumsum(synthetic.astype(np.int64))))
    leaving = order[_first_of_each(starts[:-1], excess)]
    leaving = rng.permutation(leaving)[:moved]
    arriving = rng.permutation(np.repeat(np.arange(m.cells), gain))[:moved]
    # A record copied whole comes from the target cell itself, drawn before any record moves.
    count = synthetic.astype(np.int64)[arriving]
    copies = order[np.minimum(starts[arriving] + (rng.random(moved) * np.maximum(count, 1)).astype(np.int64), n - 1)]
    copy = count > 0
    if half_replace:
        copy &= np.arange(moved) % 2 == 1
    sources = records[copies[copy]].copy()
    records[leaving[~copy][:, None], attributes] = np.stack(np.unravel_index(arriving[~copy], shape), axis=1)
    records[leaving[copy]] = sources


def _first_of_each(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions starts[c], …, starts[c] + lengths[c] − 1 of every c, in one array."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(starts, lengths) + offsets
