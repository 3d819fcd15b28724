"""`dpgym new-plugin NAME`: a ready-to-install plugin package, filled in from `templates/plugin/`.

Template files end in ``.tmpl`` (so no tool mistakes them for dpgym's own code) and use
``{{placeholder}}`` markers; a folder named ``__module__`` becomes the package's module.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Collection
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from harness.hookspecs import DPGYM_API_VERSION

TEMPLATE = resources.files("harness") / "templates" / "plugin"
VALID_NAME = re.compile(r"[a-z][a-z0-9_]*")


class ScaffoldError(ValueError):
    """The plugin name or the target folder is unusable; the message says why."""


def check_name(name: str, taken: Collection[str]) -> None:
    if not VALID_NAME.fullmatch(name) or keyword.iskeyword(name):
        raise ScaffoldError(f"invalid plugin name {name!r}: use lower-case letters, digits and underscores, "
                            "starting with a letter (it names the generator and the Python module dpgym_NAME)")
    if name in taken:
        raise ScaffoldError(f"a generator named {name!r} is already installed; generator names are global, "
                            "choose another")


def default_target(name: str) -> Path:
    return Path(f"dpgym-{name.replace('_', '-')}")


def new_plugin(name: str, target: Path | None = None, taken: Collection[str] = ()) -> Path:
    """Write the package for generator `name` into `target` (default ./dpgym-NAME); return the folder."""
    check_name(name, taken)
    target = target or default_target(name)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ScaffoldError(f"{target} exists and is not an empty folder; choose another with --dir")
    values = {
        "name": name,
        "module": f"dpgym_{name}",
        "distribution": default_target(name).name,
        "Class": "".join(part.capitalize() for part in name.split("_")),
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
