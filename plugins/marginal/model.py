"""A graphical model fitted to noisy marginals by Private-PGM's mirror descent (in numpy,
`mirror_descent`, or `mbi`'s JAX estimator); its marginals and samples are then read in numpy from
the model's junction tree.

Why not `mbi`'s own `project` and `synthetic_data`: a marginal over attributes that no clique of the
model holds goes through `variable_elimination`, which JAX compiles anew for every query and every
model structure (AIM asks for every candidate marginal after every round: 32–35 s of compilation
per 20 candidates on Adult), and even its belief propagation compiles anew for each structure
(about 3 s a round). Here belief propagation over the junction tree runs in numpy, once per
model, and gives the tables of the tree's maximal cliques; any marginal is then an einsum over
the smallest subtree connecting its attributes: P(subtree) = Π P(clique) / Π P(separator), in
milliseconds. `synthetic_data` draws from numpy's global random state; `ModelMarginals.sample`
draws i.i.d. rows from the same tables with the cell's own generator, clique by clique down the
tree.

Importing this module configures JAX: 64-bit floats (`mbi` warns that its estimates stall in
float32 on large tables) and no persistent compilation cache (`mbi` compiles many small programs).
It does not start JAX's backend, so a forkserver may import it before forking cells. JAX's CPU
thread pool follows the process's CPU affinity: neither OMP_NUM_THREADS nor XLA's thread flags
bound it, so a cell granted one thread may briefly run more (AIM on Adult: 1.2 CPU seconds per
second on 2 cores).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_enable_compilation_cache", False)

import mbi  # noqa: E402  (after 64-bit mode, which it checks on import)
import networkx as nx  # noqa: E402

from dpgym.plugins.marginal.draws import inverse_cdf_draws  # noqa: E402
from dpgym.plugins.marginal.mirror_descent import FittedModel, mirror_descent, structure  # noqa: E402

Clique = tuple[str, ...]


def model_domain(sizes: dict[str, int]) -> mbi.Domain:
    return mbi.Domain(list(sizes), list(sizes.values()))


def model_size_mb(domain: mbi.Domain, cliques: list[Clique]) -> float:
    """The size of a model over `cliques`: its junction tree's tables at 8 bytes a cell, in MB (2²⁰
    bytes), as AIM's `max_model_size` counts it. The same number as `mbi.junction_tree.
    hypothetical_model_size`, in a fraction of its time: AIM asks it for every candidate in every
    round (860 candidates a round on Census), and mbi builds the whole junction tree each time
    (10.6 ms against 0.8 ms here on Census's domain), where the size needs only the elimination.

    mbi eliminates greedily: in the domain's order, the first attribute whose neighbourhood (itself and
    every attribute it shares a clique with) has the fewest cells, an attribute in no clique costing 1;
    eliminating it joins its neighbours. The tree's tables are the maximal neighbourhoods at
    elimination (the maximal cliques of the graph triangulated in that order)."""
    sizes = dict(zip(domain.attributes, domain.shape))
    neighbours: dict[str, set[str]] = {a: set() for a in sizes}
    covered: set[str] = set()
    for clique in cliques:
        covered.update(clique)
        for a in clique:
            neighbours[a].update(b for b in clique if b != a)
    remaining = list(sizes)
    eliminated: list[frozenset[str]] = []
    while remaining:
        costs = [math.prod(sizes[b] for b in neighbours[a]) * sizes[a] if a in covered else 1 for a in remaining]
        a = remaining.pop(costs.index(min(costs)))
        around = neighbours.pop(a)
        for b in around:
            neighbours[b] |= around - {b}
            neighbours[b].discard(a)
        eliminated.append(frozenset(around | {a}))
    maximal = [c for i, c in enumerate(eliminated) if not any(c < other for other in eliminated[:i])]
    return sum(math.prod(sizes[a] for a in c) for c in maximal) * 8 / 2**20


def marginal_counts(cells: dict[str, np.ndarray], sizes: dict[str, int], clique: Clique) -> np.ndarray:
    """The counts of one marginal of the encoded rows, flattened (C order over `clique`)."""
    shape = [sizes[a] for a in clique]
    return np.bincount(np.ravel_multi_index([cells[a] for a in clique], shape), minlength=math.prod(shape)).astype(float)


def loss_scale(sigma: float) -> float:
    """The noise scale Private-PGM's loss divides a measurement by: σ, and 1 for exact counts (σ = 0,
    a non-private run)."""
    return sigma if sigma > 0 else 1.0


def linear_measurement(clique: Clique, noisy: np.ndarray, sigma: float) -> mbi.LinearMeasurement:
    return mbi.LinearMeasurement(noisy, clique, stddev=loss_scale(sigma))


@dataclass
class Measurements:
    """Noisy marginals, one per clique: a clique measured again is merged with its earlier
    measurement by inverse-variance weighting, which leaves the estimation loss the same up to a
    constant and keeps the model's structure, so JAX does not recompile the estimator for it."""

    fixed: list[mbi.LinearMeasurement] = field(default_factory=list)  # kept as given (e.g. over merged values)
    precision_weighted: dict[Clique, np.ndarray] = field(default_factory=dict)  # Σ y/σ²
    precision: dict[Clique, float] = field(default_factory=dict)  # Σ 1/σ²

    def add(self, clique: Clique, noisy: np.ndarray, sigma: float) -> None:
        weight = 1.0 / loss_scale(sigma) ** 2
        self.precision_weighted[clique] = self.precision_weighted.get(clique, 0.0) + weight * noisy
        self.precision[clique] = self.precision.get(clique, 0.0) + weight

    def linear(self) -> list[mbi.LinearMeasurement]:
        merged = [linear_measurement(c, self.precision_weighted[c] / w, w**-0.5) for c, w in self.precision.items()]
        return [*self.fixed, *merged]

    def total(self) -> float:
        """The number of rows estimated from the noisy marginals: each one's sum, weighted by the
        inverse of its variance (at least 1)."""
        return mbi.estimation.minimum_variance_unbiased_total(self.linear())


ESTIMATORS = ("numpy", "mbi")


def estimate(domain: mbi.Domain, measurements: Measurements, iters: int, total: float | None = None,
             warm_start: FittedModel | None = None, tolerance: float = 0.0,
             estimator: str = "numpy") -> FittedModel:
    """Private-PGM's estimate: mirror descent with Armijo step sizes (McKenna et al. 2019, Alg. 1). The
    number of rows is `total`, or else `measurements.total()`; `tolerance` > 0 stops once the loss
    has converged (`mirror_descent`'s rule).

    `estimator` "numpy" (`mirror_descent`) computes nothing ahead; "mbi" is `mbi`'s JAX estimator,
    which compiles a program for every new set of measured cliques (on Adult 4–10 s, against
    0.1–0.3 s for its 1,000 iterations) and runs on whatever device JAX uses."""
    linear = measurements.linear()
    total = measurements.total() if total is None else total
    if estimator == "numpy":
        return mirror_descent(domain, linear, total, iters, warm_start, tolerance)
    if estimator != "mbi":
        raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}")
    start = None
    if warm_start is not None:
        start = mbi.CliqueVector(domain, warm_start.cliques, {c: mbi.Factor(domain.project(c), table)
                                                             for c, table in warm_start.potentials.items()})
    return fitted_from_mbi(mbi.estimation.MirrorDescent().estimate(
        domain, linear, known_total=total, iters=iters, warm_start=start, tol=tolerance if tolerance > 0 else None))


def fitted_from_mbi(model: mbi.MarkovRandomField) -> FittedModel:
    """`mbi`'s model as the numpy estimator's: its log-potentials as arrays."""
    return FittedModel(model.domain, list(model.cliques),
                       {c: np.asarray(f.values) for c, f in model.potentials.tables.items()}, float(model.total))


def forget_compiled_estimates() -> None:
    """Drop the programs JAX compiled to estimate models of earlier structures (the "mbi"
    estimator). Each keeps about a thousand memory mappings; AIM compiles new ones every round, and
    past Linux's default limit of 65,530 mappings per process LLVM cannot map the next one (AIM on
    Census aborted after 27 minutes). A structure never comes back once AIM has measured a new clique."""
    mbi.estimation.Estimator._multi_step.clear_cache()
    mbi.marginal_oracles.message_passing_hugin.clear_cache()


class ModelMarginals:
    """A fitted model's distribution as count tables over its junction tree's maximal cliques."""

    def __init__(self, model: FittedModel):
        plan = structure(model.domain, tuple(model.cliques))
        self.tables = {node: table * model.total for node, table in plan.distributions(model.potentials).items()}
        tree = plan.tree.copy()
        # Parts of the model that share no attribute are independent: joined by an edge whose
        # separator is empty, they make one tree and need no special case below.
        parts = [min(part) for part in nx.connected_components(tree)]
        tree.add_edges_from((parts[0], part) for part in parts[1:])
        self.tree = tree

    def project(self, attributes: Clique) -> np.ndarray:
        """The counts of the marginal over `attributes`, an array with one axis per attribute."""
        wanted = set(attributes)
        holding = [clique for clique in self.tables if wanted <= set(clique)]
        if holding:
            clique = min(holding, key=lambda c: self.tables[c].size)
            return _einsum([(self.tables[clique], clique)], attributes)
        nodes = self._connecting_subtree(attributes)
        factors = [(self.tables[node], node) for node in nodes]
        for a, b in self.tree.subgraph(nodes).edges:
            separator = tuple(x for x in a if x in b)
            counts = _einsum([(self.tables[a], a)], separator)
            factors.append((np.divide(1.0, counts, out=np.zeros_like(counts), where=counts > 0), separator))
        return _einsum(factors, attributes)

    def project_many(self, queries: list[Clique]) -> dict[Clique, np.ndarray]:
        """`project` for every query at once, the same numbers up to rounding. A query inside a clique
        reads that clique's table. A pair (a, b) that no clique holds is read from one walk of the
        tree per attribute a: from a clique holding a, each clique C that lacks a receives the counts
        over a and its separator S with the clique it was reached from, N(a, S), and passes on
        N(a, S') = Σ N(a, S)·P(S ∪ S')/P(S) over its separator S' with each next clique; then
        N(a, b) = Σ_S N(a, S)·P(S ∪ {b})/P(S) for each b in C. All pairs cost one walk per attribute,
        whose tables hold |a| times a separator's cells, where `project` contracts a subtree's
        tables per pair, and its einsum may build intermediates over several cliques at once.

        `mbi.marginal_oracles.calculate_many_marginals` answers many queries too, from tables over
        the union of every two cliques, which outgrow memory once cliques reach 10⁵ cells. Other
        queries (three or more attributes no clique holds) go through `project`."""
        answers: dict[Clique, np.ndarray] = {}
        partners: dict[str, set[str]] = {}  # a → every b such that (a, b) or (b, a) is asked and no clique holds them
        for query in queries:
            if len(query) == 2 and not any(set(query) <= set(clique) for clique in self.tables):
                a, b = query
                partners.setdefault(a, set()).add(b)
                partners.setdefault(b, set()).add(a)
            elif query not in answers:
                answers[query] = self.project(query)
        while partners:  # walk from the attribute with most pairs left: fewer walks in all
            source = max(partners, key=lambda a: (len(partners[a]), a))
            for partner, counts in self._pairs_with(source, sorted(partners.pop(source))).items():
                answers[source, partner], answers[partner, source] = counts, counts.T
                partners[partner].discard(source)
                if not partners[partner]:
                    del partners[partner]
        return {query: answers[query] for query in queries}

    def _pairs_with(self, source: str, partners: list[str]) -> dict[str, np.ndarray]:
        """The counts over (source, b) for each b of `partners`, none in a clique with `source`: one
        walk of the subtree from a clique holding `source` to the nearest clique holding each b."""
        root = min((c for c in self.tables if source in c), key=lambda c: self.tables[c].size)
        paths = nx.single_source_shortest_path(self.tree, root)
        reading = {b: self._nearest_holding(b, paths) for b in partners}
        subtree = nx.bfs_tree(self.tree.subgraph({node for clique in reading.values() for node in paths[clique]}), root)
        read_at: dict[Clique, list[str]] = {}
        for b, clique in reading.items():
            read_at.setdefault(clique, []).append(b)
        received: dict[Clique, tuple[np.ndarray, Clique]] = {}  # clique → N(source, S) and S
        answers: dict[str, np.ndarray] = {}
        for clique in nx.topological_sort(subtree):
            table = self.tables[clique]
            for child in subtree.successors(clique):
                if source in child:  # its table holds the source: nothing to pass on
                    continue
                separator = tuple(x for x in clique if x in child)
                received[child] = (_pass_on(table, clique, received.get(clique), source, separator), separator)
            for b in read_at.get(clique, []):
                answers[b] = _pass_on(table, clique, received.get(clique), source, (b,))
        return answers

    def _connecting_subtree(self, attributes: Clique) -> set[Clique]:
        """Cliques that together hold every attribute and form a subtree: from the clique holding
        most of them, the path to the nearest clique holding each one it lacks."""
        root = max(self.tables, key=lambda c: len(set(c) & set(attributes)))
        paths = nx.single_source_shortest_path(self.tree, root)
        nodes = {root}
        for attribute in set(attributes) - set(root):
            nodes.update(paths[self._nearest_holding(attribute, paths)])
        return nodes

    def _nearest_holding(self, attribute: str, paths: dict[Clique, list[Clique]]) -> Clique:
        """The clique holding `attribute` with the shortest of `paths` (from one root to each clique)."""
        return min((c for c in self.tables if attribute in c), key=lambda c: len(paths[c]))

    def sample(self, rows: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """`rows` i.i.d. draws of every attribute's cell: the root clique from its table, then each
        clique's new attributes given the ones it shares with its parent."""
        root = next(iter(self.tables))
        drawn: dict[str, np.ndarray] = {}
        for parent, clique in [(None, root), *nx.bfs_edges(self.tree, root)]:
            given = tuple(a for a in clique if parent is not None and a in parent)
            new = tuple(a for a in clique if a not in given)
            table = _einsum([(self.tables[clique], clique)], given + new)
            new_shape = table.shape[len(given):]
            conditional = table.reshape(-1, int(np.prod(new_shape, dtype=np.int64)))
            given_index = (np.ravel_multi_index([drawn[a] for a in given], table.shape[:len(given)]) if given
                           else np.zeros(rows, dtype=np.int64))
            flat = inverse_cdf_draws(conditional, given_index, rng)
            for attribute, cells in zip(new, np.unravel_index(flat, new_shape)):
                drawn[attribute] = cells
        return drawn


def _pass_on(table: np.ndarray, clique: Clique, received: tuple[np.ndarray, Clique] | None, source: str,
             target: Clique) -> np.ndarray:
    """The counts over (`source`, *`target`) for `target` inside `clique`: from `clique`'s own table
    when it holds `source` (`received` is None), else Σ_S N(source, S)·P(S ∪ target)/P(S) from the
    counts N(source, S) it received over its separator S. The sum is a batched matrix product over
    the attributes S and `target` share, so no table larger than P(S ∪ target) is built."""
    if received is None:
        return _einsum([(table, clique)], (source, *target))
    counts, separator = received
    shared = tuple(x for x in separator if x in target)
    summed = tuple(x for x in separator if x not in target)
    added = tuple(x for x in target if x not in separator)
    joint = _einsum([(table, clique)], shared + summed + added)  # P(S ∪ target)
    batch, inner = joint.shape[:len(shared)], joint.shape[len(shared):len(separator)]
    joint = joint.reshape(math.prod(batch), math.prod(inner), -1)
    marginal = joint.sum(axis=2, keepdims=True)
    conditional = np.divide(joint, marginal, out=np.zeros_like(joint), where=marginal > 0)
    received_counts = _einsum([(counts, (source, *separator))], shared + (source,) + summed)
    result = received_counts.reshape(math.prod(batch), counts.shape[0], math.prod(inner)) @ conditional
    result = result.reshape(*batch, counts.shape[0], *[table.shape[clique.index(x)] for x in added])
    return _einsum([(result, shared + (source,) + added)], (source, *target))


def _einsum(factors: list[tuple[np.ndarray, Clique]], output: Clique) -> np.ndarray:
    """Σ over the attributes not in `output` of the product of `factors` (each a table and its
    attributes), with one axis per attribute of `output`, in its order."""
    letters = {a: i for i, a in enumerate(dict.fromkeys(a for _, clique in factors for a in clique))}
    operands = [item for table, clique in factors for item in (table, [letters[a] for a in clique])]
    return np.einsum(*operands, [letters[a] for a in output], optimize="greedy")


def measure(counts: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """A marginal's counts with N(0, σ²) noise on every cell (exact at σ = 0, a non-private run)."""
    return counts + rng.normal(0.0, sigma, counts.shape) if sigma > 0 else counts.astype(float)
