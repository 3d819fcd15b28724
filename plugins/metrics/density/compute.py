"""The code of `dpgym.plugins.metrics.density`, imported only when a cell uses it. What the method is, its defaults
and where they come from: the docstring of `dpgym.plugins.metrics.density`, which holds the spec."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import pandas as pd
from scipy.special import expit
from sklearn.metrics import roc_auc_score

from dpgym import MetricContext, MetricResult
from dpgym.plugins.metrics.density import DP_AD_EPSILONS, DP_AD_OPTIONS

LOW_BAND, HIGH_BAND = (5, 30), (70, 95)


def numeric_columns(ctx: MetricContext) -> list[str]:
    return [c.name for c in ctx.schema.columns if c.is_numeric]


def numeric_values(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """The columns as floats, NaN where a value is missing (nullable columns)."""
    return frame[columns].to_numpy(dtype=float, na_value=np.nan)


def standardisation(train: pd.DataFrame, columns: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(mean, scale, constant columns) of the training rows, missing values ignored. The scale is
    the standard deviation, or 1 for a column without spread, as scikit-learn's StandardScaler has
    it: dividing by 0 would make the column NaN, and its log-std would send the z-scored
    log-likelihood to −∞. Such a column is thus left in its own scale; only the others are z-scored."""
    values = numeric_values(train, columns)
    std = np.nanstd(values, axis=0)
    constant = ~(std > 0)  # also a column missing in every training row (std NaN)
    return np.nanmean(values, axis=0), np.where(constant, 1.0, std), [c for c, flat in zip(columns, constant) if flat]


def tail_box_anomalies(test: pd.DataFrame, columns: list[str], n: int, rng: np.random.Generator) -> pd.DataFrame:
    """n rows whose numeric columns are uniform in a tail band of the test set; the
    other columns are copied from randomly chosen test rows (log_prob ignores them), and so are the
    missing values: an anomaly misses a value where its test row does, so missingness alone does
    not tell anomalies from test rows."""
    values = numeric_values(test, columns)
    bands = np.stack([np.nanpercentile(values, [*LOW_BAND], axis=0),
                      np.nanpercentile(values, [*HIGH_BAND], axis=0)])  # (2, 2, D)
    upper = rng.random((n, len(columns))) < 0.5
    lo = np.where(upper, bands[1, 0], bands[0, 0])
    hi = np.where(upper, bands[1, 1], bands[0, 1])
    rows = test.iloc[rng.integers(len(test), size=n)].reset_index(drop=True).copy()
    drawn = lo + (hi - lo) * rng.random((n, len(columns)))
    rows[columns] = np.where(np.isnan(numeric_values(rows, columns)), np.nan, drawn)
    return rows


def evaluate(ctx: MetricContext) -> MetricResult:
    if ctx.density is None:
        return MetricResult({}, {"skipped": "the generator has no log_prob: density metrics are omitted"})
    log_prob = ctx.density.log_prob
    columns = numeric_columns(ctx)
    test_ll = np.asarray(log_prob(ctx.test), dtype=float)
    density_columns = list(getattr(ctx.density, "density_columns", columns))
    _, scale, unscaled = standardisation(ctx.train, density_columns)
    log_scale = np.log(scale)
    # per row, over the columns it has: a row missing a value has no density in that column
    present = ~np.isnan(numeric_values(ctx.test, density_columns))
    finite = np.isfinite(test_ll)
    values = {
        "heldout_loglik": float(test_ll.mean()),
        "heldout_loglik_zscored": float((test_ll + present @ log_scale).mean()),
    }
    detail = {"columns": columns, "density_columns": density_columns, "n_test": len(test_ll),
              "non_finite_test_rows": int((~finite).sum()),
              "heldout_loglik_std_over_rows": float(test_ll[finite].std()) if finite.any() else None,
              "zscore_log_std_sum": float(log_scale.sum()), "zscore_constant_columns_unscaled": unscaled}
    if not columns:  # the anomalies are test rows moved into numeric tails: without numeric columns, none
        detail["anomaly_auc_skipped"] = "the dataset has no numeric column to draw tail anomalies in"
        return MetricResult(values, detail)
    anomalies = tail_box_anomalies(ctx.test, columns, len(ctx.test), np.random.default_rng(ctx.seed))
    anomaly_ll = np.asarray(log_prob(anomalies), dtype=float)
    scores = np.nan_to_num(np.concatenate([test_ll, anomaly_ll]), nan=-np.inf)
    labels = np.concatenate([np.ones(len(test_ll)), np.zeros(len(anomaly_ll))])
    values["anomaly_auc"] = float(roc_auc_score(labels, np.maximum(scores, -1e300)))
    detail.update(n_anomalies=len(anomaly_ll), anomaly_loglik_mean=float(anomaly_ll.mean()))
    return MetricResult(values, detail)


DP_AD_PARTITIONS, DP_AD_COMPONENTS = 10, 3
FLOW_BLOCKS, FLOW_HIDDEN, FLOW_BATCH, FLOW_LR = 5, 100, 256, 1e-3


def probability_in(votes: np.ndarray, partitions: int, epsilon: float) -> np.ndarray:
    """Exponential Mechanism over {in, out} with utility = votes for each answer (Δu = 1):
    P[in] = e^{εc/2} / (e^{εc/2} + e^{ε(k−c)/2}) = sigmoid(ε(2c − k)/2)."""
    return expit(epsilon * (2.0 * votes - partitions) / 2.0)


def mixture_log_probs(part: np.ndarray, queries: np.ndarray, seed: int) -> np.ndarray:
    from sklearn.mixture import GaussianMixture

    return GaussianMixture(DP_AD_COMPONENTS, random_state=seed).fit(part).score_samples(queries)


def flow_log_probs(part: np.ndarray, queries: np.ndarray, seed: int, steps: int) -> np.ndarray:
    """A MAF as DP-NF builds it (5 blocks, hidden 100, ActNorm), fitted by plain maximum likelihood:
    Adam, minibatches drawn with replacement, a fixed number of steps. α is soft-clamped at 7: with
    α unbounded (DP-NF's default, the paper's code) these non-private fits diverged, and every flow
    ensemble scored the chance accuracy 0.5 at every ε on Half-Moons and 8 Gaussians. The value 7 is
    DP-NF's earlier default, chosen on 8 Gaussians; no other value was tried."""
    import torch

    from dpgym.plugins.nn.flows import MAF
    from dpgym.plugins.nn.runtime import single_thread

    with single_thread(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        flow = MAF(part.shape[1], blocks=FLOW_BLOCKS, hidden=FLOW_HIDDEN, actnorm=True, alpha_bound=7.0)
        optimizer = torch.optim.Adam(flow.parameters(), lr=FLOW_LR)
        rows = torch.tensor(part, dtype=torch.float32)
        batches = torch.Generator().manual_seed(seed)
        for _ in range(steps):
            loss = -flow.log_prob(rows[torch.randint(len(rows), (FLOW_BATCH,), generator=batches)]).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            return flow.log_prob(torch.tensor(queries, dtype=torch.float32)).double().numpy()


def ensemble_log_probs(parts: list[np.ndarray], queries: np.ndarray, model: Callable[..., np.ndarray],
                       seed: int) -> np.ndarray:
    """(partitions, n_queries) log-densities of non-private models of one family, one per part."""
    return np.stack([model(part, queries, seed) for part in parts])


def disjoint_parts(train: np.ndarray, partitions: int, rng: np.random.Generator) -> list[np.ndarray]:
    """A data-independent random assignment of the rows to `partitions` parts of equal sizes."""
    return [train[p] for p in np.array_split(rng.permutation(len(train)), partitions)]


MAJORITY = 1e6  # a per-query ε at which the mechanism answers with the majority vote


def expected_accuracy(votes_in: np.ndarray, votes_out: np.ndarray, partitions: int, epsilon: float) -> float:
    """Mean probability of the right answer over the test rows (in) and the anomalies (out)."""
    return float(np.concatenate([probability_in(votes_in, partitions, epsilon),
                                 1 - probability_in(votes_out, partitions, epsilon)]).mean())


def best_threshold(ll_in: np.ndarray, ll_out: np.ndarray) -> float:
    """τ maximising the majority vote's accuracy over candidate quantiles of all scores."""
    candidates = np.quantile(np.concatenate([ll_in.ravel(), ll_out.ravel()]), np.linspace(0.01, 0.99, 99))
    return float(max(candidates, key=lambda tau: expected_accuracy((ll_in > tau).sum(0), (ll_out > tau).sum(0),
                                                                   ll_in.shape[0], MAJORITY)))


def evaluate_dp_ad(ctx: MetricContext) -> MetricResult:
    columns = numeric_columns(ctx)
    if not columns:
        return MetricResult({}, {"skipped": f"the detector models numeric columns; dataset {ctx.schema.name!r} "
                                            "has none"})
    rng = np.random.default_rng(ctx.seed)
    mean, scale, unscaled = standardisation(ctx.train, columns)

    def standardised(values: np.ndarray) -> np.ndarray:
        """z-scores; a missing value becomes 0, the training mean: the detector is a reference fitted
        on the real training rows, and anomalies miss the values their test rows miss, so the
        imputed value favours neither class."""
        z = (values - mean) / scale
        return np.where(np.isnan(z), 0.0, z)

    anomalies = tail_box_anomalies(ctx.test, columns, len(ctx.test), rng)
    queries = standardised(np.concatenate([numeric_values(ctx.test, columns), numeric_values(anomalies, columns)]))
    parts = disjoint_parts(standardised(numeric_values(ctx.train, columns)), DP_AD_PARTITIONS, rng)
    seed = int(rng.integers(2**31))
    options = {**DP_AD_OPTIONS, **ctx.options}
    values, detail = {}, {"partitions": DP_AD_PARTITIONS, "mog_components": DP_AD_COMPONENTS,
                          "flow": {"blocks": FLOW_BLOCKS, "hidden": FLOW_HIDDEN, "steps": options["flow_steps"],
                                   "batch": FLOW_BATCH, "lr": FLOW_LR},
                          "per_query_epsilon": "each answer is ε-DP; m answers cost m·ε (basic composition)",
                          "constant_columns_unscaled": unscaled}
    for family in options["families"]:
        model = mixture_log_probs if family == "mog" else partial(flow_log_probs, steps=options["flow_steps"])
        ll = ensemble_log_probs(parts, queries, model, seed)
        ll_in, ll_out = ll[:, :len(ctx.test)], ll[:, len(ctx.test):]
        tau = best_threshold(ll_in, ll_out)
        votes_in, votes_out = (ll_in > tau).sum(0), (ll_out > tau).sum(0)
        for eps in DP_AD_EPSILONS:
            values[f"dp_ad_{family}_accuracy_eps{eps:g}"] = expected_accuracy(votes_in, votes_out, DP_AD_PARTITIONS, eps)
        detail[family] = {"threshold": tau, "mean_test_loglik_zscored": float(ll_in.mean()),
                          "non_private_majority_accuracy": expected_accuracy(votes_in, votes_out, DP_AD_PARTITIONS,
                                                                             MAJORITY)}
    return MetricResult(values, detail)
