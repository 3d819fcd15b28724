"""density metrics: held-out log-likelihood in the data and z-scored scales, tail-box anomalies and
their ROC AUC, omission for generators without log_prob."""

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import multivariate_normal

from dpgym import Column, ColumnKind, MetricContext, Schema
from dpgym.plugins.metrics.density import SPEC
from dpgym.plugins.metrics.density.compute import tail_box_anomalies

SCHEMA = Schema("gauss", (Column("a", ColumnKind.CONTINUOUS, min=-10.0, max=10.0),
                          Column("b", ColumnKind.CONTINUOUS, min=-10.0, max=10.0),
                          Column("label", ColumnKind.BINARY, categories=("0", "1"))), target="label")
STD = np.array([2.0, 0.5])


def frame(n, seed):
    rng = np.random.default_rng(seed)
    ab = rng.standard_normal((n, 2)) * STD
    return pd.DataFrame({"a": ab[:, 0], "b": ab[:, 1], "label": pd.Categorical(rng.choice(["0", "1"], n), categories=["0", "1"])})


class TrueDensity:
    """A 'generator' whose log_prob is the data's true density."""

    def log_prob(self, rows):
        return multivariate_normal(np.zeros(2), np.diag(STD**2)).logpdf(rows[["a", "b"]].to_numpy())


class Flat:
    def log_prob(self, rows):
        return np.zeros(len(rows))


def context(generator, n_test=4000, n_train=20_000):
    train, test = frame(n_train, 0), frame(n_test, 1)
    return MetricContext(train=train, test=test, synthetic=train, schema=SCHEMA, seed=0, density=generator)


def test_heldout_loglik_of_the_true_density_is_minus_its_entropy():
    values = SPEC.evaluate(context(TrueDensity(), n_test=20_000)).values
    entropy = 0.5 * 2 * (1 + math.log(2 * math.pi)) + np.log(STD).sum()
    assert values["heldout_loglik"] == pytest.approx(-entropy, abs=0.03)


def test_zscored_loglik_adds_the_training_log_stds():
    result = SPEC.evaluate(context(TrueDensity()))
    assert result.values["heldout_loglik_zscored"] - result.values["heldout_loglik"] == pytest.approx(np.log(STD).sum(), abs=0.02)
    assert result.values["heldout_loglik_zscored"] == pytest.approx(-(1 + math.log(2 * math.pi)), abs=0.05)  # entropy of N(0, I₂)


class MassInB(TrueDensity):
    """A log_prob that is a density in a only (b treated as discrete, as DP-HFlow's dequantized columns)."""

    density_columns = ("a",)


def test_zscoring_covers_only_the_columns_log_prob_is_a_density_over():
    result = SPEC.evaluate(context(MassInB()))
    assert result.detail["density_columns"] == ["a"]
    assert result.values["heldout_loglik_zscored"] - result.values["heldout_loglik"] == pytest.approx(np.log(STD[0]), abs=0.02)


def test_anomalies_lie_in_the_tail_bands_of_the_test_set():
    test = frame(3000, 2)
    anomalies = tail_box_anomalies(test, ["a", "b"], 5000, np.random.default_rng(0))
    for col in ("a", "b"):
        p5, p30, p70, p95 = np.percentile(test[col], [5, 30, 70, 95])
        v = anomalies[col].to_numpy()
        assert (((v >= p5) & (v <= p30)) | ((v >= p70) & (v <= p95))).all()
        assert 0.45 < (v >= p70).mean() < 0.55  # each band with probability ½


def test_true_density_separates_anomalies_and_a_flat_one_does_not():
    assert SPEC.evaluate(context(TrueDensity())).values["anomaly_auc"] > 0.6
    assert SPEC.evaluate(context(Flat())).values["anomaly_auc"] == pytest.approx(0.5)


def test_generators_without_log_prob_get_no_density_values():
    result = SPEC.evaluate(context(None))  # the runner hands no density model to a generator without the capability
    assert result.values == {} and "log_prob" in result.detail["skipped"]


def test_every_value_has_a_direction():
    assert set(SPEC.evaluate(context(TrueDensity())).values) <= set(SPEC.directions)


def test_exponential_mechanism_ratio_is_bounded_by_e_to_the_epsilon():
    from dpgym.plugins.metrics.density.compute import probability_in

    k, eps = 10, 0.7
    votes = np.arange(k + 1)
    p_in = probability_in(votes, k, eps)
    for answer in (p_in, 1 - p_in):  # one changed row flips at most one vote
        ratios = answer[1:] / answer[:-1]
        assert np.all(ratios <= math.exp(eps) + 1e-12) and np.all(1 / ratios <= math.exp(eps) + 1e-12)
    assert probability_in(np.array([5]), 10, 3.0)[0] == pytest.approx(0.5)


def test_dp_ad_accuracy_rises_from_a_coin_flip_towards_the_majority_vote():
    from dpgym.plugins.metrics.density import DP_AD_SPEC

    result = DP_AD_SPEC.evaluate(context(None, n_test=1000, n_train=3000))
    accuracies = list(result.values.values())
    assert list(result.values) == [k for k in DP_AD_SPEC.directions if k.startswith("dp_ad_mog_")]  # the default family
    assert all(b >= a - 1e-12 for a, b in zip(accuracies, accuracies[1:]))
    assert 0.5 <= accuracies[0] < accuracies[-1] <= result.detail["mog"]["non_private_majority_accuracy"] + 1e-12


@pytest.mark.slow
def test_dp_ad_flow_ensemble_votes_on_the_same_partition_with_its_own_threshold():
    from dpgym.plugins.metrics.density import DP_AD_SPEC

    options = DP_AD_SPEC.resolve_options({"families": ["mog", "nf"], "flow_steps": 30})
    result = DP_AD_SPEC.evaluate(replace(context(None, n_test=500, n_train=2000), options=options))
    assert set(result.values) == set(DP_AD_SPEC.directions)
    flow = [v for k, v in result.values.items() if k.startswith("dp_ad_nf_")]
    assert all(b >= a - 1e-12 for a, b in zip(flow, flow[1:])) and flow[0] >= 0.5
    assert result.detail["nf"]["threshold"] != result.detail["mog"]["threshold"]
    assert result.detail["flow"]["steps"] == 30


@pytest.mark.parametrize("given", [{"families": []}, {"families": ["kde"]}, {"flow_steps": 0}, {"flow_step": 5}])
def test_dp_ad_refuses_bad_options(given):
    from dpgym.specs import SpecError
    from dpgym.plugins.metrics.density import DP_AD_SPEC

    with pytest.raises(SpecError, match="dp_ad"):
        DP_AD_SPEC.resolve_options(given)


def test_a_constant_training_column_is_left_unscaled_not_minus_infinity():
    ctx = context(TrueDensity())
    result = SPEC.evaluate(replace(ctx, train=ctx.train.assign(b=1.0)))
    assert result.values["heldout_loglik_zscored"] - result.values["heldout_loglik"] == pytest.approx(np.log(STD[0]), abs=0.02)
    assert result.detail["zscore_constant_columns_unscaled"] == ["b"]


NULLABLE = Schema("gauss_nullable", (Column("a", ColumnKind.CONTINUOUS, min=-10.0, max=10.0),
                                     Column("b", ColumnKind.CONTINUOUS, min=-10.0, max=10.0, nullable=True),
                                     Column("label", ColumnKind.BINARY, categories=("0", "1"))), target="label")


def with_missing_b(rows, seed):
    return rows.assign(b=rows["b"].where(np.random.default_rng(seed).random(len(rows)) > 0.2))


def test_anomalies_miss_the_values_their_test_rows_miss():
    test = with_missing_b(frame(2000, 1), 0)
    anomalies = tail_box_anomalies(test, ["a", "b"], 3000, np.random.default_rng(0))
    assert anomalies["a"].notna().all()
    assert anomalies["b"].isna().mean() == pytest.approx(test["b"].isna().mean(), abs=0.03)


class TrueDensityWithGaps(TrueDensity):
    """The true density where both values are present, a's marginal where b is missing (the missing
    share, a probability mass, left out: it cancels in the z-scoring check)."""

    def log_prob(self, rows):
        full = rows["b"].notna().to_numpy()
        out = np.empty(len(rows))
        out[full] = super().log_prob(rows[full])
        out[~full] = multivariate_normal(0.0, STD[0] ** 2).logpdf(rows.loc[~full, "a"].to_numpy())
        return out


def test_zscoring_adds_a_log_std_only_for_the_values_a_row_has():
    """A row missing b has no density in b, so z-scoring it must not add log std(b): every row then
    scores the entropy of the standard normal in its own dimensions."""
    ctx = context(TrueDensityWithGaps())
    ctx = replace(ctx, schema=NULLABLE, train=with_missing_b(ctx.train, 1), test=with_missing_b(ctx.test, 2))
    result = SPEC.evaluate(ctx)
    dims = 1 + ctx.test["b"].notna().mean()
    assert result.values["heldout_loglik_zscored"] == pytest.approx(-dims * 0.5 * (1 + math.log(2 * math.pi)), abs=0.05)


@pytest.mark.parametrize("make_train", [lambda rows: rows.assign(b=1.0), lambda rows: with_missing_b(rows, 1)],
                         ids=["constant column", "missing values"])
def test_dp_ad_models_constant_columns_and_missing_values(make_train):
    from dpgym.plugins.metrics.density import DP_AD_SPEC

    ctx = context(None, n_test=500, n_train=1500)
    ctx = replace(ctx, schema=NULLABLE, train=make_train(ctx.train), test=with_missing_b(ctx.test, 2),
                  options=DP_AD_SPEC.options)
    values = DP_AD_SPEC.evaluate(ctx).values
    assert set(values) == {k for k in DP_AD_SPEC.directions if k.startswith("dp_ad_mog_")}
    assert all(0.5 <= v <= 1 for v in values.values())


def test_dp_ad_on_a_dataset_without_numeric_columns_gets_no_value_and_says_why():
    from dpgym.plugins.metrics.density import DP_AD_SPEC

    schema = Schema("labels", (Column("label", ColumnKind.BINARY, categories=("0", "1")),), target="label")
    rows = frame(100, 0)[["label"]]
    result = DP_AD_SPEC.evaluate(MetricContext(rows, rows, rows, schema, seed=0, options=DP_AD_SPEC.options))
    assert result.values == {} and "numeric" in result.detail["skipped"]


def test_a_dataset_without_numeric_columns_gets_its_loglik_but_no_anomaly_auc():
    """Tail-box anomalies need a numeric column; drawing them failed the whole cell."""
    schema = Schema("labels", (Column("label", ColumnKind.BINARY, categories=("0", "1")),), target="label")
    rows = frame(100, 0)[["label"]]
    result = SPEC.evaluate(MetricContext(rows, rows, rows, schema, seed=0, density=Flat()))
    assert result.values == {"heldout_loglik": 0.0, "heldout_loglik_zscored": 0.0}
    assert "no numeric column" in result.detail["anomaly_auc_skipped"]
