"""via_synthetic:<generator>: a generator's ledger and guarantee, a model trained on its rows only."""

import pytest

from harness import Budget
from harness.registry import PluginError
from plugins.learners.via_synthetic import ViaSynthetic


def test_resolved_learner_inherits_the_generators_guarantee(learner_registry):
    spec = learner_registry.get("learner", "via_synthetic:independent").spec
    generator = learner_registry.generator("independent")
    assert spec.name == "via_synthetic:independent" and spec.guarantee is generator.guarantee


def test_unknown_generator_is_a_plugin_error(learner_registry):
    with pytest.raises(PluginError):
        learner_registry.get("learner", "via_synthetic:no_such_generator")


def test_model_from_independent_histograms_spends_the_generators_ledger(toy_split, toy_schema, learner_registry):
    learner = ViaSynthetic(learner_registry.generator("independent"))
    ledger = learner.fit(toy_split.train, toy_schema, Budget(1.0, 1e-5), seed=0)
    assert 0 < ledger.epsilon <= 1.0
    scores = learner.release().decision_function(toy_split.test)
    assert len(scores) == len(toy_split.test)
