"""Private-PGM's estimate (McKenna, Sheldon & Miklau 2019, Algorithm 1: mirror descent with Armijo
step sizes), as `mbi.estimation.MirrorDescent` computes it, in numpy.

Why not `mbi`'s: JAX compiles its loop anew for every set of measured cliques, 4–10 s on Adult, and
AIM measures a new clique every round, so compilation was most of AIM's time while the 1,000
iterations themselves took 0.1–0.3 s. Here nothing is compiled: a structure's junction tree, message
schedule and axis bookkeeping are worked out once in Python (`Structure`), and each iteration is one
belief propagation in log space over the tree's tables with numpy. The steps are `mbi`'s:

- potentials θ over the maximal measured cliques (a clique inside another is folded into it), a
  warm start's potentials summed into the clique holding each of them (`CliqueVector.expand`);
- the loss ½·Σ_M ‖(μ_M − y_M)/σ_M‖², μ_M read from the smallest clique holding M;
- α₀ = 2/(L·N), L the loss's Lipschitz constant from the measurements' metadata, N the total;
- a step θ' = θ − α·∇L(μ); accepted when L(μ) − L(μ') ≥ ½·α·⟨∇L, μ − μ'⟩, then α grows by 1 %, else
  θ stays and α halves.

Belief propagation runs in probability space (`Structure._calibrated`), where `mbi` works in
log space: the same numbers up to rounding. `mbi` runs belief propagation twice per iteration (at θ and at θ'); the marginals at θ are those of
the last accepted step, so one propagation per iteration gives the same sequence of iterates.

Early stopping (`tolerance` > 0): `mbi`'s `tol` rule, checked every 50 iterations: stop once the
loss fell by at most `tolerance`·max(|loss|, 1) over each of two consecutive blocks of 50.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import mbi
import numpy as np

Clique = tuple[str, ...]

CHECK_EVERY = 50  # iterations between convergence checks (`mbi`'s CALLBACK_EVERY)
PATIENCE = 2  # consecutive converged blocks before stopping (`mbi`'s default patience)
SUMMED_AT_ONCE = 2**15  # cells of a table under which numpy's own sums over several axes are as fast
SMALLEST_SUM = 1e-250  # a node's table summing to less is recomputed in log space


@dataclass
class FittedModel:
    """A fitted graphical model: log-potentials over `cliques` (axes in each clique's order), the
    number of rows it describes, and how many iterations estimated it."""

    domain: mbi.Domain
    cliques: list[Clique]
    potentials: dict[Clique, np.ndarray]
    total: float
    iterations: int = 0


def _logsumexp(table: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """log Σ exp over `axes` (kept as length-1 axes), stable for finite tables."""
    top = table.max(axis=axes, keepdims=True)
    return np.log(np.exp(table - top).sum(axis=axes, keepdims=True)) + top


class Structure:
    """What one set of potential cliques fixes: the junction tree, its message schedule, where each
    potential and each measured marginal lives in it, and the axes each step sums."""

    def __init__(self, domain: mbi.Domain, cliques: tuple[Clique, ...]):
        self.domain = domain
        self.cliques = cliques
        tree, _ = mbi.junction_tree.make_junction_tree(domain, list(cliques))
        self.tree = tree
        self.nodes = [tuple(node) for node in mbi.junction_tree.maximal_cliques(tree)]
        self.shapes = {node: tuple(domain[a] for a in node) for node in self.nodes}
        self.order = [(tuple(i), tuple(j)) for i, j in mbi.junction_tree.message_passing_order(tree)]
        self.separators = {}  # (sender, receiver) → their shared attributes in the sender's order, and its shape
        for i, j in self.order:
            for sender, receiver in ((i, j), (j, i)):
                separator = tuple(a for a in sender if a in receiver)
                self.separators[sender, receiver] = separator, tuple(domain[a] for a in separator)
        self.summed = {(i, j): tuple(k for k, a in enumerate(i) if a not in j) for i, j in self.order}
        holder = mbi.clique_utils.clique_mapping(self.nodes, list(cliques), domain)
        self.holder = {c: tuple(holder[c]) for c in cliques}
        self.summing = {node: SummingTree(node, [c for c in cliques if self.holder[c] == node], domain)
                        for node in self.nodes}

    def _log_potentials(self, potentials: dict[Clique, np.ndarray]) -> dict[Clique, np.ndarray]:
        """Each tree node's log-potential: the sum of the potentials it holds."""
        return {node: tree.spread(potentials, self.shapes[node]) for node, tree in self.summing.items()}

    def distributions(self, potentials: dict[Clique, np.ndarray]) -> dict[Clique, np.ndarray]:
        """The model's probabilities over every tree node."""
        tables, sums = self._calibrated(potentials)
        return {node: table / sums[node] for node, table in tables.items()}

    def _calibrated(self, potentials: dict[Clique, np.ndarray]) -> tuple[dict[Clique, np.ndarray], dict[Clique, float]]:
        """Each tree node's table, proportional to the model's probabilities over it, and its sum; by
        HUGIN's schedule (as `mbi.marginal_oracles.message_passing_hugin`) in probability space: each
        node's table is exponentiated once (less its maximum), a message is a sum over the sender's
        table divided by the message it received from the receiver, scaled to a maximum of 1
        (constant factors cancel when each node is normalised). In log space, as `mbi` does it,
        every message costs an exponential of its sender's whole table, three times the time on
        Adult. Where a table underflows to no mass (or next to none: a sum under `SMALLEST_SUM`,
        whose reciprocal would turn its zeros into NaN counts), the log-space schedule runs instead."""
        tables = self._log_potentials(potentials)
        for table in tables.values():
            table -= table.max()
            np.exp(table, out=table)
        messages: dict[tuple[Clique, Clique], np.ndarray] = {}  # kept with the sender's axes, length 1 where summed
        for sender, receiver in self.order:
            summed = self.summed[sender, receiver]
            message = _sum_out(tables[sender], summed) if summed else tables[sender].copy()
            if (receiver, sender) in messages:
                previous = self._moved(messages[receiver, sender], receiver, sender)
                message = np.divide(message, previous, out=np.zeros_like(message), where=previous > 0)
            top = message.max()
            if top > 0:
                message /= top
            messages[sender, receiver] = message
            tables[receiver] *= self._moved(message, sender, receiver)
        sums = {node: float(table.sum()) for node, table in tables.items()}
        # A sum of denormal size would overflow the factor that scales its table to counts.
        if all(math.isfinite(z) and z > SMALLEST_SUM for z in sums.values()):
            return tables, sums
        logs = self.beliefs(potentials)
        tables = {node: np.exp(log - _logsumexp(log, tuple(range(log.ndim)))) for node, log in logs.items()}
        return tables, dict.fromkeys(tables, 1.0)

    def beliefs(self, potentials: dict[Clique, np.ndarray]) -> dict[Clique, np.ndarray]:
        """Log-space calibrated beliefs of every tree node (HUGIN schedule, as
        `mbi.marginal_oracles.message_passing_hugin`), not yet normalised."""
        beliefs = self._log_potentials(potentials)
        messages: dict[tuple[Clique, Clique], np.ndarray] = {}  # log-space, kept as the sender's axes
        for sender, receiver in self.order:
            belief = beliefs[sender]
            if (receiver, sender) in messages:
                belief = belief - self._moved(messages[receiver, sender], receiver, sender)
            summed = tuple(k for k, a in enumerate(sender) if a not in receiver)
            messages[sender, receiver] = _logsumexp(belief, summed) if summed else belief
            beliefs[receiver] = beliefs[receiver] + self._moved(messages[sender, receiver], sender, receiver)
        return beliefs

    def _moved(self, message: np.ndarray, sender: Clique, receiver: Clique) -> np.ndarray:
        """A message with length-1 axes over `sender` re-expressed over `receiver`'s axes."""
        separator, shape = self.separators[sender, receiver]
        return _into(message.reshape(shape), separator, receiver)

    def marginals(self, potentials: dict[Clique, np.ndarray], total: float) -> dict[Clique, np.ndarray]:
        """μ: the model's counts over each potential clique, axes in the clique's order."""
        tables, sums = self._calibrated(potentials)
        mu = {}
        for node, tree in self.summing.items():
            for clique, table in tree.project(tables[node]).items():
                mu[clique] = table * (total / sums[node])
        return mu


class SummingTree:
    """How one tree node's table reaches the potential cliques it holds, and back. Summed out one
    clique at a time, a node of 362,880 cells holding 8 cliques (AIM on Adult at ε = 4) costs 8 passes
    over the whole table per iteration, and as many again to add the potentials up into it. Here an
    attribute that many of the cliques lack is summed out once, and those cliques are read from the
    smaller table, recursively: the node's table is passed over a few times, the rest are smaller.

    `steps` are (larger, smaller, axis): `smaller` is `larger` summed over `axis`; `reads` gives the
    table each clique is read from (its attributes in the node's order). A node under
    `SUMMED_AT_ONCE` cells has no steps: each clique is read from it directly, where a step's
    bookkeeping in Python would cost more than the pass it saves."""

    def __init__(self, node: Clique, cliques: list[Clique], domain: mbi.Domain):
        self.node = node
        self.steps: list[tuple[Clique, Clique, int]] = []
        self.reads: dict[Clique, Clique] = {}
        if domain.size(node) < SUMMED_AT_ONCE:
            self.reads = dict.fromkeys(cliques, node)
        else:
            self._plan(node, cliques, domain)

    def _plan(self, attributes: Clique, cliques: list[Clique], domain: mbi.Domain) -> None:
        rest = []
        for clique in cliques:
            if set(clique) == set(attributes):
                self.reads[clique] = attributes
            else:
                rest.append(clique)
        while rest:  # sum out the attribute most of the rest lack (the larger, on a tie)
            dropped = max(attributes, key=lambda a: (sum(a not in c for c in rest), domain[a], a))
            smaller = tuple(a for a in attributes if a != dropped)
            self.steps.append((attributes, smaller, attributes.index(dropped)))
            self._plan(smaller, [c for c in rest if dropped not in c], domain)
            rest = [c for c in rest if dropped in c]

    def project(self, table: np.ndarray) -> dict[Clique, np.ndarray]:
        """The sums of `table` (over the node) onto each clique, axes in the clique's order."""
        tables = {self.node: table}
        for larger, smaller, axis in self.steps:
            tables[smaller] = tables[larger].sum(axis=axis)
        return {clique: _project(tables[read], read, clique) for clique, read in self.reads.items()}

    def spread(self, potentials: dict[Clique, np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
        """The sum of the cliques' potentials as a table over the node (each broadcast over the
        attributes it lacks): added up from the smallest tables of `steps` to the node."""
        sums: dict[Clique, np.ndarray] = {}
        for clique, read in self.reads.items():
            table = _into(potentials[clique], clique, read)
            sums[read] = sums[read] + table if read in sums else table
        for larger, smaller, axis in reversed(self.steps):
            if smaller in sums:
                table = np.expand_dims(sums.pop(smaller), axis)
                sums[larger] = sums[larger] + table if larger in sums else table
        total = sums.get(self.node)
        return np.zeros(shape) if total is None else np.broadcast_to(total, shape).copy()


def _project(table: np.ndarray, attributes: Clique, onto: Clique) -> np.ndarray:
    """Σ of `table` (axes `attributes`) over the attributes not in `onto`, axes in `onto`'s order."""
    summed, order = _projection_axes(attributes, onto)
    result = _sum_out(table, summed, keepdims=False) if summed else table
    return result.transpose(order)


def _sum_out(table: np.ndarray, axes: tuple[int, ...], keepdims: bool = True) -> np.ndarray:
    """Σ of `table` over `axes`: in a large table one axis at a time, the longest first. numpy sums
    several axes of a large table at once far slower than one by one (a junction-tree node of
    362,880 cells over three of its seven axes: 4.7 ms at once, 0.65 ms one by one)."""
    if len(axes) == 1 or table.size < SUMMED_AT_ONCE:
        return table.sum(axis=axes, keepdims=keepdims)
    for axis in sorted(axes, key=lambda k: -table.shape[k]):
        table = table.sum(axis=axis, keepdims=True)
    return table if keepdims else table.squeeze(axis=axes)


# The axis bookkeeping of `_project` and `_into`, looked up rather than worked out again: an
# iteration moves tables between the same cliques hundreds of times, and on Adult's small models the
# bookkeeping in Python cost as much as the arithmetic.
@lru_cache(maxsize=None)
def _projection_axes(attributes: Clique, onto: Clique) -> tuple[tuple[int, ...], tuple[int, ...]]:
    kept = [a for a in attributes if a in onto]
    return tuple(k for k, a in enumerate(attributes) if a not in onto), tuple(kept.index(a) for a in onto)


@lru_cache(maxsize=None)
def _broadcast_axes(attributes: Clique, target: Clique,
                    shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    order = tuple(sorted(range(len(attributes)), key=lambda i: target.index(attributes[i])))
    return order, tuple(shape[attributes.index(a)] if a in attributes else 1 for a in target)


@lru_cache(maxsize=8)
def structure(domain: mbi.Domain, cliques: tuple[Clique, ...]) -> Structure:
    return Structure(domain, cliques)


class Loss:
    """½·Σ_M ‖(μ_M − y_M)/σ_M‖² over the measurements, μ_M read from the smallest potential
    clique holding M (`CliqueVector.project`), and its gradient in μ."""

    def __init__(self, domain: mbi.Domain, measurements: list[mbi.LinearMeasurement], cliques: tuple[Clique, ...]):
        self.terms = []
        for m in measurements:
            holding = min((c for c in cliques if set(m.clique) <= set(c)), key=domain.size)
            shape = tuple(domain[a] for a in m.clique)
            stddev = max(float(m.stddev), 1e-12)
            self.terms.append((tuple(m.clique), holding, np.asarray(m.noisy_measurement, float).reshape(shape), stddev))

    def evaluate(self, mu: dict[Clique, np.ndarray]) -> tuple[float, list[np.ndarray]]:
        """The loss at μ and each term's residual (μ_M − y_M)/σ_M, from which `gradient` follows."""
        residuals = [(_project(mu[holding], holding, clique) - noisy) / stddev
                     for clique, holding, noisy, stddev in self.terms]
        return 0.5 * sum(float(np.vdot(r, r)) for r in residuals), residuals

    def gradient(self, mu: dict[Clique, np.ndarray], residuals: list[np.ndarray]) -> dict[Clique, np.ndarray]:
        """∇L in μ: each term's residual over σ_M, broadcast over the clique holding it."""
        gradient = {c: np.zeros_like(table) for c, table in mu.items()}
        for (clique, holding, _, stddev), residual in zip(self.terms, residuals):
            gradient[holding] = gradient[holding] + _into(residual / stddev, clique, holding)
        return gradient


def _into(table: np.ndarray, attributes: Clique, target: Clique) -> np.ndarray:
    """`table` over `attributes` broadcast to a full table over `target` (axes in its order)."""
    order, shape = _broadcast_axes(attributes, target, table.shape)
    return table.transpose(order).reshape(shape)


def warm_potentials(domain: mbi.Domain, cliques: tuple[Clique, ...],
                    warm_start: FittedModel | None) -> dict[Clique, np.ndarray]:
    """Zero potentials over `cliques`, plus each of `warm_start`'s added into the smallest of them
    holding it (`mbi`'s `CliqueVector.expand`): the same distribution as `warm_start`."""
    potentials = {c: np.zeros(tuple(domain[a] for a in c)) for c in cliques}
    if warm_start is not None:
        mapping = mbi.clique_utils.clique_mapping(list(cliques), list(warm_start.potentials), domain)
        for old, table in warm_start.potentials.items():
            target = tuple(mapping[old])
            potentials[target] = potentials[target] + _into(np.asarray(table), old, target)
    return potentials


def mirror_descent(domain: mbi.Domain, measurements: list[mbi.LinearMeasurement], total: float, iters: int,
                   warm_start: FittedModel | None = None, tolerance: float = 0.0) -> FittedModel:
    """The estimate, after `iters` iterations (rounded up to a multiple of 50, as `mbi`), or fewer when
    `tolerance` > 0 and the loss converged."""
    cliques = tuple(mbi.clique_utils.maximal_subset([m.clique for m in measurements]))
    plan = structure(domain, cliques)
    loss_fn = Loss(domain, measurements, cliques)
    lipschitz = mbi.marginal_loss.calculate_l2_lipschitz_from_metadata(domain, measurements)
    theta = warm_potentials(domain, cliques, warm_start)
    alpha = 2.0 / (lipschitz * total)
    mu = plan.marginals(theta, total)
    loss, residuals = loss_fn.evaluate(mu)
    previous, stalls, ran = math.inf, 0, 0
    blocks = math.ceil(iters / CHECK_EVERY)
    for _ in range(blocks):
        for _ in range(CHECK_EVERY):
            gradient = loss_fn.gradient(mu, residuals)
            proposal = {c: theta[c] - alpha * gradient[c] for c in cliques}
            mu_proposal = plan.marginals(proposal, total)
            loss_proposal, residuals_proposal = loss_fn.evaluate(mu_proposal)
            decrease = sum(float(np.vdot(gradient[c], mu[c] - mu_proposal[c])) for c in cliques)
            if loss - loss_proposal >= 0.5 * alpha * decrease:
                theta, mu, alpha = proposal, mu_proposal, 1.01 * alpha
                loss, residuals = loss_proposal, residuals_proposal
            else:
                alpha = 0.5 * alpha
            ran += 1
        if tolerance > 0:
            stalls = stalls + 1 if previous - loss <= tolerance * max(abs(loss), 1.0) else 0
            previous = loss
            if stalls >= PATIENCE:
                break
    return FittedModel(domain, list(cliques), theta, total, ran)
