"""The `dpgym` command line: the parser. The grid a `run` names and the commands themselves are in
`dpgym.commands`, imported only after the arguments parse, so `dpgym --help` and a mistyped option
answer without loading pandas, torch or any plugin.

Exit codes: 0 the command completed (a run with failed cells still completes: they are reported);
2 a user error (unknown plugin, bad suite or schema); 1 an infrastructure error.
`dpgym check`: 0 no regression, 1 a regression, 2 a usage or infrastructure error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dpgym.engine.suite import DEVICES, EXECUTORS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dpgym", description="Benchmark DP synthetic tabular data generators.")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="list installed generators, datasets and metrics")

    run = sub.add_parser("run", help="run a suite (or an ad-hoc grid) into a run directory")
    run.add_argument("--suite", help="suite name (leaderboard/suites/NAME.toml) or path to a suite file")
    run.add_argument("--generators", help="comma-separated generator names (ad-hoc grid)")
    run.add_argument("--learners", help="comma-separated private-learner names, run in the same grid")
    run.add_argument("--datasets", help="comma-separated dataset names (a NAME:k=v,k=v argument keeps its commas)")
    run.add_argument("--epsilons", help="comma-separated ε values (inf for non-private)")
    run.add_argument("--seeds", type=int, help="number of seeds (0..N-1)")
    run.add_argument("--delta", type=float, help="δ (default 1e-5)")
    run.add_argument("--metrics", help="comma-separated metric names (default: those relevant to each cell)")
    run.add_argument("--set", action="append", default=[], metavar="GENERATOR.PARAM=VALUE",
                     help="override a generator hyper-parameter (repeatable)")
    run.add_argument("--out", required=True, type=Path, help="run directory (re-running resumes it)")
    run.add_argument("--retry-failed", action="store_true", help="also redo cells that failed earlier")
    run.add_argument("--no-progress", action="store_true", help="no live display: one line per finished cell")
    run.add_argument("--dry-run", action="store_true",
                     help="check the grid and show per generator and dataset how many cells would run; run nothing")
    run.add_argument("--executor", choices=EXECUTORS,
                     help="serial (in-process, for debugging) | processes (default) | dask")
    run.add_argument("--workers", type=int, help="cells at once (default: the number of cores)")
    run.add_argument("--scheduler", metavar="ADDRESS", help="dask: an existing scheduler (default: a LocalCluster)")
    run.add_argument("--timeout", help="wall-clock limit per cell: seconds, or e.g. 30m, 2h")
    run.add_argument("--max-memory", help="resident-memory limit per cell, e.g. 8GB, 512MiB")
    run.add_argument("--device", choices=DEVICES, help="auto (default) | cpu | cuda, for generators that support CUDA")

    audit = sub.add_parser("audit", help="empirical privacy audit: an ε lower bound from a distinguishing game")
    audit.add_argument("--generators", required=True, help="comma-separated generator names")
    audit.add_argument("--datasets", required=True, help="comma-separated dataset names")
    audit.add_argument("--epsilons", required=True, help="comma-separated claimed ε values (finite)")
    audit.add_argument("--delta", type=float, default=1e-5, help="δ (default 1e-5)")
    audit.add_argument("--fits", type=int, default=200,
                       help="fits per audit (default 200; docs/privacy.md#empirical-audits recommends per cost)")
    audit.add_argument("--canaries", type=int, default=0,
                       help="one-run audit: this many canaries in a single fit instead of the game (--fits is unused)")
    audit.add_argument("--audit-rows", type=int, default=1000, help="rows of D (default 1000)")
    audit.add_argument("--columns", help="comma-separated columns: audit on the dataset's projection on them "
                                         "(a worst-case dataset from the schema; default: every column)")
    audit.add_argument("--white-box", action="store_true",
                       help="also attack what each generator's mechanism released (generators declaring the release "
                            "capability) with the likelihood ratio")
    audit.add_argument("--worst-case", action="store_true",
                       help="draw D from the training rows sharing no cell with the target, so it sits alone in its "
                            "cells (use a few hundred --audit-rows)")
    audit.add_argument("--synthetic-rows", type=int,
                       help="synthetic rows sampled per fit (default: --audit-rows; 0 with --white-box: attack the "
                            "release alone)")
    audit.add_argument("--seed", type=int, default=0, help="seed of D, the coins and the fits (default 0)")
    audit.add_argument("--set", action="append", default=[], metavar="GENERATOR.PARAM=VALUE",
                       help="override a generator hyper-parameter (repeatable)")
    audit.add_argument("--out", required=True, type=Path, help="directory (DIR/audits/, DIR/audits.json); re-running resumes")
    audit.add_argument("--workers", type=int, help="fit processes at once (default: the number of cores)")
    audit.add_argument("--timeout", help="wall-clock limit per process of up to 10 fits (1,000 with --worst-case): "
                                         "seconds, or e.g. 30m")
    audit.add_argument("--max-memory", help="resident-memory limit per fit process, e.g. 8GB")

    score = sub.add_parser("score", help="score synthetic rows made elsewhere beside a run's generators")
    score.add_argument("--dataset", required=True, help="the dataset the rows imitate (its real split scores them)")
    score.add_argument("--synthetic", required=True, type=Path, help="the synthetic rows: a CSV or Parquet file")
    score.add_argument("--label", required=True, help="the name the rows get in the leaderboard, e.g. vendor-x")
    score.add_argument("--epsilon", help="the ε claimed for the rows (guarantee nominal); none given: guarantee none")
    score.add_argument("--seed", type=int, default=0, help="the seed whose evaluation stream scores them (default 0)")
    score.add_argument("--metrics", help="comma-separated metric names (default: the run's)")
    score.add_argument("--out", required=True, type=Path, help="a run directory (dpgym run --out DIR)")

    board = sub.add_parser("leaderboard", help="aggregate a run directory into leaderboard.csv / .md")
    board.add_argument("run_dir", type=Path)

    compare = sub.add_parser("compare", help="compare a run with published figures (leaderboard/references/)")
    compare.add_argument("run_dir", type=Path)
    compare.add_argument("--reference", help="comma-separated reference names or files (default: the suite's references)")

    check = sub.add_parser("check", help="compare a run with a committed baseline (CI regression gate)")
    check.add_argument("run_dir", type=Path)
    check.add_argument("--baseline", type=Path, required=True, help="e.g. leaderboard/baselines/golden.json")
    check.add_argument("--alpha", type=float, default=0.05, help="one-sided test level for metric regressions")
    check.add_argument("--update", action="store_true", help="rewrite the baseline from this run")

    report = sub.add_parser("report", help="write the run's self-contained HTML report (DIR/report.html)")
    report.add_argument("run_dir", type=Path)
    report.add_argument("--out", type=Path, help="where to write the report (default: RUN_DIR/report.html)")

    schema = sub.add_parser("schema", help="work with dataset schemas")
    schema_sub = schema.add_subparsers(dest="schema_command", required=True)
    infer = schema_sub.add_parser("infer", help="draft a schema from a CSV/Parquet file, for you to review")
    infer.add_argument("file", type=Path)
    infer.add_argument("--out", type=Path, help="write the draft here (never overwrites); default: print it")

    scaffold = sub.add_parser("new-plugin", help="create a ready-to-install plugin package with a working DP generator")
    scaffold.add_argument("name", help="the generator's name (lower case, digits, underscores)")
    scaffold.add_argument("--dir", type=Path, help="where to create the package (default: ./dpgym-NAME)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from dpgym.commands import execute

    return execute(args)


if __name__ == "__main__":
    sys.exit(main())
