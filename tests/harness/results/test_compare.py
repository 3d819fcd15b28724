"""`dpgym compare`: reference files are validated, name what the paper suites run, and a run's cells
get the status the rules in docs/references.md give them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from dpgym.cli import main
from dpgym.registry import Registry
from dpgym.results.compare import (
    BETTER,
    NOT_REPRODUCED,
    NOT_RUN,
    REPRODUCED,
    WORSE,
    check_claims,
    compare,
    run_cells,
    write_comparison,
)
from dpgym.results.leaderboard import metric_info
from dpgym.results.references import REFERENCES_DIR, ReferenceError, load_reference
from dpgym.results.store import RunStore
from dpgym.engine.suite import SUITES_DIR, MethodConfig, Suite, SuiteError, load_suite, suite_from_dict
from dpgym.specs import Direction
from tests.harness.report.fakerun import leaderboard_of, result, write_run

DIRECTIONS = {"tstr_macro_f1": Direction.HIGHER, "tstr_auroc": Direction.HIGHER, "kendall_rmse": Direction.LOWER}

HEADER = '''paper = "test-paper"
title = "A paper"

[figures]
"Table 2" = "macro-F1"
'''


def entry(**fields: object) -> str:
    base = {"figure": "Table 2", "dataset": "adult", "generator": "dp_hflow", "metric": "tstr_macro_f1",
            "epsilon": 1.0, "value": 0.56, "source": "table"}
    base.update(fields)
    return "[[entries]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in base.items() if v is not None)


def claim(**fields: object) -> str:
    base = {"figure": "Table 2", "dataset": "adult", "metric": "tstr_macro_f1", "epsilon": 1.0, "kind": "below",
            "generators": ["dp_cgan"], "others": ["dp_hflow", "dp_merf"], "statement": "far below", "source": "text"}
    base.update(fields)
    return "[[claims]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in base.items() if v is not None)


def within(**fields: object) -> str:
    return claim(**{"kind": "within", "generators": ["dp_hflow", "dp_merf"], "others": None, "tolerance": 0.1,
                    "tolerance_source": "a test's choice", **fields})


def reference_file(tmp_path: Path, *entries: str) -> Path:
    path = tmp_path / "test-paper.toml"
    path.write_text(HEADER + "\n".join(entries))
    return path


# --- the shipped files ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.discover()


def suite_methods() -> dict[str, str]:
    """Label → plugin name of every generator and learner configured in the paper suites."""
    return {config.display: config.name for path in sorted(SUITES_DIR.glob("paper-*.toml"))
            for config in load_suite(str(path)).configs}


@pytest.mark.parametrize("path", sorted(REFERENCES_DIR.glob("*.toml")), ids=lambda p: p.stem)
def test_every_shipped_reference_loads_and_names_what_the_paper_suites_run(path, registry):
    reference = load_reference(str(path))
    methods, directions = suite_methods(), metric_info(registry)[0]
    named = [(e, (e.generator,), (e.dataset, *e.replicates, *e.variants)) for e in reference.entries]
    named += [(c, (*c.generators, *c.others), (c.dataset,)) for c in reference.claims]
    for item, generators, datasets in named:
        for generator in generators:
            assert generator in methods, \
                f"{item.label}: no paper suite has a generator or learner labelled {generator!r}"
            kinds = [kind for kind in ("generator", "learner") if methods[generator].partition(":")[0]
                     in registry.kinds[kind]]
            assert kinds, f"{item.label}: {methods[generator]!r} is not a registered generator or learner"
        for dataset in datasets:
            registry.get("dataset", dataset)  # raises for an unknown name or variant
        assert item.metric in directions, f"{item.label}: {item.metric!r} is not a value of any installed metric"


def test_the_shipped_references_are_those_the_seed_papers_give():
    assert sorted(p.stem for p in REFERENCES_DIR.glob("*.toml")) == ["dp-auto-gan", "dp-hflow", "dp-nf", "expm-nf"]


# --- validation -------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    (entry(valeu=0.5), "unknown keys ['valeu']"),
    (entry(value=None), "missing ['value']"),
    (entry(figure="Fig. 9"), "figure 'Fig. 9' is not described under [figures]"),
    (entry(source="figure, read by eye"), "needs its reading's 'precision'"),
    (entry(spread=0.1), "a 'spread' needs a 'spread_kind'"),
    (entry(band=[0.6, 0.5]), "'band' must be [low, high]"),
    (entry(value="high"), "'value' must be a number"),
])
def test_a_malformed_entry_is_refused_naming_the_file_and_the_entry(tmp_path, text, message):
    path = reference_file(tmp_path, entry(), text)
    with pytest.raises(ReferenceError) as err:
        load_reference(str(path))
    assert str(path) in str(err.value) and "entries[1]" in str(err.value) and message in str(err.value)


@pytest.mark.parametrize(("text", "message"), [
    (claim(kind="above"), "kind must be one of 'below', 'within'"),
    (claim(others=None), "a 'below' claim needs 'generators' and 'others', disjoint"),
    (claim(others=["dp_cgan"]), "a 'below' claim needs 'generators' and 'others', disjoint"),
    (claim(tolerance=0.1), "and no 'tolerance'"),
    (within(tolerance_source=None), "a positive 'tolerance' and its 'tolerance_source'"),
    (within(generators=["dp_hflow"]), "two or more 'generators'"),
    (claim(statement=None), "missing ['statement']"),
    (claim(generators="dp_cgan"), "'generators' must be a list of generator labels"),
])
def test_a_malformed_claim_is_refused_naming_the_file_and_the_claim(tmp_path, text, message):
    path = reference_file(tmp_path, entry(), text)
    with pytest.raises(ReferenceError) as err:
        load_reference(str(path))
    assert str(path) in str(err.value) and "claims[0]" in str(err.value) and message in str(err.value)


def test_an_unknown_reference_name_lists_the_known_ones():
    with pytest.raises(ReferenceError, match="known references: dp-auto-gan, dp-hflow, dp-nf, expm-nf"):
        load_reference("dp-hflwo")


def test_a_malformed_reference_exits_2_with_one_line_through_the_cli(tmp_path, capsys):
    run = write_run(tmp_path / "run", [result("dp_hflow", 0, {"tstr_macro_f1": 0.5})])
    path = reference_file(tmp_path, entry(generatr="dp_hflow"))
    assert main(["compare", str(run), "--reference", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpgym: error: ") and "entries[0]" in err and "unknown keys ['generatr']" in err


def test_a_suite_may_name_its_references_and_compare_uses_them_by_default(tmp_path, capsys):
    suite = Suite("s", (MethodConfig("uniform"),), ("adult",), (1.0,), (0,), references=("dp-hflow",))
    assert suite_from_dict(suite.to_dict(), "here").references == ("dp-hflow",)
    with pytest.raises(SuiteError, match="'references' must be a list of names"):
        suite_from_dict({**suite.to_dict(), "references": "dp-hflow"}, "here")
    run = write_run(tmp_path / "run", [], suite={**suite.to_dict(), "references": []})
    assert main(["compare", str(run)]) == 2
    assert "name the references to compare with: --reference" in capsys.readouterr().err


# --- statuses ---------------------------------------------------------------------------------

def seeds(generator: str, values: list[float], **fields: object) -> list[dict]:
    return [result(generator, seed, {"tstr_macro_f1": v}, **fields) for seed, v in enumerate(values)]


@pytest.fixture
def run(tmp_path) -> Path:
    return write_run(tmp_path / "run", [
        *seeds("dp_hflow", [0.54, 0.55, 0.56, 0.57, 0.58]),           # interval holds 0.56
        *seeds("dp_merf", [0.60, 0.61, 0.62, 0.63, 0.64]),            # above 0.37
        *seeds("dp_cgan", [0.20, 0.21, 0.22, 0.23, 0.24]),            # below 0.46
        *seeds("real", [0.70, 0.71], epsilon=1.0), *seeds("real", [0.78, 0.80], epsilon=math.inf),
        *seeds("dp_nf", [0.50], dataset="lifesci"), *seeds("dp_nf", [0.52], dataset="lifesci:fold=2"),
    ])


def statuses(tmp_path: Path, run: Path, *entries: str) -> list:
    reference = load_reference(str(reference_file(tmp_path, *entries)))
    return compare(reference, run_cells(RunStore(run).results(), DIRECTIONS), DIRECTIONS)


def test_statuses_follow_the_interval_and_the_metric_direction(tmp_path, run):
    rows = statuses(tmp_path, run, entry(), entry(generator="dp_merf", value=0.37), entry(generator="dp_cgan", value=0.46))
    assert [r.status for r in rows] == [REPRODUCED, BETTER, WORSE]
    assert rows[1].difference == pytest.approx(0.62 - 0.37) and rows[1].n_replicates == 5


def test_a_lower_is_better_metric_turns_the_direction(tmp_path):
    run = write_run(tmp_path / "run", [result("dp_hflow", s, {"kendall_rmse": 0.10 + s / 100}) for s in range(3)])
    rows = statuses(tmp_path, run, entry(metric="kendall_rmse", value=0.2), entry(metric="kendall_rmse", value=0.05))
    assert [r.status for r in rows] == [BETTER, WORSE]


def test_a_band_the_paper_states_or_a_reading_precision_counts_as_reproduced(tmp_path, run):
    rows = statuses(tmp_path, run, entry(generator="dp_merf", value=0.55, band=[0.55, 1.0]),
                    entry(generator="dp_merf", value=0.55, source="figure, read by eye", precision=0.06),
                    entry(generator="dp_merf", value=0.55, source="figure, read by eye", precision=0.01))
    assert [r.status for r in rows] == [REPRODUCED, REPRODUCED, BETTER]


def test_what_the_run_does_not_cover_is_not_run_with_the_reason(tmp_path, run):
    rows = statuses(tmp_path, run, entry(generator="dp_vae"), entry(epsilon=4.0), entry(metric="tstr_auroc"),
                    entry(delta=1e-6))
    assert [r.status for r in rows] == [NOT_RUN] * 4
    assert "no cells of dp_vae on adult" in rows[0].reason
    assert "at ε = 1 only" in rows[1].reason
    assert "did not compute tstr_auroc" in rows[2].reason
    assert "at δ = 1e-06" in rows[3].reason


def test_a_non_private_entry_is_compared_at_the_runs_largest_epsilon(tmp_path, run):
    [row] = statuses(tmp_path, run, entry(generator="real", epsilon=None, value=0.79))
    assert row.epsilon == math.inf and row.mean == pytest.approx(0.79) and row.status == REPRODUCED


def test_replicates_are_pooled_and_variants_compared_one_by_one(tmp_path, run):
    [pooled] = statuses(tmp_path, run, entry(generator="dp_nf", dataset="lifesci", replicates=["lifesci:fold=2"],
                                             value=0.51))
    assert pooled.n_replicates == 2 and pooled.mean == pytest.approx(0.51) and pooled.status == REPRODUCED
    rows = statuses(tmp_path, run, entry(generator="dp_nf", dataset="lifesci", variants=["lifesci:fold=2"], value=0.5))
    assert [(r.datasets, r.n_replicates, r.status) for r in rows] == [
        (("lifesci",), 1, REPRODUCED), (("lifesci:fold=2",), 1, BETTER)]


def test_ours_is_the_leaderboards_mean_and_interval(tmp_path, run):
    [row] = statuses(tmp_path, run, entry())
    board = leaderboard_of(run, DIRECTIONS).board
    mine = board[(board.generator == "dp_hflow") & (board.dataset == "adult")].iloc[0]
    assert (row.mean, row.ci_low, row.ci_high) == (mine.tstr_macro_f1_mean, mine.tstr_macro_f1_ci_low,
                                                   mine.tstr_macro_f1_ci_high)


def test_the_comparison_is_written_as_markdown_and_json(tmp_path, run):
    reference = load_reference(str(reference_file(tmp_path, entry(), entry(generator="dp_vae"))))
    rows = compare(reference, run_cells(RunStore(run).results(), DIRECTIONS), DIRECTIONS)
    markdown, data = write_comparison(RunStore(run), reference, rows)
    assert markdown.name == "compare-test-paper.md" and "| Table 2 | dp_hflow | adult | 1 |" in markdown.read_text()
    written = json.loads(data.read_text())
    assert [r["status"] for r in written["rows"]] == [REPRODUCED, NOT_RUN] and written["rows"][1]["mean"] is None
    assert written["rows"][0]["n_replicates"] == 5 and written["rows"][0]["epsilon"] == 1.0


# --- claims -----------------------------------------------------------------------------------

def claim_checks(tmp_path: Path, run: Path, *claims: str) -> list:
    reference = load_reference(str(reference_file(tmp_path, *claims)))
    return check_claims(reference, run_cells(RunStore(run).results(), DIRECTIONS), DIRECTIONS)


def test_a_below_claim_needs_each_interval_wholly_under_the_others(tmp_path, run):
    held, crossed = claim_checks(tmp_path, run, claim(), claim(generators=["dp_hflow"], others=["dp_merf", "dp_cgan"]))
    assert held.status == REPRODUCED and "smallest gap in means 0.34, dp_cgan to dp_hflow" in held.reason
    assert [e.generator for e in held.estimates] == ["dp_cgan", "dp_hflow", "dp_merf"]
    assert held.estimates[1].mean == pytest.approx(0.56) and held.estimates[1].n_replicates == 5
    assert crossed.status == NOT_REPRODUCED and crossed.reason.startswith("dp_hflow 0.560 [0.548, 0.572]")
    assert "is not under dp_cgan 0.220" in crossed.reason and "dp_merf" not in crossed.reason


def test_overlapping_intervals_do_not_reproduce_an_ordering_even_when_the_means_are_ordered(tmp_path):
    run = write_run(tmp_path / "run", [*seeds("flat", [0.40, 0.50, 0.60]), *seeds("fine", [0.45, 0.55, 0.65])])
    [check] = claim_checks(tmp_path, run, claim(generators=["flat"], others=["fine"]))
    assert check.status == NOT_REPRODUCED and check.estimates[0].mean < check.estimates[1].mean


def test_a_within_claim_compares_the_span_of_the_means_with_its_tolerance(tmp_path, run):
    close, far = claim_checks(tmp_path, run, within(), within(generators=["dp_hflow", "dp_merf", "dp_cgan"]))
    assert close.status == REPRODUCED and close.reason.startswith("means span 0.06 (dp_hflow to dp_merf)")
    assert "tolerance 0.1 (a test's choice)" in close.reason
    assert far.status == NOT_REPRODUCED and "means span 0.4 (dp_cgan to dp_merf)" in far.reason


def test_a_claim_on_a_generator_the_run_lacks_is_not_run_with_the_reason(tmp_path, run):
    missing, elsewhere = claim_checks(tmp_path, run, claim(others=["dp_hflow", "dp_vae"]), within(epsilon=4.0))
    assert missing.status == NOT_RUN and missing.reason == "the run has no tstr_macro_f1 of dp_vae on adult at ε = 1"
    assert elsewhere.status == NOT_RUN and "of dp_hflow on adult at ε = 4" in elsewhere.reason


def test_claims_are_written_beside_the_entries_and_counted_apart(tmp_path, run):
    reference = load_reference(str(reference_file(tmp_path, entry(), claim(), within(tolerance=0.01))))
    cells = run_cells(RunStore(run).results(), DIRECTIONS)
    markdown, data = write_comparison(RunStore(run), reference, compare(reference, cells, DIRECTIONS),
                                      check_claims(reference, cells, DIRECTIONS))
    text = markdown.read_text()
    assert "1 reproduced, 0 better, 0 worse, 0 not run; claims: 1 reproduced, 1 not reproduced, 0 not run" in text
    assert "## Claims the paper states in words" in text
    assert "| Table 2 | dp_cgan below dp_hflow, dp_merf | adult | 1 | tstr_macro_f1 | far below |" in text
    written = json.loads(data.read_text())["claims"]
    assert [c["status"] for c in written] == [REPRODUCED, NOT_REPRODUCED]
    assert written[0]["estimates"][0]["generator"] == "dp_cgan" and written[1]["tolerance"] == 0.01



# --- entries relative to another row -----------------------------------------------------------

RELATIVE = 'relative_to = {generator = "real", metric = "tstr_macro_f1"}\n'


def test_a_relative_entry_judges_our_ratio_to_our_own_baseline_row(tmp_path, run):
    # dp_merf 0.62 over real 0.705 at ε = 1 is 0.879 [0.860, 0.900]: "above 87 %" holds, "above 92 %"
    # does not, whatever the paper's own baseline value was.
    above_87 = entry(generator="dp_merf", value=0.87) + "band = [0.87, inf]\n" + RELATIVE
    above_92 = entry(generator="dp_merf", value=0.92) + "band = [0.92, inf]\n" + RELATIVE
    rows = statuses(tmp_path, run, above_87, above_92)
    assert [r.status for r in rows] == [REPRODUCED, WORSE]
    assert rows[0].mean == pytest.approx(0.62 / 0.705)
    assert rows[0].ci_low < rows[0].mean < rows[0].ci_high
    # the interval resamples both rows' seeds: wider than dp_merf's own interval divided by real's mean
    own = leaderboard_of(run, DIRECTIONS).board.set_index(["generator", "epsilon"]).loc[("dp_merf", 1.0)]
    assert rows[0].ci_high - rows[0].ci_low > (own.tstr_macro_f1_ci_high - own.tstr_macro_f1_ci_low) / 0.705 * 0.99


def test_a_relative_entry_whose_baseline_row_did_not_run_is_not_run(tmp_path, run):
    missing = entry(generator="dp_merf", value=0.9) + 'relative_to = {generator = "dp_vae"}\n'
    [row] = statuses(tmp_path, run, missing)
    assert row.status == NOT_RUN and "no dp_vae tstr_macro_f1 on adult to divide by" in row.reason


def test_a_relative_entry_shows_the_ratio_it_states(tmp_path, run):
    reference = load_reference(str(reference_file(tmp_path, entry(generator="dp_merf", value=0.87) + RELATIVE)))
    rows = compare(reference, run_cells(RunStore(run).results(), DIRECTIONS), DIRECTIONS)
    markdown, _ = write_comparison(RunStore(run), reference, rows)
    assert "0.870 × real tstr_macro_f1" in markdown.read_text()


@pytest.mark.parametrize(("text", "message"), [
    (entry() + 'relative_to = "real"\n', "'relative_to' must be {generator"),
    (entry() + 'relative_to = {generator = "dp_hflow"}\n', "names the entry's own generator"),
    (entry(replicates=["lifesci:fold=2"]) + 'relative_to = {generator = "real"}\n', "no 'replicates'"),
])
def test_a_malformed_relative_entry_is_refused(tmp_path, text, message):
    with pytest.raises(ReferenceError, match=message.replace("(", r"\(").replace("{", r"\{")):
        load_reference(str(reference_file(tmp_path, text)))
