"""The HTML report: one self-contained file showing the leaderboard, figures, ledgers, failures, provenance."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from dpgym.registry import Registry
from dpgym.report.datasets import _matrix_from_pairs, class_f1_table
from dpgym.results.records import CellRecord
from dpgym.results.store import RunStore
from dpgym.engine.runner import run_suite
from dpgym.engine.suite import MethodConfig, Suite
from tests.harness.report.fakerun import leaderboard_of, report_of, result, write_run


class Inventory(HTMLParser):
    """Counts what the page holds: tables, images and every external reference."""

    def __init__(self) -> None:
        super().__init__()
        self.tables, self.images, self.external = 0, [], []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attrs = dict(attrs)
        if tag == "table":
            self.tables += 1
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        for key in ("src", "href"):
            value = attrs.get(key) or ""
            if value and not value.startswith(("data:", "#")):
                self.external.append(value)


def inventory(html: str) -> Inventory:
    parser = Inventory()
    parser.feed(html)
    return parser


@pytest.mark.slow
def test_the_report_is_one_file_with_every_image_embedded(smoke_report):
    page = inventory(smoke_report.read_text())
    assert page.external == []
    assert page.images and all(src.startswith("data:image/png;base64,") for src in page.images)
    assert "<link" not in smoke_report.read_text()


def test_the_report_has_every_section(smoke_report, smoke_run):
    html = smoke_report.read_text()
    for anchor in ("leaderboard", "ranking", "data-adult", "privacy", "failures", "provenance"):
        assert f'id="{anchor}"' in html
    manifest = json.loads((smoke_run / "run.json").read_text())
    checksum = json.loads(next((smoke_run / "cells").glob("*/result.json")).read_text())["dataset"]["checksum"]
    assert checksum in html  # dataset provenance
    assert (manifest["git_revision"] or "unknown") in html
    assert "Friedman χ²(3)" in html and "critical-difference diagram" in html


def test_each_generator_with_data_gets_marginals_and_kendall_heatmaps(smoke_report):
    html = smoke_report.read_text()
    for generator in ("uniform", "independent", "real"):
        assert f'alt="marginal histograms of {generator} on adult"' in html
        assert f'alt="Kendall tau heatmaps of {generator} on adult"' in html
    # Curves (one per metric family), the CD diagram, and two figures per generator that produced data.
    assert len(inventory(html).images) == 2 + 1 + 3 * 2


def test_a_failed_cell_shows_its_error_and_is_charged_in_the_table(smoke_report, smoke_run):
    html = smoke_report.read_text()
    assert "No synthetic data: every cell failed. fit: RuntimeError: model diverged" in html
    assert html.count("failed at fit: RuntimeError: model diverged") == 2  # both seeds, with tracebacks
    board = pd.read_csv(smoke_run / "leaderboard.csv").set_index("generator")
    assert board.loc["crasher", "failures"] == 2
    assert board.loc["crasher", "target_rate_gap_mean"] == board.loc["uniform", "target_rate_gap_mean"]


def test_the_ledger_lists_mechanisms_with_claimed_and_reaccounted_epsilon(smoke_report):
    html = smoke_report.read_text()
    ledger = html[html.index('id="privacy"'):html.index('id="failures"')]
    assert "<b>gaussian</b>" in ledger and "l2_sensitivity=" in ledger and "sigma=" in ledger
    assert re.search(r"<td>ε=1, δ=1e-05</td><td>ε=1</td>", ledger)  # Gaussian releases re-account exactly
    assert "no mechanism (reads no rows)" in ledger  # uniform
    assert "no ledger" in ledger  # the crasher failed before returning one


@pytest.mark.slow
def test_the_report_command_writes_the_file(tmp_path):
    run = tmp_path / "run"
    suite = Suite("one-cell", (MethodConfig("uniform"),), ("adult",), (1.0,), (0,), 1e-5, metrics=())
    run_suite(suite, RunStore(run), Registry.discover(), show_progress=False)
    out = tmp_path / "elsewhere.html"
    done = subprocess.run([sys.executable, "-m", "dpgym.cli", "report", str(run), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert out.exists() and f"report: {out}" in done.stdout.replace("\n", "")
    assert "uniform" in out.read_text()


@pytest.mark.slow
def test_a_cell_whose_synthetic_rows_are_gone_costs_its_figures_not_the_report(tmp_path):
    run = tmp_path / "run"
    suite = Suite("one-cell", (MethodConfig("uniform"),), ("adult",), (1.0,), (0,), 1e-5, metrics=())
    run_suite(suite, RunStore(run), Registry.discover(), show_progress=False)
    (next((run / "cells").iterdir()) / "synthetic.parquet").unlink()
    done = subprocess.run([sys.executable, "-m", "dpgym.cli", "report", str(run)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "No figures: this cell&#39;s synthetic rows are unreadable (FileNotFoundError" in (run / "report.html").read_text()


@pytest.mark.slow
def test_a_dataset_whose_rows_break_its_schema_costs_its_figures_not_the_report(tmp_path):
    schema = 'name = "{}"\nreviewed = true\n[[columns]]\nname = "x"\nkind = "integer"\nmin = 0\nmax = 10\n'
    for name, rows in (("bad", "x\n1\n500\n"), ("good", "x\n" + "".join(f"{i % 10}\n" for i in range(50)))):
        (tmp_path / f"{name}.csv").write_text(rows)
        (tmp_path / f"{name}.schema.toml").write_text(schema.format(name))
    suite = Suite("csv", (MethodConfig("uniform"),), (f"csv:{tmp_path / 'bad.csv'}", f"csv:{tmp_path / 'good.csv'}"),
                  (1.0,), (0,), 1e-5, metrics=("fidelity",))
    run_suite(suite, RunStore(tmp_path / "run"), Registry.discover(), show_progress=False)
    done = subprocess.run([sys.executable, "-m", "dpgym.cli", "report", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "run" / "report.html").read_text()
    assert "Real rows unavailable, so no marginal or Kendall-τ figures: SchemaError" in html
    assert html.count("<img") > 0  # the good dataset's figures are drawn


def test_the_marginal_figures_data_is_written_beside_the_report(smoke_report, smoke_run):
    html = smoke_report.read_text()
    shares = pd.read_csv(smoke_run / "report-marginals.csv")
    assert "report-marginals.csv beside this file" in html
    assert set(shares.generator) == {"uniform", "independent", "real"}  # the crasher has no data
    assert (shares.dataset == "adult").all() and (shares.epsilon == 1.0).all() and (shares.seed == 0).all()
    totals = shares.groupby(["generator", "column"])[["real", "synthetic"]].sum()
    assert ((totals - 1.0).abs() < 1e-9).all().all()  # every column's bins and "missing" hold all rows
    real = shares[shares.generator == "real"]
    assert (real.real - real.synthetic).abs().max() < 0.05  # the `real` reference resamples the train rows


def test_a_multiclass_target_gets_the_f1_of_each_class(tmp_path):
    """The per-class table averages each class's F1 over the finished seeds, per generator and ε;
    a failed cell adds nothing, and a binary target gets no table."""
    def cell(generator, seed, f1, dataset="kdd", status="ok"):
        out = result(generator, seed, {"tstr_macro_f1": float(np.mean(list(f1.values())))}, dataset=dataset,
                     status=status)
        out["metric_detail"] = {"utility": {"f1_per_class": f1}}
        return out

    lost = {"normal": 0.98, "dos": 0.96, "probe": 0.0}
    run = write_run(tmp_path / "run", [
        cell("flow", 0, lost), cell("flow", 1, {**lost, "dos": 0.94}), cell("flow", 2, lost, status="failed"),
        cell("real", 0, {"normal": 1.0, "dos": 1.0, "probe": 0.9}),
        cell("flow", 0, {"no": 0.8, "yes": 0.5}, dataset="binary")])
    results = RunStore(run).results()
    table = class_f1_table([r for r in results if r.cell.dataset == "kdd"])
    assert table["classes"] == ["normal", "dos", "probe"]
    flow, real = table["rows"]
    assert (flow["generator"], flow["epsilon"], flow["seeds"]) == ("flow", "1", 2)
    assert flow["values"] == pytest.approx([0.98, 0.95, 0.0])
    assert real["values"] == pytest.approx([1.0, 1.0, 0.9])
    assert class_f1_table([r for r in results if r.cell.dataset == "binary"]) is None


def test_classes_named_like_the_cells_identity_keep_their_own_column():
    cell = CellRecord.from_dict(result("flow", 0, {}))
    cell.metric_detail = {"utility": {"f1_per_class": {"generator": 0.1, "epsilon": 0.2, "turbine": 0.3}}}
    table = class_f1_table([cell])
    assert table["classes"] == ["generator", "epsilon", "turbine"]
    assert table["rows"] == [{"epsilon": "1", "generator": "flow", "seeds": 1, "values": [0.1, 0.2, 0.3]}]


def test_kendall_pairs_of_columns_with_a_bar_in_their_name_land_on_those_columns():
    """Pair keys are "a|b"; splitting at the first bar once made up columns "x" and "y|label"."""
    names = ["x|y", "label", "c"]
    matrix = _matrix_from_pairs({"x|y|label": 0.53, "x|y|c": 0.2, "label|c": -0.1}, names)
    assert list(matrix.index) == list(matrix.columns) == names
    assert (matrix.loc["x|y", "label"], matrix.loc["c", "x|y"], matrix.loc["label", "c"]) == (0.53, 0.2, -0.1)


def test_kendall_pairs_that_share_a_key_are_recomputed_not_misplaced():
    """Columns x, y|label, x|y, label: (x, y|label) and (x|y, label) are both "x|y|label", so the
    metric's dict kept one τ for two pairs, which the first split naming two columns put on the
    wrong one; such pairs are now refused and the report recomputes τ from the rows."""
    names = ["x", "y|label", "x|y", "label"]
    keys = [f"{a}|{b}" for a, b in combinations(names, 2)]
    assert _matrix_from_pairs(dict(zip(keys, range(len(keys)))), names) is None


def test_an_infinite_seed_value_keeps_its_interval_note(tmp_path):
    """The bootstrap's lower bound is −∞ here; the note said "fewer than two seeds" though three agreed."""
    from dpgym.report.build import overview_tables
    from dpgym.specs import Direction

    rows = [result("a", s, {"loglik": v}) for s, v in enumerate([-np.inf, 1.0, 1.0])]
    lb = leaderboard_of(write_run(tmp_path, rows), {"loglik": Direction.HIGHER})
    (table,) = overview_tables(lb, {})
    note = table["rows"][0]["cells"][6].note  # generator, guarantee, ε, ε spent, seeds, failures, then the metric
    assert note.startswith("[−∞, ") and "no CI" not in note


def test_notices_name_under_spent_rows_and_cells_lowered_to_nominal(tmp_path):
    from dpgym.report.build import notices

    rows = [result("tight", s, {"auroc": 0.8}, spent=0.99) for s in (0, 1)]
    rows += [result("wasteful", s, {"auroc": 0.7}, spent=0.45) for s in (0, 1)]
    for r in rows[2:]:
        r["privacy"]["composition"] = "rdp"
    for r in rows[:2]:
        r["generator"].update(guarantee="nominal",
                              guarantee_reason="formal by its ledger, but schema 'people' was drafted from the private rows")
    run = write_run(tmp_path, rows)
    said = notices(leaderboard_of(run, {}), RunStore(run).results())
    assert said[0].startswith("1 row(s) spent less than 90% of their ε")
    assert "wasteful on adult at ε = 1 (noise calibrated with rdp, claims 1.000, spends 0.450)" in said[0]
    assert said[1] == ("Nominal, not formal: tight on adult. Formal by its ledger, but schema 'people' was drafted "
                       "from the private rows.")


@pytest.mark.slow
def test_a_rebuilt_report_reuses_the_figures_of_cells_that_did_not_change(tmp_path, monkeypatch):
    """Figures are drawn once per cell and per curve content: a second build draws nothing, loads no
    real rows and shows the same images; a cell run again is drawn again."""
    from dpgym.report import datasets, figures

    run = tmp_path / "run"
    suite = Suite("two", (MethodConfig("uniform"), MethodConfig("independent")), ("adult",), (1.0,), (0,), 1e-5,
                  metrics=("fidelity",))
    registry = Registry.discover()
    run_suite(suite, RunStore(run), registry, show_progress=False)
    images = lambda: re.findall(r'src="(data:image/png[^"]+)"', (run / "report.html").read_text())  # noqa: E731
    report_of(run, registry)
    first = images()

    def refuse(*args, **kwargs):
        raise AssertionError("drew or loaded again")

    with monkeypatch.context() as patch:
        for name in ("marginals", "kendall_heatmaps", "metric_curves"):
            patch.setattr(figures, name, refuse)
        patch.setattr(datasets, "RealRows", refuse)
        report_of(run, registry)
    assert images()[1:] == first[1:]  # all but the ranking's diagram, which is not drawn from cells
    rerun = next(p for p in (run / "cells").iterdir()
                 if json.loads((p / "result.json").read_text())["method"]["name"] == "uniform")
    record = json.loads((rerun / "result.json").read_text())
    record["timings"]["fit_seconds"] += 1.0  # as when the cell is run again: its record is new
    (rerun / "result.json").write_text(json.dumps(record))
    for result in (run / "cells").glob("*/result.json"):
        result.touch()  # a newer file alone is no change: figures follow content, not times
    drawn = []
    monkeypatch.setattr(figures, "marginals", lambda *a, **k: drawn.append(a) or "data:image/png;base64,")
    report_of(run, registry)
    assert len(drawn) == 1


def test_the_legend_says_in_each_metric_plugins_words_what_it_measures(smoke_report, report_registry):
    html = smoke_report.read_text()
    for name in ("target_gap", "mean_gap"):
        description = report_registry.kinds["metric"][name].spec.description
        assert description and f"<code>{name}</code>: {description}" in html


def test_a_suite_naming_references_gets_each_comparison_in_the_report_linked_from_the_top(
        smoke_run, report_registry, tmp_path):
    import shutil


    run = shutil.copytree(smoke_run, tmp_path / "run")
    paper = tmp_path / "test-paper.toml"
    paper.write_text('paper = "test-paper"\ntitle = "A paper: Table 9"\n\n[figures]\n"Table 9" = "the gap"\n\n'
                     + "".join(f'[[entries]]\nfigure = "Table 9"\ndataset = "adult"\ngenerator = "{g}"\n'
                               f'metric = "target_rate_gap"\nepsilon = 1.0\nvalue = 0.5\nsource = "table"\n\n'
                               for g in ("independent", "dp_hflow"))
                     + '[[claims]]\nfigure = "Table 9"\ndataset = "adult"\nmetric = "target_rate_gap"\nepsilon = 1.0\n'
                       'kind = "below"\ngenerators = ["real"]\nothers = ["uniform"]\nstatement = "far below"\n'
                       'source = "text"\n')
    manifest = json.loads((run / "run.json").read_text())
    manifest["suite"]["references"] = [str(paper)]
    (run / "run.json").write_text(json.dumps(manifest))

    html = report_of(run, report_registry).read_text()
    assert '<a href="#paper-test-paper">Against test-paper</a>' in html.split("</nav>", 1)[0]
    section = html.split('<h2 id="paper-test-paper">', 1)[1].split("<h2 ", 1)[0]
    assert "A paper: Table 9" in section and "compare-test-paper.md" in section
    rows = re.findall(r'<tr class="status-([a-z-]+)">(.*?)</tr>', section)
    assert [status for status, _ in rows[:2]] == ["better", "not-run"]  # independent's gap is far below 0.5
    assert "(n = 2)" in rows[0][1] and "the run has no cells of dp_hflow on adult" in rows[1][1]
    assert "0 reproduced, 1 better, 0 worse, 1 not run; claims: 1 reproduced, 0 not reproduced, 0 not run" in section
    assert [status for status, _ in rows[2:]] == ["reproduced"] and "real below uniform" in rows[2][1]
    assert "Claims the paper states in words" in section


def test_the_ranking_shows_each_generators_rank_per_dataset_when_a_run_spans_several(tmp_path):
    from dpgym.report import figures
    from dpgym.report.build import ranking_context
    from dpgym.specs import Direction

    directions = {"auroc": Direction.HIGHER}
    rows = [result(g, s, {"auroc": v + 0.01 * s}, dataset=d)
            for d in ("adult", "wage") for s in (0, 1) for g, v in (("a", 0.9), ("b", 0.7), ("c", 0.5))]
    rows += [result("deep", s, {"auroc": 0.8}, dataset="adult", epsilon=1.0) for s in (0, 1)]
    lb = leaderboard_of(write_run(tmp_path / "two", rows), directions)
    context = ranking_context(lb, figures.generator_palette(sorted(lb.board.generator.unique())))
    assert context["by_dataset"].startswith("data:image/png;base64,")
    one = leaderboard_of(write_run(tmp_path / "one", [r for r in rows if r["cell"]["dataset"] == "adult"]), directions)
    assert ranking_context(one, {g: (0, 0, 0) for g in "abc"} | {"deep": (0, 0, 0)})["by_dataset"] is None
