"""Carry a reference suite's unfinished run from one machine to the next through the repository.

    python scripts/checkpoint.py pack SUITE     runs/results/SUITE → leaderboard/checkpoints/SUITE.tar.xz
    python scripts/checkpoint.py unpack SUITE   the reverse, only when runs/results/SUITE holds no cells

Some committed suites (`wide`, `main`) take more CPU-hours than one working session, on machines
that are not kept between sessions. `make checkpoint` packs what a run has finished; `make results`
unpacks it before running, and the run resumes by cell key as it does in place: a cell whose key
changed since (a generator's version or defaults) runs again, the others are kept.

A checkpoint holds every finished cell's record and ledger, the audits, the manifest, and the
report's drawn figures, but no synthetic rows: the leaderboard, the audits and a resumed run never
read them, and the report reads them only to draw the figures packed here (they are tens of
megabytes, the rest under one). `make results` deletes the checkpoint once it publishes the suite.
"""

from __future__ import annotations

import argparse
import sys
import tarfile
from pathlib import Path

import dpgym

ROOT = Path(__file__).resolve().parents[1]
PACKED = ("run.json", "scored.json", "audits.json", "cells/*/result.json", "cells/*/ledger.json",
          "audits/**/*.json", "figures/*")


def packed_files(run_dir: Path) -> list[Path]:
    """The files of the run directory a resumed run, its leaderboard, its audits and its report read."""
    found = {path for pattern in PACKED for path in run_dir.glob(pattern)}
    return sorted(path for path in found if path.is_file()
                  and not any(part.startswith(".") for part in path.relative_to(run_dir).parts))


def pack(run_dir: Path, archive: Path) -> int:
    """Draw the report's figures for the cells finished so far (while their rows are here), then pack."""
    dpgym.open(run_dir).report()
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(f".{archive.name}.tmp")
    with tarfile.open(tmp, "w:xz") as tar:
        for path in packed_files(run_dir):
            tar.add(path, arcname=str(path.relative_to(run_dir)))
    tmp.replace(archive)
    return len(list(run_dir.glob("cells/[!.]*/result.json")))


def unpack(archive: Path, run_dir: Path) -> str:
    if not archive.is_file():
        return f"no checkpoint at {archive.relative_to(ROOT) if archive.is_relative_to(ROOT) else archive}"
    if any(run_dir.glob("cells/[!.]*/result.json")):
        return f"{run_dir} already holds cells: {archive} left unpacked"
    run_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:xz") as tar:
        tar.extractall(run_dir, filter="data")
    count = len(list(run_dir.glob("cells/[!.]*/result.json")))
    return f"{count} finished cells unpacked from {archive} into {run_dir}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("pack", "unpack"))
    parser.add_argument("suite")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "results", help="where suites run")
    parser.add_argument("--checkpoints", type=Path, default=ROOT / "leaderboard" / "checkpoints")
    args = parser.parse_args(argv)
    run_dir, archive = args.runs / args.suite, args.checkpoints / f"{args.suite}.tar.xz"
    if args.action == "pack":
        if not (run_dir / "cells").is_dir():
            print(f"{run_dir} holds no run to pack", file=sys.stderr)
            return 2
        count = pack(run_dir, archive)
        print(f"{count} finished cells of {run_dir} packed into {archive} ({archive.stat().st_size / 1024**2:.1f} MB)")
    else:
        print(unpack(archive, run_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
