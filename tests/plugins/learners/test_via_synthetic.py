"""via_synthetic:<generator>: a generator's ledger and guarantee, a model trained on its rows only."""

import pytest

from dpgym import Budget
from dpgym.plugins.learners.via_synthetic.model import ViaSynthetic
from dpgym.registry import PluginError


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


def test_bad_generator_params_are_a_user_error_before_any_cell_runs(learner_registry):
    from dpgym.engine.grid import check_builds, expand
    from dpgym.engine.suite import MethodConfig, Suite
    from dpgym.specs import SpecError

    bad = MethodConfig("via_synthetic:independent", {"generator_params": {"bogus": 1}}, kind="learner")
    suite = Suite("t", (), ("adult_expm",), (1.0,), (0,), 1e-5, learners=(bad,))
    with pytest.raises(SpecError, match=r"generator 'independent': unknown hyper-parameters \['bogus'\]"):
        check_builds(expand(suite, learner_registry), learner_registry)


def test_the_runners_device_reaches_a_generator_that_can_use_one(learner_registry):
    """Only generators taking `device` get one, so `--device` governs the generator inside the learner."""
    from dpgym.registry import Registry

    registry = Registry.discover()
    assert "device" in registry.get("learner", "via_synthetic:dp_merf").spec.defaults
    assert "device" not in learner_registry.get("learner", "via_synthetic:independent").spec.defaults
    learner = ViaSynthetic(registry.generator("dp_merf"), {"iterations": 5}, device="cpu")
    assert learner.generator_params == {"iterations": 5, "device": "cpu"}
