"""dpsgd_lr: the engine's Poisson DP-SGD with flat clipping at C = 1, a re-accountable ledger, and
noise calibrated with PRV at small ε (where an RDP-seeded bracket fails)."""

import pickle

import pytest

from dpgym import Budget, Guarantee
from dpgym.privacy.reaccount import reaccount
from dpgym.plugins.learners.dpsgd_lr.model import DPSGDLR


@pytest.fixture(scope="module")
def fitted(toy_split, toy_schema):
    learner = DPSGDLR(epochs=1.0)
    ledger = learner.fit(toy_split.train, toy_schema, Budget(1.0, 1e-5), seed=0)
    return learner, ledger


@pytest.mark.slow
def test_ledger_records_poisson_subsampled_gaussian_at_clip_one(fitted):
    _, ledger = fitted
    (entry,) = ledger.entries
    assert ledger.guarantee is Guarantee.FORMAL and entry.type == "subsampled_gaussian"
    assert entry.details["sampling"] == "poisson" and entry.event.clip_norm == 1.0
    assert entry.details["clipping"].startswith("flat")
    assert 0.99 <= ledger.epsilon <= 1.0  # PRV calibration to within ε/100 below the target
    assert reaccount(ledger, Budget(1.0, 1e-5)).verdict == "ok"


@pytest.mark.slow
def test_noise_is_solved_at_small_epsilon(toy_split, toy_schema):
    learner = DPSGDLR(epochs=0.2)
    ledger = learner.fit(toy_split.train, toy_schema, Budget(1e-3, 1e-5), seed=0)
    assert 0.99e-3 <= ledger.epsilon <= 1e-3 and learner.noise_multiplier_ > 10


@pytest.mark.slow
def test_a_released_model_carries_no_private_rows(fitted, toy_split):
    """Scoring caches the last frame's features outside the model: the released model pickles to
    its design and θ, not to the encoded rows it was fitted or scored on."""
    learner, _ = fitted
    model = learner.release()
    model.decision_function(toy_split.train)
    assert len(pickle.dumps(model)) < toy_split.train.shape[0] * 4  # one float32 per row is more
    rows = model.design.features(toy_split.train)
    assert rows.nbytes > 10 * len(pickle.dumps(model))
