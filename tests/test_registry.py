"""Plugin discovery: entry points, provenance, and one clear error per kind of broken plugin."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from harness import DatasetSpec, GeneratorSpec, Guarantee, hookimpl
from harness import registry as registry_module
from harness.registry import PluginError, Registry
from plugins.generators.uniform import Uniform


def test_first_party_plugins_come_from_entry_points_with_their_package():
    registry = Registry.discover()
    for name in ("uniform", "independent", "real"):
        provided = registry.get("generator", name)
        assert provided.package.startswith("dpgym ")
        assert provided.plugin == name
    assert registry.dataset("adult").license == "CC BY 4.0"
    assert registry.generator("real").guarantee is Guarantee.NONE


def test_unknown_name_suggests_close_matches():
    with pytest.raises(PluginError, match=r"unknown generator 'independant'; did you mean independent"):
        Registry.discover().generator("independant")


class DuplicateUniform:
    @hookimpl
    def dpgym_generators(self):
        return [GeneratorSpec(name="uniform", version="9", factory=Uniform, guarantee=Guarantee.PURE)]


def test_duplicate_names_name_both_providers():
    with pytest.raises(PluginError, match=r"generator name 'uniform' is provided twice: by plugin 'uniform'.*'dup'"):
        Registry.discover(extra={"dup": DuplicateUniform()})


class EmptyVersion:
    @hookimpl
    def dpgym_datasets(self):
        return [DatasetSpec(name="broken", version="", load=lambda: None, schema=lambda: None)]


def test_spec_missing_required_field_is_named():
    with pytest.raises(PluginError, match=r"plugin 'bad'.*dataset spec 'broken' has empty required fields \['version'\]"):
        Registry.discover(extra={"bad": EmptyVersion()})


class WrongType:
    @hookimpl
    def dpgym_metrics(self):
        return ["not a spec"]


def test_wrong_spec_type_is_named():
    with pytest.raises(PluginError, match=r"plugin 'bad'.*returned str, not a MetricSpec"):
        Registry.discover(extra={"bad": WrongType()})


class BareSpec:
    @hookimpl
    def dpgym_generators(self):
        return GeneratorSpec(name="bare", version="1", factory=Uniform, guarantee=Guarantee.PURE)


def test_a_hook_returning_one_spec_instead_of_a_list_is_named():
    with pytest.raises(PluginError, match=r"plugin 'bare'.*returned GeneratorSpec, not a list of GeneratorSpec"):
        Registry.discover(extra={"bare": BareSpec()})


class Misspelled:
    @hookimpl
    def dpgym_generator(self):  # no such hook
        return []


def test_hook_typo_is_rejected():
    with pytest.raises(PluginError, match=r"plugin 'typo'.*does not fit the dpgym hooks"):
        Registry.discover(extra={"typo": Misspelled()})


def test_plugin_whose_import_fails_names_plugin_and_package(monkeypatch):
    broken = EntryPoint(name="broken", value="no_such_module_xyz", group="dpgym")
    real = registry_module.entry_points(group="dpgym")
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [*real, broken])
    with pytest.raises(PluginError, match=r"plugin 'broken' .*failed to load \(no_such_module_xyz\): ModuleNotFoundError"):
        Registry.discover()


def test_unknown_hyper_parameter_is_refused():
    with pytest.raises(ValueError, match=r"generator 'independent': unknown hyper-parameters \['bins'\]"):
        Registry.discover().generator("independent").build({"bins": 3})


class FromTheFuture:
    DPGYM_API_VERSION = 99

    @hookimpl
    def dpgym_generators(self):
        return []


def test_plugin_api_version_mismatch_says_what_to_upgrade():
    with pytest.raises(PluginError, match=r"plugin 'future'.*written for dpgym plugin API 99.*speaks API 1: upgrade dpgym"):
        Registry.discover(extra={"future": FromTheFuture()})
