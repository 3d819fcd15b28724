"""scripts/checkpoint.py carries an unfinished run through the repository: unpacked on another
machine, the run resumes without redoing a finished cell, and its report keeps every figure though
the checkpoint holds no synthetic rows."""

from __future__ import annotations

import importlib.util
import shutil
import tarfile
from pathlib import Path

import dpgym

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("checkpoint", ROOT / "scripts" / "checkpoint.py")
checkpoint = importlib.util.module_from_spec(spec)
spec.loader.exec_module(checkpoint)

GRID = dict(generators="independent,uniform", datasets="adult", epsilons=1, metrics="fidelity",
            executor="serial", progress=False)


def images(report: Path) -> list[str]:
    return [part.split('"')[0] for part in report.read_text().split("data:image/png;base64,")[1:]]


def test_a_packed_run_resumes_elsewhere_with_its_figures_and_without_its_rows(tmp_path: Path) -> None:
    here, there, archive = tmp_path / "here" / "suite", tmp_path / "there" / "suite", tmp_path / "suite.tar.xz"
    first = dpgym.run(**GRID, seeds=1, out=here)
    checkpoint.pack(here, archive)
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert not [n for n in names if n.endswith(".parquet")], "a checkpoint holds no synthetic rows"
    assert len([n for n in names if n.endswith("result.json")]) == 2

    assert checkpoint.unpack(archive, there).startswith("2 finished cells unpacked")
    assert "already holds cells" in checkpoint.unpack(archive, there)
    resumed = dpgym.run(**GRID, seeds=2, out=there)
    cells = resumed.cells.set_index("key")
    assert set(first.cells.key) <= set(cells.index)
    assert len(cells) == 4 and (cells.status == "ok").all()
    for key in first.cells.key:  # the packed cells were kept, not run again
        assert (there / "cells" / key / "result.json").read_bytes() == (here / "cells" / key / "result.json").read_bytes()
        assert not (there / "cells" / key / "synthetic.parquet").exists()

    report = resumed.report()
    assert "unreadable" not in report.read_text()
    shutil.rmtree(here / "figures")
    redrawn = images(first.report())  # drawn again from the rows, which stayed here
    for key in first.cells.key:
        marginals = (here / "figures" / f"{key}.json").read_text().split("data:image/png;base64,")[1].split('"')[0]
        assert marginals in images(report) and marginals in redrawn


def test_unpack_without_a_checkpoint_leaves_the_run_as_it_is(tmp_path: Path) -> None:
    assert checkpoint.unpack(tmp_path / "none.tar.xz", tmp_path / "run").startswith("no checkpoint")
    assert not (tmp_path / "run").exists()
