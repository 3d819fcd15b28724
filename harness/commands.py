"""The `dpgym` commands: list plugins, run a grid, build its leaderboard and report, check a run
against a baseline, draft a schema, scaffold a plugin. `dpgym.cli` parses the arguments and imports
this module only then. The runner, leaderboard, report and CI-gate modules (scipy, scikit-learn,
seaborn, scikit-posthocs) are imported inside the commands that use them, so that `dpgym list`, a dry
run and an argument error answer without them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dpgym.data.datafiles import DatasetUnavailable
from dpgym.data.inference import UnreadableTable, draft_toml, infer_schema, read_table
from dpgym.registry import PluginError, Provided, Registry
from dpgym.results.references import ReferenceError, known_references, load_reference
from dpgym.results.store import RunStore, StoreError, runs_again, write_json_atomic
from dpgym.engine.grid import NOT_DEFAULT, check_builds, default_metrics, expand
from dpgym.engine.pipeline import Run, stored_manifest
from dpgym.engine.preflight import InputError, check_datasets, check_out
from dpgym.engine.suite import (
    MethodConfig,
    Plan,
    Settings,
    Suite,
    SuiteError,
    apply_overrides,
    load_suite,
    parse_epsilon,
    parse_memory,
    parse_timeout,
)
from dpgym.scaffold import ScaffoldError, new_plugin
from dpgym.schema import SchemaError
from dpgym.specs import Capability, Direction, SpecError

UNLIMITED = 10**4  # a width no table of `dpgym list` reaches
USER_ERRORS = (PluginError, SchemaError, SpecError, SuiteError, DatasetUnavailable, ScaffoldError, InputError,
               UnreadableTable, ReferenceError)


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _dataset_names(text: str) -> list[str]:
    """Comma-separated dataset names whose ``NAME:key=v,key=v`` arguments keep their own commas:
    an item ``key=v`` with no ``:`` continues the argument of the name before it."""
    names: list[str] = []
    for item in _csv(text):
        if names and ":" in names[-1] and "=" in item and ":" not in item:
            names[-1] += f",{item}"
        else:
            names.append(item)
    return names


def _listed(args: argparse.Namespace, option: str,
            parse: Callable[[str], list[Any]] = _csv) -> tuple[Any, ...] | None:
    """The items of a comma-separated option, None when it is not given. Given but naming nothing
    (`--datasets ""`, `--metrics ,`) is an error: ignoring it would silently run the whole suite."""
    text = getattr(args, option)
    if text is None:
        return None
    items = tuple(parse(text))
    if not items:
        raise SuiteError(f"--{option} {text!r} names no {option.removesuffix('s')}")
    return items


def _epsilons(text: str) -> list[float]:
    return [parse_epsilon(e, "--epsilons") for e in _csv(text)]


def suite_from_args(args: argparse.Namespace) -> Suite:
    if args.seeds is not None and args.seeds < 1:
        raise SuiteError(f"--seeds must be ≥ 1, got {args.seeds}")
    if args.suite:
        suite = load_suite(args.suite)
        overrides = {
            "datasets": _listed(args, "datasets", _dataset_names),
            "epsilons": _listed(args, "epsilons", _epsilons),
            "seeds": tuple(range(args.seeds)) if args.seeds is not None else None,
            "delta": args.delta,
            "metrics": _listed(args, "metrics"),
        }
        if args.generators or args.learners:
            raise SuiteError("--generators/--learners build an ad-hoc grid; they cannot be combined with --suite")
        given = {name: value for name, value in overrides.items() if value is not None}
        if given:
            suite = suite.narrowed(**given)
    else:
        missing = [f"--{n}" for n in ("datasets", "epsilons") if getattr(args, n) is None]
        if not (args.generators or args.learners):
            missing.insert(0, "--generators (or --learners)")
        if missing:
            raise SuiteError(f"give --suite, or an ad-hoc grid with {', '.join(missing)}")
        suite = Suite(
            name="adhoc",
            generators=tuple(MethodConfig(g) for g in _csv(args.generators or "")),
            learners=tuple(MethodConfig(name, kind="learner") for name in _csv(args.learners or "")),
            datasets=_listed(args, "datasets", _dataset_names),
            epsilons=_listed(args, "epsilons", _epsilons),
            seeds=tuple(range(args.seeds or 1)),
            delta=args.delta if args.delta is not None else 1e-5,
            metrics=_listed(args, "metrics"),
        )
    return apply_overrides(suite, args.set)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Execution settings given on the command line; they override the suite's [settings]."""
    executor = args.executor or ("dask" if args.scheduler else None)
    return Settings(
        executor=executor,
        workers=args.workers,
        timeout=parse_timeout(args.timeout, "--timeout") if args.timeout else None,
        max_memory=parse_memory(args.max_memory, "--max-memory") if args.max_memory else None,
        device=args.device,
        scheduler=args.scheduler,
    )


def metric_directions(registry: Registry) -> dict[str, Direction]:
    from dpgym.results.leaderboard import metric_info

    return metric_info(registry)[0]


def show_leaderboard(run: Run, console: Console) -> None:
    """Write the run's leaderboard files and print their compact form: a few headline values per row
    and the overall ranking; the full table (every metric, with intervals) is in leaderboard.md and
    the report."""
    from dpgym.results.render import save_leaderboard, terminal_summary

    board = run.leaderboard()
    save_leaderboard(run.store, board)
    for table in terminal_summary(board, run.suite.headline):
        console.print(table)
    console.print(board.ranking.statement, markup=False, soft_wrap=True)
    ranks = [f"{e['generator']} #{e['rank']:.0f}" for e in board.ranking.generators if e["rank"] == e["rank"]]
    if ranks:
        console.print("overall: " + ", ".join(ranks), markup=False, soft_wrap=True)
    console.print(f"leaderboard (every metric, with 95% intervals): {run.store.leaderboard_path('md')} "
                  f"(and .csv, .json)", markup=False, soft_wrap=True)


METHOD_COLUMNS = ("name", "version", "guarantee", "defaults", "provided by", "description")


def _method_cells(provided: Provided) -> tuple[str, ...]:
    """A generator's or learner's row of `dpgym list` after its name (METHOD_COLUMNS)."""
    spec = provided.spec
    defaults = "\n".join(f"{k}={v}" for k, v in spec.defaults.items())
    return spec.version, str(spec.guarantee), defaults, provided.package, spec.description


def cmd_list(registry: Registry, console: Console) -> None:
    gens = Table(*METHOD_COLUMNS, title="generators")
    generator_how_to = []
    for name, p in sorted(registry.kinds["generator"].items()):
        missing = p.spec.missing()
        if missing:
            generator_how_to.append(f"{name} (unavailable): {missing}")
        gens.add_row(name + (" (unavailable)" if missing else ""), *_method_cells(p))
    learners = Table(*METHOD_COLUMNS, title="learners (private-learning track)")
    for name, p in sorted(registry.kinds["learner"].items()):
        learners.add_row(name, *_method_cells(p))
    data = Table(title="datasets")
    for col in ("name", "version", "available", "licence", "sha256", "provided by", "description"):
        data.add_column(col)
    how_to = []
    for name, p in sorted(registry.kinds["dataset"].items()):
        missing = p.spec.missing()
        if missing:
            how_to.append(f"{name}: {missing}")
        data.add_row(name, p.spec.version, "no (see below)" if missing else "yes", p.spec.license,
                     p.spec.checksum[:12], p.package, p.spec.description)
    mets = Table(title="metrics (default: run when a run names none; ranked value marked *)")
    for col in ("name", "version", "default", "values (direction)", "provided by"):
        mets.add_column(col)
    for name, p in sorted(registry.kinds["metric"].items()):
        values = ", ".join(f"{k}{'*' if k == p.spec.ranked_value else ''} ({'↑' if d is Direction.HIGHER else '↓'})"
                           for k, d in p.spec.directions.items())
        mets.add_row(name, p.spec.version, "yes" if p.spec.default else "", values, p.package)
    show = console.print
    if not console.is_terminal:  # piped or redirected: no screen to fit, so each table gets the width it needs
        def show(table: Table) -> None:
            needed = console.measure(table, options=console.options.update_width(UNLIMITED)).maximum
            Console(file=console.file, highlight=False, width=max(console.width, needed)).print(table)
    show(gens)
    for line in generator_how_to:
        console.print(f"  {line}", markup=False, soft_wrap=True)
    if registry.kinds["learner"]:
        show(learners)
    show(data)
    for line in how_to:
        console.print(f"  {line}", markup=False, soft_wrap=True)
    show(mets)


def check_run(run: Run, err: Console, retry_failed: bool, build: bool = True) -> None:
    """What a run checks before its first cell, a dry run too: the grid (names, hyper-parameters'
    names and types, checked when it was expanded), every dataset with a cell still to run, loaded once
    against its schema (a finished run resumed loads none), and unless `build` is False (a dry run,
    which imports no model code) each plugin with a cell to run built once, which checks its
    hyper-parameters' values. Warnings (an unreviewed schema) and notes print after every check."""
    stored = run.stored()
    pending = [cell for cell in run.cells if runs_again(stored[cell.key], retry_failed)]
    if build:
        check_builds(pending, run.registry)
    datasets = {cell.dataset for cell in pending}
    suite = run.suite
    dataset_warnings = check_datasets(replace(suite, datasets=tuple(d for d in suite.datasets if d in datasets)),
                                      run.registry) if pending else []
    notes = left_out_metrics(suite, run.registry) if suite.metrics is None else []
    for note in dataset_warnings:
        err.print(f"dpgym: warning: {note}", markup=False, soft_wrap=True)
    for note in notes:  # after the checks, so that a bad input stays a single error line
        err.print(f"dpgym: note: {note}", markup=False, soft_wrap=True)


def left_out_metrics(suite: Suite, registry: Registry) -> list[str]:
    """One line per installed metric that a suite naming no metrics leaves out of some cells, with why
    and, when it is left out of some cells only, of which."""
    reasons: dict[tuple[str, str], list[str]] = {}
    pairs = [(m, d) for m in suite.configs for d in m.part_of(suite)[0]]
    for method, dataset in pairs:
        spec = registry.get(method.kind, method.name).spec
        for metric, reason in default_metrics(registry, spec, registry.dataset(dataset))[1].items():
            reasons.setdefault((metric, reason), []).append(f"{method.display} on {dataset}")
    lines = []
    not_default = sorted(metric for (metric, reason) in reasons if reason == NOT_DEFAULT)
    if not_default:
        lines.append(f"metrics not run by default: {', '.join(not_default)} (name them with --metrics)")
    for (metric, reason), where in sorted(reasons.items()):
        if reason == NOT_DEFAULT:
            continue
        scope = "" if len(where) == len(pairs) else f" ({', '.join(where)})"
        lines.append(f"metric {metric} left out{scope}: {reason}")
    return lines


def outputs_current(store: RunStore, stamp: dict[str, Any]) -> bool:
    """Whether the run directory's leaderboard and report were built from what `stamp` describes."""
    return (all(p.exists() for p in store.outputs()) and store.outputs_stamp.exists()
            and json.loads(store.outputs_stamp.read_text()) == stamp)


def likely_finished(store: RunStore, manifest: dict[str, Any] | None, suite: Suite) -> bool:
    """Before the plugins load, whether resuming the run directory has nothing left to run: the same
    suite (`manifest`, its run.json as read) and as many results as the grid has cells. Only saves the
    start of worker processes; the run itself decides."""
    if manifest is None or not suite.same_grid(manifest["suite"]):
        return False
    results = sum(1 for _ in store.cells.glob("*/" + store.result_path("").name))
    return results - len(store.scored()) >= suite.size  # scored rows (`dpgym score`) are no cell of the suite


def cmd_run(args: argparse.Namespace, run: Run, console: Console) -> None:
    from dpgym.engine.runner import run_grid

    summary = run_grid(run, retry_failed=args.retry_failed, show_progress=not args.no_progress)
    console.print(
        f"{summary.total} cells: {summary.ok} ran ok, {summary.skipped} already done, "
        f"{summary.failed} failed, {summary.unavailable} unavailable"
    )
    for message in summary.messages or []:
        console.print(f"  [yellow]{message}[/yellow]", markup=True, highlight=False)
    stamp = run.outputs_stamp()
    if summary.skipped == summary.total and outputs_current(run.store, stamp):
        console.print(f"nothing new since the last run: {run.store.leaderboard_path('md')} and "
                      f"{run.store.report_path} are current", markup=False, soft_wrap=True)
        return
    write_outputs(run, console)


def write_outputs(run: Run, console: Console) -> None:
    """The run's leaderboard files (printed in short) and report, and the stamp saying what they were built from."""
    from dpgym.report import write_report

    show_leaderboard(run, console)
    console.print(f"report: {write_report(run)}")
    write_json_atomic(run.store.outputs_stamp, run.outputs_stamp())


def cmd_score(args: argparse.Namespace, registry: Registry, console: Console) -> None:
    """Score synthetic rows made elsewhere into a run directory (`dpgym.engine.scoring`), then rebuild its
    leaderboard and report, where they sit beside the run's generators."""
    from dpgym.engine.scoring import score_rows

    store = RunStore(args.out)
    if not store.manifest_path.is_file():
        raise InputError(f"--out {args.out}: not a run directory (no run.json); score rows into a directory a suite "
                         f"has run into (dpgym run ... --out {args.out}), to compare them with its generators")
    epsilon = parse_epsilon(args.epsilon, "--epsilon") if args.epsilon is not None else None
    record = score_rows(store, registry, args.dataset, args.synthetic, args.label, epsilon, args.seed,
                        _listed(args, "metrics"))
    console.print(f"scored {args.synthetic} as {args.label!r} on {args.dataset} (guarantee {record.method.guarantee}): "
                  f"{len(record.metrics or {})} metric values", markup=False, soft_wrap=True)
    write_outputs(Run.open(store, registry), console)


def cmd_plan(args: argparse.Namespace, run: Run, console: Console) -> None:
    """What `run` would do, without a lock, a manifest or a cell: the grid expanded and checked, and
    per generator and dataset the cells to run and those already done in the run directory."""
    suite, store, registry, stored = run.suite, run.store, run.registry, run.stored()
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for cell in run.cells:
        finished = stored[cell.key]
        row = counts.setdefault((cell.method.display, cell.dataset), {"to run": 0, "done": 0, "done, failed": 0})
        row["to run" if runs_again(finished, args.retry_failed) else "done" if finished.ok
            else "done, failed"] += 1
    table = Table("generator", "dataset", "to run", "done", "done, failed", title=f"{suite.name} into {store.root}")
    for (label, dataset), row in counts.items():
        table.add_row(label, dataset, *(str(n) for n in row.values()))
    console.print(table)
    total = {k: sum(row[k] for row in counts.values()) for k in ("to run", "done", "done, failed")}
    again = " (--retry-failed runs them again)" if total["done, failed"] and not args.retry_failed else ""
    console.print(f"{sum(total.values())} cells: {total['to run']} to run, {total['done']} done, "
                  f"{total['done, failed']} done but failed or unavailable{again}; nothing was run")
    for dataset in suite.datasets:
        missing = registry.dataset(dataset).missing()
        if missing:
            console.print(f"  dataset {dataset!r} is unavailable here: {missing}", markup=False, soft_wrap=True)


def cmd_audit(args: argparse.Namespace, registry: Registry, console: Console, err: Console) -> None:
    """Audit each generator × dataset × ε (docs/privacy.md#empirical-audits): a table of ε lower bounds
    beside the claims, each audit's fits and scores under DIR/audits/<key>/, and DIR/audits.json, the
    index of every audit in DIR."""
    from dpgym.audit.canary import GUESS_COUNTS
    from dpgym.audit.game import AuditOptions, run_audits

    if args.canaries and (args.white_box or args.worst_case):
        raise SuiteError("--white-box and --worst-case set up the distinguishing game; the one-run audit "
                         "(--canaries) takes neither")
    if args.canaries:
        if args.canaries < 2 * min(GUESS_COUNTS):
            raise SuiteError(f"--canaries must be ≥ {2 * min(GUESS_COUNTS)} (the fewest guesses a rule makes, twice), "
                             f"got {args.canaries}")
        args.fits = 1
    fewest_rows = 0 if args.white_box and not args.canaries else 1
    if args.fits < (1 if args.canaries else 4) or args.audit_rows < 1 or (
            args.synthetic_rows is not None and args.synthetic_rows < fewest_rows):
        raise SuiteError(f"--fits must be ≥ 4, --audit-rows ≥ 1 and --synthetic-rows ≥ {fewest_rows} "
                         f"(0: with --white-box, the release alone is attacked), got {args.fits}, {args.audit_rows} and {args.synthetic_rows}")
    if args.workers is not None and args.workers < 1:
        raise SuiteError(f"--workers must be ≥ 1, got {args.workers}")
    epsilons = _listed(args, "epsilons", _epsilons)
    if any(e == float("inf") for e in epsilons):
        raise SuiteError("--epsilons: an audit tests a finite claim; ε = inf claims nothing")
    suite = apply_overrides(Suite(name="audit", generators=tuple(MethodConfig(g) for g in _listed(args, "generators")),
                                  datasets=_listed(args, "datasets", _dataset_names), epsilons=epsilons, seeds=(0,),
                                  delta=args.delta, metrics=()), args.set)
    cells = expand(suite, registry)
    check_builds(cells, registry)
    for note in check_datasets(suite, registry):
        err.print(f"dpgym: warning: {note}", markup=False, soft_wrap=True)
    check_out(args.out)
    options = AuditOptions(fits=args.fits, audit_rows=args.audit_rows, seed=args.seed, synthetic_rows=args.synthetic_rows,
                           canaries=args.canaries, columns=tuple(_audited_columns(args, cells, registry)),
                           white_box=args.white_box, worst_case=args.worst_case)
    _check_game_settings(options, cells, registry)

    def progress(state: Any, _: int) -> None:
        err.print(f"{state.cell.title.rsplit(' × seed', 1)[0]}: {len(state.done() & set(range(args.fits)))}/"
                  f"{args.fits} fits", markup=False, highlight=False)

    summaries = run_audits(cells, options, args.out, registry, args.workers,
                           parse_timeout(args.timeout, "--timeout") if args.timeout else None,
                           parse_memory(args.max_memory, "--max-memory") if args.max_memory else None, progress)
    mode = "one-run canaries" if args.canaries else options.mode
    table = Table("generator", "dataset", "ε claimed", "canaries" if args.canaries else "fits", "ε lower bound (95%) [point]",
                  "attack", "verdict",
                  title=f"empirical audit into {args.out} ({mode})")
    for s in summaries:
        bound = (escape(f"{s['epsilon_lower']:.3f} [{s['epsilon_point']:.3f}]") if s["status"] == "ok" else "—")
        table.add_row(s["generator"], s["dataset"], f"{s['epsilon_claimed']:g}",
                      str(args.canaries if args.canaries else s["fits_done"]), bound,
                      s.get("attack", ""), s["verdict"])
    console.print(table)
    estimates = [s for s in summaries if s["status"] == "ok" and (s.get("gdp") or {}).get("mu") is not None]
    for s in estimates:
        console.print(f"  {s['generator']} × {s['dataset']} × ε={s['epsilon_claimed']:g}: GDP estimate "
                      f"{_gdp_estimate(s['gdp'])}", markup=False, soft_wrap=True)
    if estimates:
        console.print("  The verdict rests on the ε lower bound alone. A GDP estimate assumes a Gaussian trade-off curve: "
                      "it is no bound, and overstates ε for mechanisms far from Gaussian.", markup=False, soft_wrap=True)
    one_run = [s for s in summaries if s["status"] == "ok" and s.get("mode") == "one_run"]
    for s in one_run:
        console.print(f"  {s['generator']} × {s['dataset']} × ε={s['epsilon_claimed']:g}: ε bound by {s['bound']}; "
                      f"{_mu_bound(s)}", markup=False, soft_wrap=True)
    if one_run:
        console.print("  The verdict rests on the ε lower bound alone (Steinke et al.'s or the f-DP one, whichever is "
                      "larger). The μ bound rejects μ-GDP only: the ε beside it holds if the trade-off curve is Gaussian, "
                      "which DP-SGD's is not exactly.", markup=False, soft_wrap=True)
    for s in summaries:
        if s["status"] != "ok":
            console.print(f"  {s['generator']} × {s['dataset']} × ε={s['epsilon_claimed']:g}: {s['error']}",
                          markup=False, soft_wrap=True)
    console.print(f"audits: {RunStore(args.out).audits_index}", markup=False, soft_wrap=True)


def _gdp_estimate(gdp: dict[str, Any]) -> str:
    """The GDP estimate in a line: μ̂ with its interval, and the ε it implies at the cell's δ."""
    (low, high), (eps_low, eps_high) = gdp["mu_interval"], gdp["epsilon_interval"]
    return f"μ̂ = {gdp['mu']:.3f} [{low:.3f}, {high:.3f}] → ε̂ = {gdp['epsilon']:.2f} [{eps_low:.2f}, {eps_high:.2f}]"


def _mu_bound(summary: dict[str, Any]) -> str:
    """A one-run audit's f-DP bound on μ in a line, with the ε a Gaussian trade-off curve would spend there."""
    return (f"not μ-GDP for μ ≤ {summary['mu_lower']:.3f} ({summary['mu_attack']}), "
            f"→ ε = {summary['mu_lower_epsilon']:.2f} at δ if Gaussian")


def _check_game_settings(options: Any, cells: list[Any], registry: Registry) -> None:
    """Up front, before any fit: --white-box needs generators that expose their release, and --worst-case
    enough training rows that share no cell with the target."""
    from dpgym.audit.game import audited_data, worst_case_pool

    if options.white_box:
        blind = sorted({c.method.name for c in cells
                        if Capability.RELEASE not in registry.get("generator", c.method.name).spec.capabilities})
        if blind:
            raise SuiteError(f"--white-box: generator {', '.join(map(repr, blind))} does not expose its release "
                             "(Capability.RELEASE); audit it without --white-box")
    if options.worst_case:
        for name in sorted({c.dataset for c in cells}):
            schema, train = audited_data(registry.dataset(name), options)
            try:
                worst_case_pool(train, schema, options.audit_rows, name)
            except ValueError as err:
                raise SuiteError(str(err)) from None


def _audited_columns(args: argparse.Namespace, cells: list[Any], registry: Registry) -> list[str]:
    """--columns, each checked against every audited dataset's schema."""
    if not args.columns:
        return []
    columns = [c.strip() for c in args.columns.split(",") if c.strip()]
    for name in sorted({c.dataset for c in cells}):
        missing = sorted(set(columns) - set(registry.dataset(name).schema().names))
        if missing:
            raise SuiteError(f"--columns: dataset {name!r} has no column {', '.join(map(repr, missing))}")
    return columns


def cmd_compare(args: argparse.Namespace, registry: Registry, console: Console) -> None:
    """Each reference's published figures against the run's cells (those of the suite last run into it):
    a table per reference, and RUN_DIR/compare-NAME.md and .json."""
    from dpgym.results.compare import check_claims, compare, run_cells, status_counts, terminal_tables, write_comparison

    # references named on the command line are each validated before the run is read
    references = [load_reference(name) for name in _csv(args.reference)] if args.reference is not None else None
    run = Run.open(RunStore(args.run_dir), registry)
    if references is None:
        references = [load_reference(name) for name in run.suite.references]
    if not references:
        raise ReferenceError(f"name the references to compare with: --reference NAME[,NAME] (known: "
                             f"{', '.join(known_references())}), or list them in the suite's 'references'")
    directions = metric_directions(registry)
    cells = run_cells(run.results(), directions)
    for reference in references:
        rows, claims = compare(reference, cells, directions), check_claims(reference, cells, directions)
        for table in terminal_tables(reference, rows, claims):
            console.print(table)
        markdown, data = write_comparison(run.store, reference, rows, claims)
        console.print(f"{reference.name}: {status_counts(rows, claims)}; {markdown} (and {data.name})", markup=False,
                      soft_wrap=True)


def cmd_check(args: argparse.Namespace, registry: Registry, console: Console) -> int:
    """0: no regression; 1: a metric or privacy regression (listed); errors raise (exit 2)."""
    from dpgym.results.check import compare, load_baseline, stale_results, summarise, write_baseline

    if not 0 < args.alpha < 1:
        raise SuiteError(f"--alpha must lie in (0, 1), got {args.alpha}")
    run = Run.open(RunStore(args.run_dir), registry)
    if args.update:
        write_baseline(run.store, run.results(), args.baseline, run.suite.name, run.keys)
        console.print(f"baseline {args.baseline} rewritten from {args.run_dir}: review the diff before committing")
        return 0
    if not args.baseline.exists():
        raise SuiteError(f"no baseline file {args.baseline} (create it with --update)")
    findings = compare(load_baseline(args.baseline), summarise(run.store, run.results()), metric_directions(registry),
                       args.alpha)
    for f in sorted(findings, key=lambda f: (not f.fails, f.kind, f.group)):
        change = f": {f.baseline} → {f.now}" if f.baseline or f.now else ""
        tolerance = f" (tolerance {f.tolerance})" if f.tolerance else ""
        console.print(f"{f.kind.upper():11} {f.group[0]} × {f.group[1]} × ε={f.group[2]}  {f.what}{change}{tolerance}",
                      markup=False, soft_wrap=True)
    failed = [f for f in findings if f.fails]
    console.print(f"{len(failed)} regressions ({sum(f.kind == 'privacy' for f in failed)} privacy), "
                  f"{sum(f.kind == 'improvement' for f in findings)} improvements")
    for suite, generators in stale_results(findings).items():
        console.print(f"STALE       leaderboard/results/{suite}/ holds {', '.join(generators)}, which moved: "
                      f"regenerate it in this change (make results RESULTS={suite})", markup=False, soft_wrap=True)
    return 1 if failed else 0


def cmd_schema_infer(args: argparse.Namespace, console: Console) -> None:
    """Draft a schema from the file's rows; the draft is marked unreviewed and says what to fix."""
    name = args.file.name.split(".")[0]
    text = draft_toml(infer_schema(read_table(args.file), name), str(args.file))
    if args.out is None:
        sys.stdout.write(text)
        return
    if args.out.exists():
        raise SchemaError(f"{args.out} exists; remove it or choose another --out (a reviewed schema is never overwritten)")
    args.out.write_text(text)
    console.print(f"draft schema written to {args.out}: derived from the data, so review it and set reviewed = true")


def prepare_run(args: argparse.Namespace) -> Run:
    """`dpgym run`'s suite, run directory and execution plan, each read or resolved once; a processes
    run starts its worker server before the plugins are discovered, unless nothing is left to run."""
    suite = suite_from_args(args)
    check_out(args.out)
    store = RunStore(args.out)
    manifest = stored_manifest(store)
    plan = Plan.resolve(settings_from_args(args).over(suite.settings))
    if not args.dry_run and not likely_finished(store, manifest, suite):
        from dpgym.engine.executors import start_early
        from dpgym.engine.worker import ALL_METRICS

        metrics = list(suite.metrics) if suite.metrics is not None else [ALL_METRICS]
        start_early(plan, list(suite.datasets), [method.name for method in suite.configs] + metrics)
    return Run.prepare(suite, store, Registry.discover(), manifest, plan)


def execute(args: argparse.Namespace) -> int:
    """Run the parsed command; the exit code."""
    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    try:
        run: Run | None = None
        if args.command == "run":
            run = prepare_run(args)
        else:
            registry = Registry.discover()
        if args.command == "list":
            cmd_list(registry, console)
        elif run is not None:
            check_run(run, err, args.retry_failed, build=not args.dry_run)
            (cmd_plan if args.dry_run else cmd_run)(args, run, console)
        elif args.command == "leaderboard":
            show_leaderboard(Run.open(RunStore(args.run_dir), registry), console)
        elif args.command == "report":
            from dpgym.report import write_report

            console.print(f"report: {write_report(Run.open(RunStore(args.run_dir), registry), args.out)}")
        elif args.command == "score":
            cmd_score(args, registry, console)
        elif args.command == "schema":
            cmd_schema_infer(args, console)
        elif args.command == "audit":
            cmd_audit(args, registry, console, err)
        elif args.command == "compare":
            cmd_compare(args, registry, console)
        elif args.command == "check":
            return cmd_check(args, registry, console)
        elif args.command == "new-plugin":
            target = new_plugin(args.name, args.dir, taken=registry.names_in_use())
            console.print(f"plugin package written to {target}: see its README.md, then `pip install -e {target}`",
                          markup=False, soft_wrap=True)
    except KeyboardInterrupt:
        kept = "stored fits" if args.command == "audit" else "finished cells"
        err.print(f"dpgym: interrupted; {kept} are kept, and the same command resumes the run", markup=False)
        return 130
    except USER_ERRORS as error:
        err.print(f"dpgym: error: {error}", markup=False, soft_wrap=True)
        return 2
    except (StoreError, OSError, ValueError) as error:
        err.print(f"dpgym: error: {error}", markup=False, soft_wrap=True)
        return 2 if args.command == "check" else 1
    return 0
