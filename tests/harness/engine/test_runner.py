"""The runner: cell keys, determinism, resume, and failures that stay inside their cell."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from dpgym.registry import Registry
from tests.harness.report.fakerun import write_leaderboard
from dpgym.results.store import RunStore, StoreError
from dpgym.engine.grid import check_builds, expand, seed_streams
from dpgym.engine.suite import MethodConfig, Settings, Suite, SuiteError, apply_overrides, load_suite
from dpgym.specs import SpecError
from tests.fake_plugins import FAULTY, UNWRITABLE
from tests.plugins.datasets.test_user_csv_dataset import SCHEMA, people


def grid(*generators: str, seeds=(0, 1), epsilons=(1.0,)) -> Suite:
    return Suite("test", tuple(MethodConfig(g) for g in generators), ("adult",), epsilons, seeds, 1e-5, metrics=())


@pytest.fixture(scope="module")
def registry() -> Registry:
    # Through DPGYM_PLUGINS, not objects: cells run in worker processes, which discover plugins anew.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DPGYM_PLUGINS", FAULTY)
        return Registry.discover()


def run(suite: Suite, out, registry: Registry, **kwargs):
    from dpgym.engine.runner import run_suite

    return run_suite(suite, RunStore(out), registry, show_progress=False, **kwargs)


def test_cell_keys_are_stable_and_distinct(registry):
    cells = expand(grid("uniform", "independent"), registry)
    again = expand(grid("uniform", "independent"), registry)
    assert [c.key for c in cells] == [c.key for c in again]
    assert len({c.key for c in cells}) == 4
    changed = expand(apply_overrides(grid("independent"), ["independent.numeric_bins=8"]), registry)
    assert not {c.key for c in changed} & {c.key for c in cells}


def test_seed_streams_are_separate_and_shared_across_generators():
    streams = seed_streams(0, "adult")
    assert len(set(streams.values())) == 3
    assert streams == seed_streams(0, "adult") and streams != seed_streams(1, "adult")


@pytest.mark.slow
def test_same_suite_twice_gives_identical_synthetic_data(registry, tmp_path):
    suite = grid("independent", "uniform")
    run(suite, tmp_path / "a", registry)
    run(suite, tmp_path / "b", registry)
    for cell in expand(suite, registry):
        a = pd.read_parquet(tmp_path / "a" / "cells" / cell.key / "synthetic.parquet")
        b = pd.read_parquet(tmp_path / "b" / "cells" / cell.key / "synthetic.parquet")
        pd.testing.assert_frame_equal(a, b)
    seeds = [pd.read_parquet(tmp_path / "a" / "cells" / c.key / "synthetic.parquet") for c in expand(suite, registry)[:2]]
    assert not seeds[0].equals(seeds[1])  # different seeds, different draws


@pytest.mark.slow
def test_resume_redoes_only_missing_cells(registry, tmp_path):
    suite = grid("independent", "uniform", "real")
    first = run(suite, tmp_path, registry)
    assert first.ok == 6
    board_before, _ = write_leaderboard(tmp_path, {})
    victims = sorted((tmp_path / "cells").iterdir())[:2]
    for victim in victims:
        shutil.rmtree(victim)
    (tmp_path / "cells" / ".tmp-deadbeef-123").mkdir()  # what a kill mid-write leaves behind
    second = run(suite, tmp_path, registry)
    assert (second.skipped, second.ok) == (4, 2)
    board_after, _ = write_leaderboard(tmp_path, {})
    timing = [c for c in board_before.columns if "seconds" in c or "rss" in c]
    pd.testing.assert_frame_equal(board_before.drop(columns=timing), board_after.drop(columns=timing))


def test_an_unreadable_cell_result_is_named_and_its_cell_run_again(registry, tmp_path):
    suite = grid("uniform")
    run(suite, tmp_path, registry)
    broken = sorted((tmp_path / "cells").iterdir())[0] / "result.json"
    broken.write_text(broken.read_text()[:200])  # cut short, as by a full disk
    with pytest.warns(UserWarning, match=rf"{broken} is unreadable \(JSONDecodeError"):
        assert len(RunStore(tmp_path).results()) == 1
        again = run(suite, tmp_path, registry)
    assert (again.skipped, again.ok) == (1, 1)
    assert len(RunStore(tmp_path).results()) == 2


def test_a_renamed_label_relabels_the_finished_cells_on_resume(registry, tmp_path):
    run(replace(grid("uniform"), generators=(MethodConfig("uniform", label="old"),)), tmp_path, registry)
    again = run(replace(grid("uniform"), generators=(MethodConfig("uniform", label="new"),)), tmp_path, registry)
    assert again.skipped == 2
    board, _ = write_leaderboard(tmp_path, {})
    assert list(board.generator) == ["new"]


def test_running_another_grid_into_a_run_directory_says_what_leaves_the_leaderboard(registry, tmp_path):
    run(grid("uniform"), tmp_path, registry)
    again = run(grid("uniform", seeds=(0,)), tmp_path, registry)
    assert again.skipped == 1
    assert any(m.startswith(f"1 finished cell(s) in {tmp_path} are not part of this suite") for m in again.messages)
    assert len(RunStore(tmp_path).results()) == 2  # kept on disk
    back = run(grid("uniform"), tmp_path, registry)
    assert back.skipped == 2 and not any("not part of this suite" in m for m in back.messages)


def test_two_labels_for_the_same_configuration_are_refused(registry):
    """independent's default mechanism is gaussian: both entries would write the same cells."""
    suite = replace(grid("independent"), generators=(
        MethodConfig("independent", label="plain"), MethodConfig("independent", {"mechanism": "gaussian"}, "gauss")))
    with pytest.raises(SpecError, match=r"'plain' and 'gauss' configure the same cell"):
        expand(suite, registry)


def test_a_hyper_parameter_of_the_wrong_type_is_refused(registry):
    """`--set independent.given_target=False` is not TOML (false is), so it arrives as the truthy string "False"."""
    suite = apply_overrides(grid("independent"), ["independent.given_target=False"])
    with pytest.raises(SpecError, match=r"wrong type: given_target='False' \(the default is (True|False)\)"):
        expand(suite, registry)


def test_a_crashing_plugin_fails_its_cell_and_the_run_goes_on(registry, tmp_path):
    summary = run(grid("crasher", "uniform", seeds=(0,)), tmp_path, registry)
    assert (summary.ok, summary.failed) == (1, 1)
    results = {r.cell.method: r for r in RunStore(tmp_path).results()}
    error = results["crasher"].error
    assert error.stage == "fit" and "model diverged" in error.message and "Traceback" in error.traceback
    again = run(grid("crasher", "uniform", seeds=(0,)), tmp_path, registry)
    assert again.skipped == 2  # failed cells are finished unless retried
    assert any("1 of the cells already done had failed" in m and "--retry-failed" in m for m in again.messages)
    retried = run(grid("crasher", "uniform", seeds=(0,)), tmp_path, registry, retry_failed=True)
    assert (retried.skipped, retried.failed) == (1, 1)


def test_overspending_generator_is_refused_and_not_ranked(registry, tmp_path):
    run(grid("overspender", "uniform", seeds=(0,)), tmp_path, registry)
    result = next(r for r in RunStore(tmp_path).results() if r.cell.method == "overspender")
    assert result.status == "failed" and result.error.stage == "privacy"
    assert "underclaimed" in result.error.message
    ledger = json.loads((tmp_path / "cells" / result.cell.key / "ledger.json").read_text())
    assert ledger["reaccounted"]["epsilon"] == pytest.approx(2.0)
    board, _ = write_leaderboard(tmp_path, {})
    row = board.set_index("generator").loc["overspender"]
    assert row.n_seeds == 0 and row.failures == 1


@pytest.mark.parametrize(("name", "fault"), [
    ("row_copier", "its ledger records no mechanism, so it claims ε = 0"),
    ("gaussian_but_pure", "labelled pure, but its ledger records ['gaussian']"),
])
def test_a_ledger_that_contradicts_its_label_fails_the_cell_at_privacy(registry, tmp_path, name, fault):
    run(grid(name, "uniform", seeds=(0,)), tmp_path, registry)
    results = {r.cell.method: r for r in RunStore(tmp_path).results()}
    assert results["uniform"].status == "ok"
    assert results[name].status == "failed" and results[name].error.stage == "privacy"
    assert fault in results[name].error.message


def test_a_serial_run_says_it_applies_no_limits(registry, tmp_path):
    summary = run(grid("uniform", seeds=(0,)), tmp_path, registry, settings=Settings(executor="serial", timeout=60.0))
    assert any("serial executor applies no timeout or memory limit" in m for m in summary.messages)


def test_a_plugin_changing_directory_in_a_serial_run_misdirects_no_later_cell(registry, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    summary = run(grid("wanderer", "uniform", seeds=(0,)), "run", registry, settings=Settings(executor="serial"))
    assert summary.ok == 2 and Path.cwd() == tmp_path
    assert sorted(r.cell.method for r in RunStore(tmp_path / "run").results()) == ["uniform", "wanderer"]


def test_a_run_store_stays_where_it_was_opened_when_the_directory_changes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = RunStore(Path("run"))
    monkeypatch.chdir(tmp_path.parent)
    assert store.root == tmp_path / "run"


def test_a_plugin_calling_sys_exit_fails_its_cell_and_a_serial_run_goes_on(registry, tmp_path):
    summary = run(grid("quitter", "uniform", seeds=(0,)), tmp_path, registry, settings=Settings(executor="serial"))
    assert (summary.ok, summary.failed) == (1, 1)
    result = next(r for r in RunStore(tmp_path).results() if r.cell.method == "quitter")
    assert result.error.stage == "fit" and result.error.type == "SystemExit"


def test_a_negative_ledger_parameter_cannot_cancel_another_entrys_spend(registry, tmp_path):
    """The Laplace entry spends ε = 10; the exponential one's β = −5 would make the pure sum 0. The
    event refuses it as it is recorded, so the cell fails in the plugin's own fit."""
    run(grid("canceller", seeds=(0,)), tmp_path, registry)
    (result,) = RunStore(tmp_path).results()
    assert result.status == "failed" and result.error.stage == "fit"
    assert result.error.type == "EventError"
    assert "exponential event: inverse_temperature is -5.0; it must be finite and ≥ 0" in result.error.message


@pytest.mark.parametrize("executor", ["serial", "processes"])
def test_a_malformed_ledger_fails_its_cell_and_the_run_goes_on(registry, tmp_path, executor):
    summary = run(grid("scale_forgetter", "uniform", seeds=(0,)), tmp_path, registry, settings=Settings(executor=executor))
    assert (summary.ok, summary.failed) == (1, 1)
    result = next(r for r in RunStore(tmp_path).results() if r.cell.method == "scale_forgetter")
    assert result.error.stage == "fit" and "argument: 'scale'" in result.error.message


def test_a_sample_of_the_wrong_size_fails_the_cell_naming_the_generator(registry, tmp_path):
    run(grid("short_sampler", seeds=(0,)), tmp_path, registry)
    (result,) = RunStore(tmp_path).results()
    assert result.status == "failed" and result.error.stage == "validate"
    assert "generator 'short_sampler'" in result.error.message and "returned 3256 rows" in result.error.message


def test_a_generator_raising_dataset_unavailable_fails_its_cell_at_fit(registry, tmp_path):
    """Only a dataset's load may mark a cell unavailable, which the leaderboard does not count as a failure."""
    summary = run(grid("missing_weights", seeds=(0,)), tmp_path, registry)
    (result,) = RunStore(tmp_path).results()
    assert (summary.failed, summary.unavailable) == (1, 0)
    assert result.error.stage == "fit" and "pretrained weights not found" in result.error.message


def test_a_dataset_without_training_rows_fails_its_cells_at_load(registry, tmp_path):
    """Every generator would fail on no rows, each with its own arithmetic error (ZeroDivisionError)."""
    people().assign(part="test").to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "people.schema.toml").write_text(SCHEMA)
    dataset = f"csv:{tmp_path / 'people.csv'},split_column=part"
    suite = Suite("test", (MethodConfig("independent"),), (dataset,), (1.0,), (0,), 1e-5, metrics=())
    run(suite, tmp_path / "run", registry)
    (result,) = RunStore(tmp_path / "run").results()
    assert result.status == "failed" and result.error.stage == "load"
    assert "the training split has no rows" in result.error.message


def test_invalid_hyper_parameter_values_are_a_user_error_naming_the_generator(registry):
    suite = Suite("test", (MethodConfig("independent", {"numeric_bins": 0}),), ("adult",), (1.0,), (0,), 1e-5)
    with pytest.raises(SpecError, match=r"generator 'independent': invalid hyper-parameters \{'numeric_bins': 0\}: "
                                        r"ValueError: numeric_bins must be ≥ 1"):
        check_builds(expand(suite, registry), registry)


def test_a_device_the_harness_cannot_resolve_is_a_user_error_not_auto(registry):
    """"gpu" used to fall through to CPU here and to CUDA on a GPU machine, i.e. behave as "auto"."""
    suite = Suite("test", (MethodConfig("dp_merf", {"device": "gpu"}),), ("adult",), (1.0,), (0,), 1e-5)
    with pytest.raises(SpecError, match=r"generator 'dp_merf': device must be one of auto, cpu, cuda, got 'gpu'"):
        expand(suite, registry)


def test_synthetic_rows_outside_the_schema_fail_the_cell_naming_the_generator(registry, tmp_path):
    run(grid("unknown_category", seeds=(0,)), tmp_path, registry)
    (result,) = RunStore(tmp_path).results()
    assert result.error.stage == "validate"
    assert "unknown_category" in result.error.message and "'Astronaut'" in result.error.message


def test_plugin_output_json_cannot_hold_fails_its_own_cell_naming_the_plugin(tmp_path):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DPGYM_PLUGINS", f"{FAULTY},{UNWRITABLE}")
        registry = Registry.discover()
    ledger_run = run(grid("tuple_keyed_ledger", "uniform", seeds=(0,)), tmp_path / "ledger", registry)
    detail_run = run(replace(grid("uniform", seeds=(0,)), metrics=("tuple_keyed_detail",)), tmp_path / "detail", registry)
    assert (ledger_run.ok, ledger_run.failed, detail_run.failed) == (1, 1, 1)
    for out, what in ((tmp_path / "ledger", "the ledger of generator 'tuple_keyed_ledger'"),
                      (tmp_path / "detail", "the detail of metric 'tuple_keyed_detail'")):
        failed = next(r for r in RunStore(out).results() if r.status == "failed")
        assert failed.error.stage == "record"
        assert failed.error.message.startswith(f"{what} cannot be written as JSON: keys must be")
        assert [p.name for p in (out / "cells" / failed.cell.key).iterdir()] == ["result.json"]


def test_a_cell_the_run_directory_cannot_store_fails_alone_and_leaves_nothing_behind(registry, tmp_path, monkeypatch):
    def unwritable(frame, path, **kwargs):
        raise ValueError("parquet cannot hold this column")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", unwritable)  # the serial executor runs cells in this process
    summary = run(grid("uniform", "independent", seeds=(0,)), tmp_path, registry, settings=Settings(executor="serial"))
    assert (summary.ok, summary.failed) == (0, 2)
    for result in RunStore(tmp_path).results():
        assert (result.error.stage, result.error.type, result.error.message) == (
            "record", "ValueError", "parquet cannot hold this column")
    assert not list((tmp_path / "cells").glob(".*"))  # no half-written folder left
    assert sorted(p.name for p in (tmp_path / "cells").rglob("*") if p.is_file()) == ["result.json", "result.json"]


def test_ledger_and_result_files_are_written_per_cell(registry, tmp_path):
    run(grid("independent", seeds=(0,)), tmp_path, registry)
    (cell_dir,) = (tmp_path / "cells").iterdir()
    ledger = json.loads((cell_dir / "ledger.json").read_text())
    assert ledger["entries"][0]["event"]["type"] == "gaussian" and ledger["reaccounted"]["verdict"] == "ok"
    result = json.loads((cell_dir / "result.json").read_text())
    assert result["status"] == "ok" and result["peak_rss_mb"] > 0 and "fit_seconds" in result["timings"]
    assert json.loads((tmp_path / "run.json").read_text())["packages"]["dpgym"] == "0.1.0"


def test_a_locked_run_directory_is_refused(registry, tmp_path):
    store = RunStore(tmp_path)
    with store.locked(), pytest.raises(StoreError, match="another dpgym run"):
        run(grid("uniform", seeds=(0,)), tmp_path, registry)


def test_suite_files_reject_unknown_keys(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('name = "s"\ndatasets = ["adult"]\nepsilon = [1]\n')
    with pytest.raises(SuiteError, match=r"unknown keys \['epsilon'\]"):
        load_suite(str(path))


@pytest.mark.parametrize(("toml", "fault"), [
    ('seeds = [0, -1]', r"'seeds' must be a count or a list of integers ≥ 0"),
    ('seeds = [0, 0]', r"'seeds' lists \[0\] more than once"),
    ('epsilons = [1, 1.0]', r"'epsilons' lists \[1.0\] more than once"),
    ('epsilons = [true]', r"True is not an epsilon"),
    ('datasets = "adult"', r"'datasets' must be a list of names, got 'adult'"),
    ('metrics = "fidelity"', r"'metrics' must be a list of names"),
    ('metrics = []', r"'metrics' is empty; list the metrics to run, or leave it out"),
    ('delta = "small"', r"'delta' must be a number, got 'small'"),
    ('settings = "fast"', r"'settings' must be a table"),
    ('[[generators]]\nname = 5', r"generators\[1\] needs a 'name' \(a string\)"),
    ('[[generators]]\nname = "uniform"\nparams = "x"', r"'params' must be a table"),
])
def test_suite_values_of_the_wrong_type_are_refused_naming_the_key(tmp_path, toml, fault):
    path = tmp_path / "s.toml"
    base = {"datasets": 'datasets = ["adult"]', "epsilons": "epsilons = [1]", "seeds": "seeds = 1"}
    kept = [line for key, line in base.items() if not toml.startswith(key)]
    path.write_text("\n".join(['name = "s"', *kept, *([] if toml.startswith("[[") else [toml]),
                               '[[generators]]\nname = "uniform"', *([toml] if toml.startswith("[[") else [])]) + "\n")
    with pytest.raises(SuiteError, match=fault):
        load_suite(str(path))


def test_smoke_suite_file_parses():
    suite = load_suite("smoke")
    assert [g.name for g in suite.generators][:3] == ["uniform", "independent", "real"]
    assert suite.seeds == (0, 1) and suite.epsilons == (1.0,)


def test_target_metrics_are_skipped_on_datasets_without_a_target(registry, tmp_path):
    suite = Suite("toy", (MethodConfig("uniform"),), ("half_moons",), (1.0,), (0,), 1e-5,
                  metrics=("fidelity", "utility"))
    run(suite, tmp_path, registry)
    (result,) = RunStore(tmp_path).results()
    assert result.status == "ok" and "marginal_tvd" in result.metrics
    assert "no target column" in result.metric_detail["utility"]["skipped"]


@pytest.mark.slow
def test_metric_options_enter_the_cell_key_and_reach_the_metric(registry, tmp_path):
    zoo = {"utility": {"classifiers": ["logistic_regression", "xgboost"]}}
    plain = replace(grid("independent", seeds=(0,)), metrics=("utility",))
    cheap = replace(plain, metric_options=zoo)
    assert expand(plain, registry)[0].key != expand(cheap, registry)[0].key
    assert expand(cheap, registry)[0].key == expand(replace(plain, metric_options=zoo), registry)[0].key
    run(cheap, tmp_path, registry)
    (result,) = RunStore(tmp_path).results()
    assert sorted(result.metric_detail["utility"]["per_classifier"]) == ["logistic_regression", "xgboost"]


def test_unknown_metric_options_are_refused_naming_the_metric(registry, tmp_path):
    base = replace(grid("independent", seeds=(0,)), metrics=("utility",))
    with pytest.raises(SpecError, match="metric 'utility': unknown options \\['trees'\\]"):
        expand(replace(base, metric_options={"utility": {"trees": 3}}), registry)
    with pytest.raises(SpecError, match="unknown classifiers \\['svm'\\]"):
        expand(replace(base, metric_options={"utility": {"classifiers": ["svm"]}}), registry)
    path = tmp_path / "s.toml"
    path.write_text('datasets = ["adult"]\nepsilons = [1]\nmetrics = ["fidelity"]\n'
                    '[[generators]]\nname = "uniform"\n[metric_options.utility]\nclassifiers = ["lda"]\n')
    with pytest.raises(SuiteError, match="metric_options for \\['utility'\\]"):
        load_suite(str(path))


@pytest.mark.parametrize("path", sorted((Path(__file__).parents[3] / "leaderboard" / "suites").glob("*.toml")),
                         ids=lambda p: p.stem)
def test_every_shipped_suite_loads_and_expands(path):
    """A typo in a suite file (a bad TOML line, an unknown parameter) fails here, not hours into a run."""
    suite = load_suite(str(path))
    assert expand(suite, Registry.discover())


PART_OF_GRID = """
name = "part"
datasets = ["adult", "census"]
epsilons = [0.5, 1.0, 4.0]
seeds = 2
metrics = ["fidelity"]

[[generators]]
name = "uniform"

[[generators]]
name = "independent"
datasets = ["census"]
epsilons = [1.0, "inf"]
seeds = [1]
"""


def test_a_generator_restricted_to_part_of_the_grid_gets_only_those_cells(registry, tmp_path):
    path = tmp_path / "part.toml"
    path.write_text(PART_OF_GRID.replace('"inf"', "4.0"))
    suite = load_suite(str(path))
    cells = expand(suite, registry)
    restricted = [(c.dataset, c.epsilon, c.seed) for c in cells if c.method.name == "independent"]
    assert restricted == [("census", 1.0, 1), ("census", 4.0, 1)]
    assert sum(c.method.name == "uniform" for c in cells) == 2 * 3 * 2
    assert suite.size == len(cells) == 14
    # The restriction is not part of a cell's key: the same cell, asked for by a whole grid, is reused.
    whole = Suite("whole", (MethodConfig("independent"),), ("census",), (1.0,), (1,), 1e-5, metrics=("fidelity",))
    assert {c.key for c in cells if c.method.name == "independent" and c.epsilon == 1.0} == \
        {c.key for c in expand(whole, registry)}


def test_a_restriction_outside_the_suites_grid_is_refused_naming_the_generator(tmp_path):
    path = tmp_path / "part.toml"
    path.write_text(PART_OF_GRID)  # ε = inf is not among the suite's epsilons
    with pytest.raises(SuiteError, match=r"generator 'independent' lists epsilons \[inf\].*suite's epsilons"):
        load_suite(str(path))
    path.write_text(PART_OF_GRID.replace('epsilons = [1.0, "inf"]', "epsilons = []"))
    with pytest.raises(SuiteError, match="must be a non-empty part"):
        load_suite(str(path))


def test_narrowing_a_suite_cuts_each_restriction_and_survives_the_manifest(registry, tmp_path):
    from dpgym.engine.suite import suite_from_dict

    path = tmp_path / "part.toml"
    path.write_text(PART_OF_GRID.replace('"inf"', "4.0"))
    suite = load_suite(str(path))
    narrowed = suite.narrowed(epsilons=(0.5, 1.0))
    assert [g.name for g in narrowed.generators] == ["uniform", "independent"]
    assert narrowed.generators[1].epsilons == (1.0,)
    # Read back as a resumed run reads its run.json: the same grid, the restriction within it.
    again = suite_from_dict(narrowed.to_dict(), "run.json")
    assert again.same_grid(narrowed.to_dict()) and again.size == narrowed.size == 2 * 2 * 2 + 1
    # A generator left with no cell leaves the grid rather than holding an empty part of it.
    assert [g.name for g in suite.narrowed(epsilons=(0.5,)).generators] == ["uniform"]


def test_in_jupyter_the_progress_is_one_output_updated_in_place(registry, tmp_path, monkeypatch):
    import sys
    import types

    from dpgym.engine.runner import run_suite

    shown: list[str] = []

    class Handle:
        def update(self, data, raw):
            shown.append(data["text/plain"])

    display = types.ModuleType("IPython.display")
    display.display = lambda *args, **kwargs: Handle()
    monkeypatch.setitem(sys.modules, "IPython", types.ModuleType("IPython"))
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    monkeypatch.setattr("rich.console._is_jupyter", lambda: True)
    run_suite(grid("uniform", "independent", seeds=(0,)), RunStore(tmp_path / "out"), registry,
              settings=Settings(executor="serial"))
    assert len(shown) == 2 and shown[-1].startswith("[2/2] ok: ") and shown[-1].endswith("ok 2 · failed 0")
