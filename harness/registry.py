"""Plugin discovery: loads every entry point in the group ``dpgym`` and records which
distribution provided each generator, dataset and metric."""

from __future__ import annotations

import difflib
import importlib
import os
from dataclasses import MISSING, dataclass, fields
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

import pluggy

from dpgym import hookspecs
from dpgym.specs import SPEC_TYPES, DatasetSpec, GeneratorSpec, LearnerSpec, MetricSpec

ENTRY_POINT_GROUP = "dpgym"
# Developer/testing feature: extra plugins as "module" or "module:attribute" (a class is
# instantiated), comma-separated. Read by every process that discovers plugins, so test plugins
# reach worker processes too, where objects handed to `Registry.discover(extra=...)` cannot.
PLUGINS_ENV = "DPGYM_PLUGINS"


class PluginError(RuntimeError):
    """A plugin failed to load, returned a bad spec, or a name is unknown or taken twice."""


@dataclass(frozen=True)
class Provided:
    """A spec and where it came from."""

    spec: Any
    plugin: str  # entry-point (or registration) name
    package: str  # distribution name and version, e.g. "dpgym 0.1.0"


class Registry:
    """Every generator, dataset and metric the installed plugins provide, by name."""

    HOOKS = {"generator": "dpgym_generators", "learner": "dpgym_learners", "dataset": "dpgym_datasets",
             "metric": "dpgym_metrics"}

    def __init__(self, manager: pluggy.PluginManager, packages: dict[str, str], worker_plugins: str = "",
                 direct: tuple[str, ...] = ()):
        self.manager = manager
        self.packages = packages  # plugin (entry-point or registration) name -> its package
        # What worker processes must load beyond the entry points (a DPGYM_PLUGINS value): the
        # variable's own plugins, and `extra` plugins that can be re-imported by name.
        self.worker_plugins = worker_plugins
        self.direct = direct  # names of `extra` plugins that cannot be re-imported: invisible to workers
        self.kinds: dict[str, dict[str, Provided]] = {}
        for kind, hook in self.HOOKS.items():
            self.kinds[kind] = self._collect(kind, getattr(manager.hook, hook), packages)

    @classmethod
    def discover(cls, extra: dict[str, ModuleType | object] | None = None) -> Registry:
        """Load the installed entry points, the `DPGYM_PLUGINS` modules, and `extra` plugins
        (name -> module or object) given directly."""
        manager = pluggy.PluginManager(hookspecs.PROJECT)
        manager.add_hookspecs(hookspecs)
        packages: dict[str, str] = {}  # plugin name -> its package, filled in by _register
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            package = f"{ep.dist.name} {ep.dist.version}" if ep.dist else "unknown package"
            try:
                plugin = _instance(ep.load())
            except Exception as err:  # an import error in a plugin must name the plugin
                raise PluginError(
                    f"plugin {ep.name!r} from {package} failed to load ({ep.value}): {type(err).__name__}: {err}"
                ) from err
            cls._register(manager, plugin, ep.name, package, packages)
        for ref in cls.env_references():
            cls._register(manager, cls._load_reference(ref), ref, f"{PLUGINS_ENV} ({ref})", packages)
        portable, direct = cls.env_references(), []
        for name, plugin in (extra or {}).items():
            cls._register(manager, plugin, name, "registered directly", packages)
            ref = cls._reference(plugin)
            portable.append(ref) if ref else direct.append(name)
        return cls(manager, packages, ",".join(portable), tuple(direct))

    @staticmethod
    def env_references() -> list[str]:
        """The plugins named in `DPGYM_PLUGINS`; joined by commas, the workers' plugins of a
        registry discovered without `extra` ones (known before discovery, for an early forkserver)."""
        return [r.strip() for r in os.environ.get(PLUGINS_ENV, "").split(",") if r.strip()]

    @staticmethod
    def _reference(plugin: object) -> str | None:
        """How a worker process can load the same plugin: a module by name, or a stateless instance
        of a module-level class as "module:Class"; None when it cannot (it holds state)."""
        if isinstance(plugin, ModuleType):
            return plugin.__name__
        cls_ = type(plugin)
        state = getattr(plugin, "__dict__", None)
        if state is None or state:  # __slots__ (state unknown) or attributes set on the instance
            return None
        try:
            found = getattr(importlib.import_module(cls_.__module__), cls_.__qualname__, None)
        except ImportError:
            return None
        return f"{cls_.__module__}:{cls_.__qualname__}" if found is cls_ else None

    @staticmethod
    def _load_reference(ref: str) -> object:
        """`module` or `module:attribute`; a class is instantiated (pluggy wants an instance)."""
        module_name, _, attribute = ref.partition(":")
        try:
            module = importlib.import_module(module_name)
            return _instance(getattr(module, attribute) if attribute else module)
        except Exception as err:
            raise PluginError(f"plugin {ref!r} from {PLUGINS_ENV} failed to load: {type(err).__name__}: {err}") from err

    @staticmethod
    def _register(manager: pluggy.PluginManager, plugin: object, name: str, package: str,
                  packages: dict[str, str]) -> None:
        """Register `plugin` under `name` and record its package in `packages`, refusing a plugin
        written for another API, a name registered before, and hook functions pluggy would skip."""
        wanted = getattr(plugin, "DPGYM_API_VERSION", hookspecs.DPGYM_API_VERSION)
        if not isinstance(wanted, int) or isinstance(wanted, bool):
            raise PluginError(f"plugin {name!r} from {package} declares DPGYM_API_VERSION = {wanted!r}, which is not "
                              f"an integer (this dpgym speaks plugin API {hookspecs.DPGYM_API_VERSION})")
        if wanted != hookspecs.DPGYM_API_VERSION:
            newer = "dpgym" if wanted > hookspecs.DPGYM_API_VERSION else package
            raise PluginError(
                f"plugin {name!r} from {package} was written for dpgym plugin API {wanted}, but this dpgym "
                f"speaks API {hookspecs.DPGYM_API_VERSION}: upgrade {newer}"
            )
        if name in packages:
            raise PluginError(f"two plugins are named {name!r}, one from {packages[name]} and one from {package}: "
                              "plugin (entry-point) names are global, so one of the two must be renamed or uninstalled")
        unmarked = [hook for hook in vars(manager.hook) if callable(getattr(plugin, hook, None))
                    and manager.parse_hookimpl_opts(plugin, hook) is None]
        if unmarked:
            raise PluginError(f"plugin {name!r} from {package} defines {', '.join(f'{h}()' for h in unmarked)} "
                              "without @hookimpl (from dpgym import hookimpl), so dpgym would never call it")
        try:
            manager.register(plugin, name=name)
            manager.check_pending()
        except pluggy.PluginValidationError as err:
            manager.unregister(name=name)
            raise PluginError(f"plugin {name!r} from {package} does not fit the dpgym hooks: {err}") from err
        except ValueError as err:  # pluggy: this module or object is registered under another name already
            raise PluginError(f"plugin {name!r} from {package}: {err}") from err
        packages[name] = package

    @staticmethod
    def _collect(kind: str, hook: Any, packages: dict[str, str]) -> dict[str, Provided]:
        spec_type = SPEC_TYPES[kind]
        required = {f.name for f in fields(spec_type) if f.default is f.default_factory is MISSING}
        found: dict[str, Provided] = {}
        for impl in hook.get_hookimpls():
            where = f"plugin {impl.plugin_name!r} from {packages.get(impl.plugin_name, 'unknown package')}"
            try:
                specs = impl.function()
            except Exception as err:
                raise PluginError(f"{where} raised in {hook.name}(): {type(err).__name__}: {err}") from err
            if specs is not None and not isinstance(specs, (list, tuple)):
                raise PluginError(f"{where}: {hook.name}() returned {type(specs).__name__}, "
                                  f"not a list of {spec_type.__name__}")
            for spec in specs or []:
                if not isinstance(spec, spec_type):
                    raise PluginError(f"{where}: {hook.name}() returned {type(spec).__name__}, not a {spec_type.__name__}")
                empty = sorted(f for f in required if getattr(spec, f) in (None, ""))
                if empty:
                    raise PluginError(f"{where}: {kind} spec {spec.name!r} has empty required fields {empty}")
                if spec.name in found:
                    other = found[spec.name]
                    raise PluginError(
                        f"{kind} name {spec.name!r} is provided twice: by plugin {other.plugin!r} "
                        f"({other.package}) and by {where}"
                    )
                found[spec.name] = Provided(spec, impl.plugin_name, packages.get(impl.plugin_name, "unknown"))
        return found

    def get(self, kind: str, name: str) -> Provided:
        available = self.kinds[kind]
        prefix, colon, argument = name.partition(":")
        if colon and name not in available and prefix in available:
            return self._resolve(kind, name, available[prefix], argument, self)
        if name not in available:
            close = difflib.get_close_matches(name, available, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; available: {', '.join(sorted(available))}"
            raise PluginError(f"unknown {kind} {name!r}{hint}")
        return available[name]

    @staticmethod
    def _resolve(kind: str, name: str, base: Provided, argument: str, registry: Registry) -> Provided:
        """``NAME:ARGUMENT``: a dataset or learner spec with a `resolve` function builds the variant."""
        resolve = base.spec.resolve if kind in ("dataset", "learner") else None
        if resolve is None:
            raise PluginError(f"{kind} {base.spec.name!r} takes no ':' argument (asked for {name!r})")
        try:
            variant = resolve(argument, registry)
        except ValueError as err:
            raise PluginError(f"{kind} {name!r}: {err}") from err
        if not isinstance(variant, type(base.spec)):
            raise PluginError(f"{kind} {name!r}: resolve() of plugin {base.plugin!r} returned "
                              f"{type(variant).__name__}, not a {type(base.spec).__name__}")
        return Provided(variant, base.plugin, base.package)

    def names_in_use(self) -> dict[str, str]:
        """Every name a new plugin must not take, with what holds it: the plugins' own
        (entry-point) names and every generator, learner, dataset and metric name."""
        used = {name: f"the plugin {name!r} from {package}" for name, package in self.packages.items()}
        for kind, provided in self.kinds.items():
            used.update({name: f"the {kind} {name!r} from {p.package}" for name, p in provided.items()})
        return used

    # The `SpecLookup` a `resolve` function is handed.
    def generator(self, name: str) -> GeneratorSpec:
        return self.get("generator", name).spec

    def learner(self, name: str) -> LearnerSpec:
        return self.get("learner", name).spec

    def dataset(self, name: str) -> DatasetSpec:
        return self.get("dataset", name).spec

    def metric(self, name: str) -> MetricSpec:
        return self.get("metric", name).spec


def _instance(plugin: object) -> object:
    """pluggy calls the hooks of an instance, so a plugin given as a class is instantiated."""
    return plugin() if isinstance(plugin, type) else plugin
