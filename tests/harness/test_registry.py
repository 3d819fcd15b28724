"""Plugin discovery: entry points, provenance, and one clear error per kind of broken plugin."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from dpgym import DatasetSpec, GeneratorSpec, Guarantee, hookimpl
from dpgym import registry as registry_module
from dpgym.registry import PluginError, Registry
from dpgym.plugins.generators import uniform as uniform_plugin
from dpgym.plugins.generators.uniform import Uniform
from tests.pip_target import metadata_only


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


def test_an_entry_point_name_taken_twice_names_both_packages(tmp_path, monkeypatch):
    for package in ("one", "two"):
        (tmp_path / f"plugin_{package}.py").write_text("DPGYM_API_VERSION = 2\n")
        metadata_only(tmp_path, f"dpgym-{package}", {"shared": f"plugin_{package}"})
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match=r"two plugins are named 'shared', one from dpgym-(one|two) 0.1.0 "
                                          r"and one from dpgym-(one|two) 0.1.0") as caught:
        Registry.discover()
    assert "dpgym-one" in str(caught.value) and "dpgym-two" in str(caught.value)


def test_a_plugin_taking_a_first_party_name_names_dpgym_and_itself(tmp_path, monkeypatch):
    (tmp_path / "plugin_census.py").write_text("DPGYM_API_VERSION = 2\n")
    metadata_only(tmp_path, "dpgym-census", {"census": "plugin_census"})
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match=r"two plugins are named 'census', one from (dpgym|dpgym-census) [^ ]+ "
                                          r"and one from (dpgym|dpgym-census) [^ ]+:") as caught:
        Registry.discover()
    assert "dpgym-census 0.1.0" in str(caught.value) and "dpgym 0." in str(caught.value)


def test_one_module_registered_under_two_names_is_named():
    with pytest.raises(PluginError, match=r"plugin 'again' from registered directly: .*already registered"):
        Registry.discover(extra={"again": uniform_plugin})


class ClassPlugin:
    @hookimpl
    def dpgym_generators(self):
        return [GeneratorSpec(name="from_a_class", version="1", factory=Uniform, guarantee=Guarantee.PURE)]


def test_an_entry_point_naming_a_class_registers_an_instance(monkeypatch):
    classy = EntryPoint(name="classy", value=f"{__name__}:ClassPlugin", group="dpgym")
    real = registry_module.entry_points(group="dpgym")
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [*real, classy])
    assert Registry.discover().get("generator", "from_a_class").plugin == "classy"


class Unmarked:
    def dpgym_generators(self):  # no @hookimpl: pluggy would skip it
        return [GeneratorSpec(name="unmarked", version="1", factory=Uniform, guarantee=Guarantee.PURE)]


def test_hook_functions_without_hookimpl_are_refused_naming_the_plugin():
    with pytest.raises(PluginError, match=r"plugin 'plain' .*defines dpgym_generators\(\) without @hookimpl"):
        Registry.discover(extra={"plain": Unmarked()})


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
    with pytest.raises(PluginError, match=r"plugin 'future'.*written for dpgym plugin API 99.*speaks API 2: upgrade dpgym"):
        Registry.discover(extra={"future": FromTheFuture()})


class TextVersion:
    DPGYM_API_VERSION = "1"


def test_a_plugin_api_version_that_is_not_an_integer_is_named():
    with pytest.raises(PluginError, match=r"plugin 'text' .*declares DPGYM_API_VERSION = '1', which is not an integer"):
        Registry.discover(extra={"text": TextVersion()})
