"""ExpM+NF: the utility's sensitivity, the ledger's nominal ε, and that ε actually matters."""

import math

import numpy as np
import pytest
import torch

from dpgym import Budget, Guarantee
from dpgym.privacy.reaccount import reaccount
from dpgym.plugins.learners.expm_nf_lr.model import ExpMNFLR
from dpgym.plugins.learners.logistic import summed_l2


def test_summed_l2_utility_has_sensitivity_one_under_replace_one():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(50, 5, generator=g) * 3, (torch.rand(50, generator=g) < 0.5).float()
    thetas = torch.randn(500, 6, generator=g) * 10
    for row in range(5):
        x2, y2 = x.clone(), y.clone()
        x2[row], y2[row] = torch.randn(5, generator=g) * 50, 1 - y2[row]
        assert (summed_l2(x, y, thetas) - summed_l2(x2, y2, thetas)).abs().max() <= 1.0 + 1e-5  # float32 rounding


def test_all_flow_samples_are_scored_in_one_batched_product():
    g = torch.Generator().manual_seed(1)
    x, y, thetas = torch.randn(40, 3, generator=g), (torch.rand(40, generator=g) < 0.5).float(), torch.randn(8, 4, generator=g)
    one_by_one = torch.stack([((torch.sigmoid(x @ t[:-1] + t[-1]) - y) ** 2).sum() for t in thetas])
    assert torch.allclose(summed_l2(x, y, thetas), one_by_one, atol=1e-5)


def test_a_weighted_loss_without_a_public_cap_is_refused():
    with pytest.raises(ValueError, match="weight_cap"):
        ExpMNFLR(weight_column="fnlwgt")
    ExpMNFLR(weight_column="fnlwgt", weight_cap=1e6)  # capped: sensitivity stays 1


def test_ledger_is_nominal_and_reaccounts_to_the_budget(toy_split, toy_schema):
    learner = ExpMNFLR(iterations=20)
    ledger = learner.fit(toy_split.train, toy_schema, Budget(0.5, 1e-5), seed=0)
    assert ledger.guarantee is Guarantee.NOMINAL and ledger.delta == 0
    (entry,) = ledger.entries
    assert entry.type == "exponential" and entry.event.inverse_temperature == 0.25
    check = reaccount(ledger, Budget(0.5, 1e-5))
    assert check.verdict == "ok" and math.isclose(check.epsilon, 0.5)


def test_the_ledger_carries_nothing_computed_from_the_rows(toy_split, toy_schema):
    """It once held the final reverse KL, whose utility term is a sum over the private rows."""
    neighbour = toy_split.train.copy()
    column = toy_schema.target_column
    first = neighbour.index[0]
    neighbour.loc[first, column.name] = next(c for c in column.categories if c != neighbour.loc[first, column.name])
    ledgers = [ExpMNFLR(iterations=3).fit(frame, toy_schema, Budget(0.5), seed=0).to_dict()
               for frame in (toy_split.train, neighbour)]
    assert ledgers[0] == ledgers[1]


def _median_auc(mode, epsilon, split, schema):
    from sklearn.metrics import roc_auc_score

    learner = ExpMNFLR(mode=mode, iterations=400, data_batch=1024)
    learner.fit(split.train, schema, Budget(epsilon), seed=0)
    y = learner.design_.labels(split.test)
    return float(np.median([roc_auc_score(y, m.decision_function(split.test)) for m in learner.evaluation_models(50, 1)]))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["paper", "proper"])
def test_epsilon_matters(mode, toy_split, toy_schema):
    assert _median_auc(mode, 1.0, toy_split, toy_schema) > 0.85
    assert _median_auc(mode, 1e-6, toy_split, toy_schema) < 0.65
