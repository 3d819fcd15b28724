"""Sanity of both metrics on real Adult, with the real training rows standing in for synthetic data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpgym.specs import MetricContext
from dpgym.plugins.metrics.fidelity import compute as fidelity
from dpgym.plugins.metrics.utility import compute as utility

pytestmark = pytest.mark.slow


@pytest.mark.slow
def test_train_real_test_real_matches_published_bands(adult_split, adult_schema):
    ctx = MetricContext(train=adult_split.train, test=adult_split.test, synthetic=adult_split.train,
                        schema=adult_schema, seed=0)
    result = utility.evaluate(ctx)
    # Published train-real-test-real AUROC on Adult: about 0.85-0.92 (DP-HFlow Table 3: 0.90).
    assert 0.85 <= result.values["tstr_auroc"] <= 0.92
    # DP-HFlow Table 2 reports 0.79 for "Real", but on DP-MERF's class-balanced resplit; on the
    # official, imbalanced split our zoo averages about 0.76 (Gaussian NB alone scores about 0.54).
    assert 0.70 <= result.values["tstr_macro_f1"] <= 0.82
    assert result.detail["fallbacks"] == {}
    assert result.detail["test_rows"] == 16_281


@pytest.mark.slow
def test_real_against_itself_is_perfect_and_shuffling_breaks_dependence(adult_split, adult_schema):
    train = adult_split.train
    same = fidelity.evaluate(MetricContext(train=train, test=adult_split.test, synthetic=train,
                                           schema=adult_schema, seed=0))
    assert same.values == {"marginal_tvd": 0.0, "marginal_ks": 0.0, "kendall_rmse": 0.0, "kendall_mae": 0.0,
                           "tvd_2way": 0.0, "tvd_3way": 0.0}
    assert same.detail["tvd_3way_triples"] == {"scored": 455, "of": 455, "sampled": False, "seed": 0}

    rng = np.random.default_rng(0)
    shuffled = pd.DataFrame({name: train[name].to_numpy()[rng.permutation(len(train))] for name in adult_schema.names})
    broken = fidelity.evaluate(MetricContext(train=train, test=adult_split.test, synthetic=shuffled,
                                             schema=adult_schema, seed=0))
    assert broken.values["marginal_tvd"] == pytest.approx(0.0, abs=1e-12)
    assert broken.values["kendall_rmse"] > 0.05
    assert broken.values["tvd_3way"] > broken.values["tvd_2way"] > 0.05
