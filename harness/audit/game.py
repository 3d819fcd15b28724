"""Empirical privacy audit of a generator: a lower bound on ε from a distinguishing game, beside the
ε its ledger claims (docs/privacy.md#empirical-audits).

The re-accounting checks a ledger's arithmetic; it cannot see a mechanism the ledger leaves out. The
audit treats the generator as a black box instead. Neighbouring datasets D (a fixed subsample of the
training split) and D′ = D plus one target record built from the public schema alone are fitted in
turn, by a seeded fair coin per fit; an attack sees only each fit's synthetic rows and scores how
likely the target was in. Any (ε, δ)-DP mechanism bounds every such test: FPR + e^ε·FNR ≥ 1 − δ and
e^ε·FPR + FNR ≥ 1 − δ (Kairouz, Oh & Viswanath 2015), so error rates measured with confidence give
a lower bound on ε (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021). A bound above the claimed ε
shows the claim false; one below it proves nothing.

With `white_box`, a generator that exposes its release (`Capability.RELEASE`) is also attacked there:
the exact log-likelihood ratio of the release between D′ and D. With `worst_case`, D is drawn from the
training rows that share no cell with the target, so the target is alone in every cell a generator
measures (Annamalai, Ganev & De Cristofaro 2024). Both make the bound tighter without changing what
it means: the synthetic rows are post-processing of the release.

Statistics: the first half of the fits chooses the attack variant, its orientation and threshold
(and the weights of the learned variant; the likelihood ratio's threshold by a normal fit); the
second half, which took no part in choosing, certifies that one test with Clopper–Pearson intervals,
and the verdict rests on that bound alone. Each rate's two-sided 95% interval is a one-sided 97.5%
bound, so both upper bounds hold together with 95% confidence. Beside the bound, an estimate that
assumes a Gaussian trade-off curve: the μ-GDP curve fitted to the certifying half's ROC (Nasr et al.
2023). Written by hand because no
library runs this game or computes this bound; the pieces (the encoder, the interval, logistic
regression) are reused.

Each batch of fits is stored on its own (`DIR/audits/<key>/fits/<first fit>.json`, written
atomically) and batches run in isolated child processes (`dpgym.engine.worker`), so an interrupted
audit resumes from the fits done, and a plugin that crashes, hangs past `--timeout` or exhausts memory fails its own audit.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

import dpgym
from dpgym.audit import canary
from dpgym.audit.statistics import clopper_pearson
from dpgym.data.encoding import TableEncoder, unit_space
from dpgym.data.splits import load_split
from dpgym.privacy.budget import Budget
from dpgym.registry import Registry
from dpgym.results.store import RunStore, write_json_atomic
from dpgym.engine.grid import Cell, cell_key
from dpgym.engine.threads import cpu_count
from dpgym.engine.worker import CellTask, run_isolated, start_forkserver
from dpgym.schema import Schema
from dpgym.specs import Capability

AUDIT_FORMAT = "dpgym-audit/2"
ATTACKS = ("nearest", "cells", "log_prob", "release")
# The attacks' fixed constants, part of every audit's key: a public grid of this many cells per
# numeric column (in the audit space below), and the radius within which synthetic rows count as near.
ATTACK_BINS = 32
NEAR_RADIUS = 0.25
# Lets the count of near rows break ties between equal nearest distances and nothing else.
TIE_WEIGHT = 1e-9
MAX_FITS_PER_PROCESS = 10
WORST_CASE_FITS_PER_PROCESS = 1000
# Inverse L2 penalty of the learned attack's logistic regression: strong, since it learns some 30
# weights from the choosing half's 100 or so fits.
LEARNED_C = 0.1


@dataclass(frozen=True)
class AuditOptions:
    fits: int = 200
    audit_rows: int = 1000
    seed: int = 0
    # Synthetic rows sampled per fit (default: audit_rows). Any number is a post-processing of the same
    # fitted model, so the guarantee covers it; more rows show the attack more of the model.
    synthetic_rows: int | None = None
    # > 0: the one-run audit (`dpgym.audit.canary`) with this many canaries, one fit, instead of the game.
    canaries: int = 0
    # Audit on these columns of the dataset alone (empty: all): a worst-case dataset built from the
    # schema, where one row's effect is spread over fewer released statistics.
    columns: tuple[str, ...] = ()
    # Attack what the generator's mechanism released (`Capability.RELEASE`) with the likelihood ratio,
    # beside the black-box attacks on its synthetic rows.
    white_box: bool = False
    # D drawn from the training rows that share no cell with the target (`isolated_rows`), so the
    # target sits alone in every cell of every marginal: the worst case of Annamalai et al. (2024).
    worst_case: bool = False

    @property
    def mode(self) -> str:
        """The game's setting as the output states it."""
        return " + ".join([("worst-case D" if self.worst_case else "random D"),
                           ("white-box" if self.white_box else "black-box")])

    @property
    def fits_per_process(self) -> int:
        """Fits a child process runs before the next starts: few when each may be slow, many in the
        worst-case game, whose fits on a few hundred rows take milliseconds (a process costs more)."""
        return WORST_CASE_FITS_PER_PROCESS if self.worst_case else MAX_FITS_PER_PROCESS

    @property
    def sample_rows(self) -> int:
        """0 in a white-box game that attacks the release alone: no synthetic rows, no black-box attack."""
        return self.audit_rows if self.synthetic_rows is None else self.synthetic_rows

    def keyed(self) -> dict[str, Any]:
        """What decides each fit's numbers. The number of fits is left out: fit i is the same in an
        audit of 200 fits and one of 1,000, so asking for more extends an audit instead of restarting it."""
        keyed = {"format": AUDIT_FORMAT, "audit_rows": self.audit_rows, "synthetic_rows": self.sample_rows,
                 "seed": self.seed, "attack_bins": ATTACK_BINS, "near_radius": NEAR_RADIUS}
        if self.columns:
            keyed["columns"] = sorted(self.columns)
        keyed |= {name: True for name in ("white_box", "worst_case") if getattr(self, name)}
        return keyed | ({"canaries": self.canaries, "guess_counts": list(canary.GUESS_COUNTS)} if self.canaries else {})


def audit_key(cell: Cell, options: AuditOptions) -> str:
    """The cell's key (generator, version, package, parameters; dataset identity, version, checksum;
    ε, δ; the harness version) with the audit's options."""
    return cell_key({"audit": options.keyed(), "cell": cell.key, "harness": dpgym.__version__})


# --- the neighbouring datasets ----------------------------------------------------------------


def target_record(schema: Schema) -> pd.DataFrame:
    """The target, from the public schema alone: every numeric column at its upper bound (heavy-tailed
    ones too: the far end of the tail) and every discrete column at its last listed category. Corners
    of the domain are where real rows are rarest, so where one added row moves a release most."""
    row = {c.name: [c.max if c.is_numeric else c.categories[-1]] for c in schema.columns}
    return schema.conform(pd.DataFrame(row), "the audit's target record")


def isolated_rows(train: pd.DataFrame, schema: Schema) -> np.ndarray:
    """Which training rows share no cell with the target: a different category (or a missing value) in
    every discrete column, and in every numeric column a value in the lower half of its public range in
    the audit space (log1p for heavy-tailed columns), where no binning of two or more cells that splits
    that space evenly, or finer, puts the target (the upper bound). On a D of such rows the target is
    alone in its cell of every marginal a generator measures, so it moves each by a whole row."""
    target = target_record(schema)
    encoder = TableEncoder(schema)
    points, point = unit_space(train, encoder), unit_space(target, encoder)[0]
    alone = np.ones(len(train), dtype=bool)
    for block in encoder.blocks:
        if block.missing_flag:
            continue
        if block.is_numeric:
            values = train[block.column.name]
            alone &= values.notna().to_numpy() & (points[:, block.start] < 0.5)
        else:
            alone &= points[:, block.start + int(np.argmax(point[block.start:block.stop]))] == 0
    return alone


def worst_case_pool(train: pd.DataFrame, schema: Schema, rows: int, dataset: str) -> pd.DataFrame:
    """The training rows D is drawn from in the worst-case game; an error naming the shortfall when
    fewer than `rows` of them share no cell with the target."""
    pool = train[isolated_rows(train, schema)]
    if len(pool) < rows:
        raise ValueError(f"--worst-case: only {len(pool)} of dataset {dataset!r}'s {len(train)} training rows share "
                         f"no cell with the audit's target, fewer than --audit-rows {rows}; lower --audit-rows or "
                         "audit on fewer --columns")
    return pool


def neighbours(train: pd.DataFrame, schema: Schema, rows: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """D, a fixed subsample of `train`, and D′ = D plus the target (add/remove adjacency)."""
    if rows > len(train):
        raise ValueError(f"--audit-rows {rows} exceeds the training split's {len(train)} rows")
    without = train.sample(n=rows, random_state=seed).reset_index(drop=True)
    with_target = pd.concat([without, target_record(schema)], ignore_index=True)
    return without, with_target


def audited_data(dataset: Any, options: AuditOptions) -> tuple[Schema, pd.DataFrame]:
    """The dataset's schema and training split, projected on `options.columns` when given."""
    schema, train = dataset.schema(), load_split(dataset.load).train
    if not options.columns:
        return schema, train
    schema = schema.project(options.columns)
    return schema, train[schema.names].reset_index(drop=True)


def fit_seeds(seed: int, fit: int) -> tuple[bool, int, int]:
    """Fit i's coin (the target in or not) and its fit and sample seeds: one independent stream per fit,
    so a fit's numbers do not depend on how many fits the audit asks for or on which ran before it."""
    coin, fit_seed, sample_seed = np.random.SeedSequence(entropy=seed, spawn_key=(fit,)).generate_state(3)
    return bool(coin & 1), int(fit_seed), int(sample_seed)


# --- what an attack sees of one fit -------------------------------------------------------------


def target_cell_counts(target: np.ndarray, synthetic: np.ndarray, encoder: TableEncoder) -> list[int]:
    """Per column, how many synthetic rows share the target's cell: its category, or its cell of a public
    grid of `ATTACK_BINS` over the scaled numeric range (a nullable column's missing flag is not a column)."""
    counts = []
    for block in encoder.blocks:
        if block.missing_flag:
            continue
        if block.is_numeric:
            cell = np.minimum(np.floor(synthetic[:, block.start] * ATTACK_BINS), ATTACK_BINS - 1)
            counts.append(int((cell == min(math.floor(target[block.start] * ATTACK_BINS), ATTACK_BINS - 1)).sum()))
        else:
            counts.append(int(synthetic[:, block.start + int(np.argmax(target[block.start:block.stop]))].sum()))
    return counts


def observe(synthetic: pd.DataFrame, target: pd.DataFrame, schema: Schema, density: Any) -> dict[str, Any]:
    """The features every attack scores: the nearest synthetic row's distance to the target and how many
    lie within `NEAR_RADIUS`; the synthetic count in each of the target's cells, among all rows and, when
    the schema names a prediction target, among the rows of the target record's class (many generators
    model features given the label, so there the record moves counts within its class); and with a density
    (`Capability.LOG_PROB`) the released model's log-likelihood of the target."""
    encoder = TableEncoder(schema)
    point, rows = unit_space(target, encoder)[0], unit_space(synthetic, encoder)
    distances = np.sqrt(((rows - point) ** 2).sum(axis=1))
    log_prob = None if density is None else float(np.asarray(density.log_prob(target), dtype=float)[0])
    in_class = None
    if schema.target is not None:
        same_label = (synthetic[schema.target] == target[schema.target].iloc[0]).to_numpy()
        in_class = target_cell_counts(point, rows[same_label], encoder)
    return {"nearest_distance": float(distances.min()), "near_rows": int((distances <= NEAR_RADIUS).sum()),
            "cell_counts": target_cell_counts(point, rows, encoder), "class_cell_counts": in_class,
            "log_prob": log_prob}


# --- the child's side: a batch of fits ------------------------------------------------------------


@dataclass(frozen=True)
class AuditBatch:
    """Fits of one audit that a child process runs: plain data, so it pickles to the worker."""

    cell: Cell
    options: AuditOptions
    fits: tuple[int, ...]
    key: str  # the audit's key (`dpgym.engine.worker` names the child after it)


def run_batch(batch: AuditBatch, registry: Registry, device: str = "cpu") -> tuple[dict[str, Any], None]:
    """Each fit of the batch: its coin picks D or D′, the generator is built, fitted and sampled, and the
    attacks' features are taken from the synthetic rows. A plugin's fault propagates: it fails the audit."""
    cell, options = batch.cell, batch.options
    spec = registry.get("generator", cell.method.name).spec
    dataset = registry.dataset(cell.dataset)
    schema, train = audited_data(dataset, options)
    params = {**cell.method.params, **({"device": "cpu"} if Capability.DEVICE in spec.capabilities else {})}
    if options.canaries:
        return {"fits": [canary.run_fit(cell, options, train, schema, spec, params)]}, None
    pool = worst_case_pool(train, schema, options.audit_rows, cell.dataset) if options.worst_case else train
    without, with_target = neighbours(pool, schema, options.audit_rows, options.seed)
    target = target_record(schema)
    records = []
    for fit in batch.fits:
        started = time.perf_counter()
        included, fit_seed, sample_seed = fit_seeds(options.seed, fit)
        generator = spec.build(params)
        ledger = generator.fit((with_target if included else without).copy(), schema, Budget(cell.epsilon, cell.delta),
                               fit_seed)
        release = generator.release().log_likelihood_ratio(without, with_target) if options.white_box else None
        seen = {}
        if options.sample_rows:
            synthetic = schema.conform(generator.sample(options.sample_rows, sample_seed),
                                       f"generator {spec.name!r}'s sample")
            seen = observe(synthetic, target, schema, generator if Capability.LOG_PROB in spec.capabilities else None)
        records.append({"fit": fit, "included": included, "ledger_epsilon": ledger.epsilon,
                        "seconds": time.perf_counter() - started, "release_llr": release, **seen})
    return {"fits": records}, None


# --- the bound ----------------------------------------------------------------------------------


def _from_error_rates(false_positive: Any, false_negative: Any, delta: float) -> Any:
    """The smallest ε an (ε, δ)-DP mechanism needs for a test with these error rates (both directions,
    each rate a number or an array)."""
    def one_way(alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            epsilon = np.log((1 - delta - beta) / alpha)
        return np.where(1 - delta - beta <= 0, 0.0, np.where(alpha <= 0, np.inf, np.maximum(epsilon, 0.0)))

    fp, fn = np.asarray(false_positive, dtype=float), np.asarray(false_negative, dtype=float)
    epsilon = np.maximum(one_way(fp, fn), one_way(fn, fp))
    return float(epsilon) if epsilon.ndim == 0 else epsilon


@dataclass(frozen=True)
class Certified:
    """One test (predict "in" when orientation × score ≥ threshold) on a set of fits."""

    lower: float  # ε lower bound at 95% confidence
    point: float  # from the observed rates
    upper: float  # from the rates' lower confidence limits
    false_positives: int
    negatives: int
    false_negatives: int
    positives: int

    @classmethod
    def of(cls, predicted: np.ndarray, included: np.ndarray, delta: float) -> Certified:
        negatives, positives = int((~included).sum()), int(included.sum())
        fp, fn = int((predicted & ~included).sum()), int((~predicted & included).sum())
        if not (negatives and positives):
            return cls(0.0, 0.0, math.inf, fp, negatives, fn, positives)
        (fpr_lo, fpr_hi), (fnr_lo, fnr_hi) = clopper_pearson(fp, negatives), clopper_pearson(fn, positives)
        return cls(_from_error_rates(fpr_hi, fnr_hi, delta), _from_error_rates(fp / negatives, fn / positives, delta),
                   _from_error_rates(fpr_lo, fnr_lo, delta), fp, negatives, fn, positives)


def choose_test(scores: np.ndarray, included: np.ndarray, delta: float) -> tuple[int, float, Certified]:
    """The orientation and threshold with the best ε lower bound on these (the choosing half's) fits;
    among equal bounds, the best point estimate."""
    best: tuple[float, float, int, float] = (-1.0, -1.0, 1, math.inf)
    negatives, positives = int((~included).sum()), int(included.sum())
    for orientation in (1, -1):
        oriented = orientation * scores
        thresholds = np.unique(oriented)  # predict "in" where oriented score ≥ threshold
        false_positives = negatives - np.searchsorted(np.sort(oriented[~included]), thresholds, side="left")
        false_negatives = np.searchsorted(np.sort(oriented[included]), thresholds, side="left")
        if not (negatives and positives):
            break
        fpr_hi, fnr_hi = clopper_pearson(false_positives, negatives)[1], clopper_pearson(false_negatives, positives)[1]
        lower = _from_error_rates(fpr_hi, fnr_hi, delta)
        point = np.minimum(_from_error_rates(false_positives / negatives, false_negatives / positives, delta), 1e9)
        i = int(np.lexsort((point, lower))[-1])
        best = max(best, (float(lower[i]), float(point[i]), orientation, float(thresholds[i])))
    _, _, orientation, threshold = best
    return orientation, threshold, Certified.of(orientation * scores >= threshold, included, delta)


def normal_fit_test(scores: np.ndarray, included: np.ndarray, certifying: tuple[int, int],
                    delta: float) -> tuple[int, float, Certified]:
    """The orientation and threshold a normal fit to each class's scores on these (the choosing half's)
    fits expects to certify best: the Clopper–Pearson bound at the certifying half's `(negatives,
    positives)`, with the error counts the fitted normals predict there. For the likelihood-ratio
    statistic, normal under both hypotheses for a Gaussian mechanism, this looks into tails the choosing
    half holds few fits of, where the empirical rule (`choose_test`) would chase a handful of them."""
    out, into = scores[~included], scores[included]
    if min(len(out), len(into)) < 2 or not (out.std() > 0 and into.std() > 0):
        return choose_test(scores, included, delta)
    orientation = 1 if into.mean() >= out.mean() else -1
    (m0, s0), (m1, s1) = ((orientation * x.mean(), x.std(ddof=1)) for x in (out, into))
    low, high = min(m0 - 8 * s0, m1 - 8 * s1), max(m0 + 8 * s0, m1 + 8 * s1)
    thresholds = np.linspace(low, high, 4001)
    negatives, positives = certifying
    false_positives = negatives * stats.norm.sf(thresholds, m0, s0)
    false_negatives = positives * stats.norm.cdf(thresholds, m1, s1)
    lower = _from_error_rates(clopper_pearson(false_positives, negatives)[1],
                              clopper_pearson(false_negatives, positives)[1], delta)
    threshold = float(thresholds[int(np.argmax(lower))])
    return orientation, threshold, Certified.of(orientation * scores >= threshold, included, delta)


def gdp_estimate(scores: np.ndarray, included: np.ndarray, delta: float) -> dict[str, Any]:
    """An estimate, not a bound: the μ of the Gaussian trade-off curve (μ-GDP, Dong, Roth & Su 2022) with
    the ROC's area on these (the certifying half's) oriented scores, μ̂ = √2·Φ⁻¹(AUC), as Nasr et al.
    (2023) fit μ to a whole ROC; its 95% interval from the AUC's (Hanley & McNeil 1982), and the ε each
    implies at δ. It assumes the mechanism's trade-off curve is Gaussian, and overstates ε where it is
    not (a Laplace mechanism's), so it never decides a verdict."""
    out, into = scores[~included], scores[included]
    if not (len(out) and len(into)):
        return {"mu": None, "mu_interval": [None, None], "epsilon": None, "epsilon_interval": [None, None], "auc": None}
    ranks = stats.rankdata(np.concatenate([into, out]))
    auc = float((ranks[:len(into)].sum() - len(into) * (len(into) + 1) / 2) / (len(into) * len(out)))
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    variance = (auc * (1 - auc) + (len(into) - 1) * (q1 - auc**2) + (len(out) - 1) * (q2 - auc**2)) / (len(into) * len(out))
    half = stats.norm.ppf(0.975) * math.sqrt(max(variance, 0.0))

    def mu_of(area: float) -> float:
        return float(math.sqrt(2) * stats.norm.ppf(min(max(area, 0.5), 1 - 1e-12)))

    mus = [mu_of(auc), mu_of(auc - half), mu_of(auc + half)]
    return {"auc": auc, "mu": mus[0], "mu_interval": mus[1:], "epsilon": canary.gdp_epsilon(mus[0], delta),
            "epsilon_interval": [canary.gdp_epsilon(m, delta) for m in mus[1:]]}


def attack_scores(records: list[dict[str, Any]], choosing: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each attack's scores for choosing its test (on the choosing half) and for certifying it (every fit;
    only the certifying half's are used). `nearest` and `log_prob` are fixed rules; `cells` is a logistic
    regression on the target-cell counts (log1p) and the nearest-row features, fitted on the choosing half (its
    choosing scores are cross-validated, so the threshold is not chosen on scores the model fitted)."""
    out = {}
    if all(r.get("release_llr") is not None for r in records):
        llr = np.array([r["release_llr"] for r in records], dtype=float)
        out["release"] = (llr, llr)
    if not all("nearest_distance" in r for r in records):  # the release alone was attacked
        return out
    distance = np.array([r["nearest_distance"] for r in records])
    near = np.array([r["near_rows"] for r in records], dtype=float)
    nearest = -distance + TIE_WEIGHT * near
    out["nearest"] = (nearest, nearest)
    if all(r["log_prob"] is not None for r in records):
        log_prob = np.nan_to_num(np.array([r["log_prob"] for r in records], dtype=float), nan=-1e300, neginf=-1e300)
        out["log_prob"] = (log_prob, log_prob)
    included = np.array([r["included"] for r in records])
    smaller_class = min(int(included[choosing].sum()), int((~included[choosing]).sum()))
    if smaller_class >= 2:
        out["cells"] = _learned_scores(records, included, choosing, min(5, smaller_class))
    return out


def _learned_scores(records: list[dict[str, Any]], included: np.ndarray, choosing: np.ndarray,
                    folds: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    counts = [[r["cell_counts"] for r in records]]
    if all(r["class_cell_counts"] is not None for r in records):
        counts.append([r["class_cell_counts"] for r in records])
    features = np.column_stack([*(np.log1p(np.array(c, dtype=float)) for c in counts),
                                [-r["nearest_distance"] for r in records], np.log1p([r["near_rows"] for r in records])])
    model = make_pipeline(StandardScaler(), LogisticRegression(C=LEARNED_C, max_iter=1000))
    chosen = cross_val_predict(model, features[choosing], included[choosing], method="decision_function",
                               cv=StratifiedKFold(folds, shuffle=True, random_state=0))
    choosing_scores = np.zeros(len(records))
    choosing_scores[choosing] = chosen
    return choosing_scores, model.fit(features[choosing], included[choosing]).decision_function(features)


def analyse(records: list[dict[str, Any]], fits: int, delta: float) -> dict[str, Any]:
    """The audit's bound from fits 0..`fits`−1: the first half chooses the attack and its test, the second
    certifies it. Every attack's own certified bound is reported too; only the chosen one's is the audit's
    (reporting the best of several certified bounds would need a correction for the choice)."""
    records = sorted((r for r in records if r["fit"] < fits), key=lambda r: r["fit"])
    index = np.array([r["fit"] for r in records])
    choosing, certifying = index < fits // 2, index >= fits // 2
    included = np.array([r["included"] for r in records], dtype=bool)
    attacks, chosen = {}, None
    sizes = (int((~included[certifying]).sum()), int(included[certifying].sum()))
    for name, (choose_scores, certify_scores) in attack_scores(records, choosing).items():
        if name == "release":
            orientation, threshold, on_choosing = normal_fit_test(choose_scores[choosing], included[choosing], sizes, delta)
        else:
            orientation, threshold, on_choosing = choose_test(choose_scores[choosing], included[choosing], delta)
        certified = Certified.of(orientation * certify_scores[certifying] >= threshold, included[certifying], delta)
        attacks[name] = {**asdict(certified), "orientation": orientation, "threshold": threshold,
                         "choosing_lower": on_choosing.lower,
                         "gdp": gdp_estimate(orientation * certify_scores[certifying], included[certifying], delta),
                         "scores": [float(s) for s in np.where(choosing, choose_scores, certify_scores)]}
        if chosen is None or on_choosing.lower > attacks[chosen]["choosing_lower"]:
            chosen = name
    headline = attacks[chosen]
    return {"attack": chosen, "epsilon_lower": headline["lower"], "epsilon_point": headline["point"],
            "epsilon_interval": [headline["lower"], headline["upper"]], "fits_done": len(records),
            "certifying_fits": int(certifying.sum()), "gdp": headline["gdp"], "attacks": attacks,
            "roc": {"labels": included.tolist(), "certifying": certifying.tolist()}}


# --- the driver's side: many audits -----------------------------------------------------------


@dataclass
class AuditState:
    """One audit (a generator × dataset × ε) as the driver tracks it."""

    cell: Cell
    key: str
    store: RunStore
    error: str = ""
    stored: set[int] | None = None  # the fits stored, once read

    def done(self) -> set[int]:
        if self.stored is None:
            self.stored = {r["fit"] for r in self.records()}
        return self.stored

    def records(self) -> list[dict[str, Any]]:
        """Every stored fit: a file holds one fit, or a batch of them (a list) named by its first."""
        stored = [json.loads(p.read_text()) for p in self.store.audit_fits(self.key)]
        return [r for batch in stored for r in (batch if isinstance(batch, list) else [batch])]


def batches(state: AuditState, options: AuditOptions, workers: int) -> Iterator[AuditBatch]:
    """The fits still to run, in batches small enough that every worker gets some."""
    pending = sorted(set(range(options.fits)) - state.done())
    size = max(1, min(options.fits_per_process, math.ceil(len(pending) / workers)))
    for start in range(0, len(pending), size):
        yield AuditBatch(state.cell, options, tuple(pending[start:start + size]), state.key)


def run_audits(cells: list[Cell], options: AuditOptions, out: Path, registry: Registry, workers: int | None = None,
               timeout: float | None = None, max_memory: int | None = None,
               on_fits: Callable[[AuditState, int], None] | None = None) -> list[dict[str, Any]]:
    """Run every cell's audit into `out`'s audits (resuming the fits stored there), then write each
    audit's summary there and all of them to its index; returns the summaries."""
    workers = workers or cpu_count()
    store = RunStore(out)
    states = [AuditState(cell, key, store) for cell in cells for key in [audit_key(cell, options)]]
    for state in states:
        store.audit_fit(state.key, 0).parent.mkdir(parents=True, exist_ok=True)
    todo = [batch for state in states for batch in batches(state, options, workers)]
    if todo:
        start_forkserver(registry.worker_plugins, sorted({c.dataset for c in cells}), sorted({c.method.name for c in cells}))
    by_key = {state.key: state for state in states}
    cancel = threading.Event()
    threads = max(1, cpu_count() // workers)

    def supervised(batch: AuditBatch) -> Any:
        if by_key[batch.key].error:  # an earlier batch of this audit failed: the audit has failed
            return None
        task = CellTask(batch, registry.worker_plugins, "cpu", threads, timeout, max_memory, job=run_batch)
        return run_isolated(task, cancel)

    with ThreadPoolExecutor(workers, thread_name_prefix="dpgym-audit") as pool:
        futures = {pool.submit(supervised, batch): batch for batch in todo}
        try:
            for future in as_completed(futures):
                state, outcome = by_key[futures[future].key], future.result()
                if outcome is None:
                    continue
                if outcome.failure is not None:
                    state.error = state.error or outcome.failure["message"]
                    continue
                fits = outcome.result["fits"]
                if fits:
                    write_json_atomic(store.audit_fit(state.key, fits[0]["fit"]), fits if len(fits) > 1 else fits[0])
                    state.done().update(r["fit"] for r in fits)
                if on_fits is not None:
                    on_fits(state, len(outcome.result["fits"]))
        except BaseException:
            cancel.set()  # running children are killed, queued batches dropped
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    summaries = [summarise(state, options, registry) for state in states]
    write_index(store)
    return summaries


def write_index(store: RunStore) -> None:
    """The audits' index: every audit stored in the run directory, this command's and earlier ones', each
    without its scores (those stay in its audit.json, named by `detail`)."""
    audits = store.stored_audits()
    audits.sort(key=lambda s: (s["generator"], s["dataset"], s["epsilon_claimed"], s["key"]))
    write_json_atomic(store.audits_index, {"format": AUDIT_FORMAT, "audits": [
        {k: v for k, v in s.items() if k not in ("attacks", "roc")}
        | {"detail": str(store.audit_summary(s["key"]).relative_to(store.root))}
        for s in audits]})


def summarise(state: AuditState, options: AuditOptions, registry: Registry) -> dict[str, Any]:
    """An audit's summary (with every attack's scores for a ROC curve), also written to its folder."""
    cell = state.cell
    provided = registry.get("generator", cell.method.name)
    dataset = registry.dataset(cell.dataset)
    schema = dataset.schema().project(options.columns) if options.columns else dataset.schema()
    summary: dict[str, Any] = {
        "format": AUDIT_FORMAT, "key": state.key, "generator": cell.method.display, "dataset": cell.dataset,
        # with the method, ε and δ: what a run's cell shares with the mechanism audited (the leaderboard matches it)
        "dataset_version": dataset.version, "dataset_checksum": dataset.checksum,
        "method": {"name": cell.method.name, "version": provided.spec.version, "package": provided.package,
                   "guarantee": str(provided.spec.guarantee), "params": {**provided.spec.defaults, **cell.method.params}},
        "epsilon_claimed": cell.epsilon, "delta": cell.delta, "options": asdict(options),
        "target": {c: str(v) for c, v in target_record(schema).iloc[0].items()},
    }
    records = state.records()
    done = len([r for r in records if r["fit"] < options.fits])
    if state.error or done < options.fits:
        summary.update(status="failed", verdict="failed", fits_done=done,
                       error=state.error or f"{done} of {options.fits} fits stored")
    elif options.canaries:
        summary.update(status="ok", mode="one_run", **canary.analyse(records[0], cell.delta),
                       fit_seconds=records[0]["seconds"])
    else:
        summary.update(status="ok", mode="game", setting=options.mode, **analyse(records, options.fits, cell.delta),
                       fit_seconds=float(np.mean([r["seconds"] for r in records if r["fit"] < options.fits])))
    if summary["status"] == "ok" and provided.spec.guarantee == "none":  # `real`: no claim to test
        summary["verdict"] = "no claim"
    elif summary["status"] == "ok":
        summary["verdict"] = "violation" if summary["epsilon_lower"] > cell.epsilon else "consistent"
    write_json_atomic(state.store.audit_summary(state.key), summary)
    return summary

