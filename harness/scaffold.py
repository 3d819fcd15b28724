"""`dpgym new-plugin NAME`: a ready-to-install plugin package, filled in from `templates/plugin/`.

Template files end in ``.tmpl`` (so no tool mistakes them for dpgym's own code) and use
``{{placeholder}}`` markers; a folder named ``__module__`` becomes the package's module.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from importlib import metadata, resources
from importlib.resources.abc import Traversable
from pathlib import Path

from dpgym.hookspecs import DPGYM_API_VERSION

TEMPLATE = resources.files("dpgym") / "templates" / "plugin"
# Words of lower-case letters and digits joined by single underscores: each underscore becomes a
# hyphen of the distribution dpgym-NAME, and PEP 508 allows no leading, trailing or repeated ones.
VALID_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")


class ScaffoldError(ValueError):
    """The plugin name or the target folder is unusable; the message says why."""


def distribution_name(name: str) -> str:
    return f"dpgym-{name.replace('_', '-')}"


def class_name(name: str) -> str:
    """CamelCase ending in "Generator": never a Python constant (None, True) nor a name the templates import."""
    camel = "".join(part.capitalize() for part in name.split("_"))
    return camel if camel.endswith("Generator") else camel + "Generator"


def check_name(name: str, taken: Mapping[str, str]) -> None:
    """Refuse a name that is not a valid module and distribution name, or that an installed
    package holds: the scaffold makes it the generator's name, the entry-point key, the module
    dpgym_NAME and the distribution dpgym-NAME."""
    if not VALID_NAME.fullmatch(name) or keyword.iskeyword(name):
        raise ScaffoldError(f"invalid plugin name {name!r}: use lower-case letters and digits, starting with a letter, "
                            "words joined by single underscores (it names the generator, the Python module dpgym_NAME "
                            "and the distribution dpgym-NAME)")
    if name in taken:
        raise ScaffoldError(f"the name {name!r} is taken by {taken[name]}; plugin, generator, learner, dataset and "
                            "metric names are global, choose another")
    try:
        installed = metadata.distribution(distribution_name(name))
    except metadata.PackageNotFoundError:
        return
    raise ScaffoldError(f"the distribution {installed.metadata['Name']} {installed.version} is already installed; "
                        f"a new {distribution_name(name)} would replace it, choose another name")


def new_plugin(name: str, target: Path | None, taken: Mapping[str, str]) -> Path:
    """Write the package for generator `name` into `target` (default ./dpgym-NAME); return the folder.
    `taken` maps every name in use to what holds it (`Registry.names_in_use`)."""
    check_name(name, taken)
    target = target or Path(distribution_name(name))
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ScaffoldError(f"{target} exists and is not an empty folder; choose another with --dir")
    values = {
        "name": name,
        "module": f"dpgym_{name}",
        "distribution": distribution_name(name),
        "Class": class_name(name),
        "api_version": str(DPGYM_API_VERSION),
    }
    for relative, template in _templates(TEMPLATE, Path()):
        path = target / Path(*(values["module"] if part == "__module__" else part for part in relative.parts))
        text = template.read_text(encoding="utf-8")
        for key, value in values.items():
            text = text.replace("{{" + key + "}}", value)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_suffix("").write_text(text, encoding="utf-8")
    return target


def _templates(folder: Traversable, relative: Path) -> list[tuple[Path, Traversable]]:
    found = []
    for entry in folder.iterdir():
        if entry.is_dir():
            found.extend(_templates(entry, relative / entry.name))
        elif entry.name.endswith(".tmpl"):
            found.append((relative / entry.name, entry))
    return found
