"""Install a plugin package into a throwaway folder (never the venv) and run dpgym with it on the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def install(package: Path, target: Path) -> dict[str, str]:
    """pip-install `package` (no dependencies) into `target`; return an environment that sees it."""
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                          str(package)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    path = os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "COLUMNS": "250", "PYTHONPATH": path}


def metadata_only(site: Path, distribution: str, entry_points: dict[str, str]) -> None:
    """The installed metadata of `distribution` (version 0.1.0) in `site`, registering `entry_points`
    in the dpgym group: what importlib.metadata sees of a pip-installed plugin, without its code."""
    info = site / f"{distribution.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[dpgym]\n" + "".join(f"{key} = {value}\n" for key, value in entry_points.items()))


def dpgym(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dpgym.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600)


def conformance(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest in `cwd` with dpgym's conformance plugin; `args` name the checks or test paths."""
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(cwd), *args],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=600)
