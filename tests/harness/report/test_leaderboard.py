"""Leaderboard statistics: the column contract, bootstrap intervals, charged failures, tied ranks, Friedman."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from dpgym.results.leaderboard import bootstrap_ci
from dpgym.results.render import headline_metrics, terminal_summary, to_markdown
from dpgym.results.store import RunStore
from dpgym.specs import Direction
from tests.harness.report.fakerun import leaderboard_of, result, write_leaderboard, write_run

DIRECTIONS = {"auroc": Direction.HIGHER, "tvd": Direction.LOWER}


def scores(auroc: float, tvd: float) -> dict[str, float]:
    return {"auroc": auroc, "tvd": tvd}


@pytest.fixture
def three_generators(tmp_path):
    rows = []
    for seed, (a, b, c) in enumerate([(0.90, 0.70, 0.50), (0.91, 0.72, 0.52), (0.89, 0.71, 0.49)]):
        rows += [result("real", seed, scores(a, 0.01)), result("independent", seed, scores(b, 0.10)),
                 result("uniform", seed, scores(c, 0.50))]
    return write_run(tmp_path, rows)


def test_columns_follow_the_contract(three_generators):
    board, _ = write_leaderboard(three_generators, DIRECTIONS)
    assert list(board.columns[:9]) == ["generator", "dataset", "epsilon", "delta", "eps_spent", "under_spent",
                                       "n_seeds", "failures", "fit_seconds_mean"]
    assert list(board.columns[9:17]) == [f"{m}_{s}" for m in ("auroc", "tvd") for s in ("mean", "std", "ci_low", "ci_high")]
    for column in ("guarantee", "audit_verdict", "sample_seconds_mean", "peak_rss_mb_max", "auroc_rank", "tvd_rank"):
        assert column in board.columns
    written = pd.read_csv(three_generators / "leaderboard.csv")
    assert list(written.columns) == list(board.columns)
    assert (three_generators / "leaderboard.md").read_text().startswith("### adult, ε = 1")


def test_a_row_spending_under_90_percent_of_its_budget_is_marked_and_named_by_the_ranking(tmp_path):
    rows = []
    for seed in range(3):
        rows += [result("tight", seed, scores(0.8 + seed / 100, 0.1), spent=0.99),
                 result("wasteful", seed, scores(0.7 + seed / 100, 0.2), spent=0.172 + seed / 1000),
                 result("uniform", seed, scores(0.5 + seed / 100, 0.5), spent=0.0)]
    board, markdown = write_leaderboard(write_run(tmp_path, rows), DIRECTIONS)
    board = board.set_index("generator")
    assert board.loc["wasteful", "eps_spent"] == pytest.approx(0.174)  # the largest over seeds
    assert board.under_spent.to_dict() == {"tight": False, "wasteful": True, "uniform": False}
    assert "| wasteful | formal | 0.174 (under-spent) |" in markdown
    assert "Not every ranked row spent its budget: 1 of 3" in markdown
    assert "wasteful on adult at ε = 1 spent 0.174" in markdown


def test_a_tiny_budget_spent_reads_in_significant_digits_not_as_zero(tmp_path):
    rows = [result("learner", seed, scores(0.8, 0.1), epsilon=2.5e-4, spent=2.5e-4) for seed in range(2)]
    board, markdown = write_leaderboard(write_run(tmp_path, rows), DIRECTIONS)
    assert "| learner | formal | 0.00025 |" in markdown
    assert "0.000 " not in markdown and "0.000 |" not in markdown


def test_json_output_is_strict_json_with_rows_and_ranking(three_generators):
    write_leaderboard(three_generators, DIRECTIONS)
    payload = json.loads((three_generators / "leaderboard.json").read_text(),
                         parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert len(payload["rows"]) == 3 and payload["metrics"] == {"auroc": "higher", "tvd": "lower"}
    assert payload["ranking"]["friedman"]["df"] == 2


def test_bootstrap_interval_is_deterministic_and_brackets_the_mean():
    values = np.array([0.61, 0.64, 0.58, 0.66, 0.60])
    low, high = bootstrap_ci(values, "g|adult|1.0|auroc")
    assert (low, high) == bootstrap_ci(values, "g|adult|1.0|auroc")
    assert low < values.mean() < high
    assert values.min() <= low and high <= values.max()
    assert bootstrap_ci(np.array([0.5]), "one seed") == (pytest.approx(np.nan, nan_ok=True),) * 2
    assert bootstrap_ci(np.array([0.5, 0.5]), "constant") == (0.5, 0.5)


def test_every_metric_gets_mean_std_and_interval(three_generators):
    board = leaderboard_of(three_generators, DIRECTIONS).board.set_index("generator")
    real = board.loc["real"]
    assert real.n_seeds == 3 and real.failures == 0
    assert real.auroc_mean == pytest.approx(0.90)
    assert real.auroc_std == pytest.approx(np.std([0.90, 0.91, 0.89], ddof=1))
    assert 0.89 <= real.auroc_ci_low < 0.90 < real.auroc_ci_high <= 0.91


def test_a_failed_cell_is_charged_the_uniform_score_at_its_seed_and_the_time_limit(tmp_path):
    rows = [result("uniform", 0, scores(0.50, 0.50)), result("uniform", 1, scores(0.54, 0.52)),
            result("dpgan", 0, scores(0.80, 0.05)),
            result("dpgan", 1, {}, status="failed", total_seconds=7.0)]
    run = write_run(tmp_path, rows, timeout=600)
    lb = leaderboard_of(run, DIRECTIONS)
    dpgan = lb.board.set_index("generator").loc["dpgan"]
    assert dpgan.failures == 1 and dpgan.n_seeds == 1
    assert dpgan.auroc_mean == pytest.approx((0.80 + 0.54) / 2)  # uniform's seed-1 score, not dropped
    assert dpgan.tvd_mean == pytest.approx((0.05 + 0.52) / 2)
    assert dpgan.fit_seconds_mean == pytest.approx((1.0 + 600) / 2)
    assert "model diverged" in dpgan.error
    failures = lb.failures()
    assert list(failures.generator) == ["dpgan"] and list(failures.charged_with) == ["uniform"]


def test_without_a_time_limit_a_failure_is_charged_the_time_it_ran(tmp_path):
    rows = [result("uniform", 0, scores(0.5, 0.5)), result("dpgan", 0, {}, status="failed", total_seconds=7.0)]
    board = leaderboard_of(write_run(tmp_path, rows), DIRECTIONS).board.set_index("generator")
    assert board.loc["dpgan"].fit_seconds_mean == pytest.approx(7.0)


def test_without_a_uniform_baseline_a_failure_is_charged_the_worst_score(tmp_path):
    rows = [result("a", 0, scores(0.9, 0.1)), result("b", 0, scores(0.7, 0.3)),
            result("c", 0, {}, status="timeout")]
    lb = leaderboard_of(write_run(tmp_path, rows), DIRECTIONS)
    c = lb.board.set_index("generator").loc["c"]
    assert (c.auroc_mean, c.tvd_mean, c.failures) == (0.7, 0.3, 1)
    assert list(lb.failures().charged_with) == ["worst"]


def test_an_unavailable_dataset_is_neither_a_failure_nor_charged(tmp_path):
    rows = [result("uniform", 0, scores(0.5, 0.5)), result("a", 0, {}, status="unavailable")]
    board = leaderboard_of(write_run(tmp_path, rows), DIRECTIONS).board.set_index("generator")
    assert (board.loc["a"].failures, board.loc["a"].n_seeds, board.loc["a"].unavailable) == (0, 0, 1)
    assert np.isnan(board.loc["a"].auroc_mean)


def test_generators_whose_intervals_overlap_share_a_rank(tmp_path):
    rows = []
    for seed, (a, b, c) in enumerate([(0.80, 0.78, 0.50), (0.84, 0.83, 0.51), (0.82, 0.79, 0.52)]):
        rows += [result("a", seed, scores(a, 1 - a)), result("b", seed, scores(b, 1 - b)),
                 result("c", seed, scores(c, 1 - c))]
    board = leaderboard_of(write_run(tmp_path, rows), DIRECTIONS).board.set_index("generator")
    assert board.loc["a"].auroc_ci_low < board.loc["b"].auroc_ci_high  # the premise: a and b overlap
    assert board.auroc_rank.to_dict() == {"a": 1, "b": 1, "c": 3}
    assert board.tvd_rank.to_dict() == {"a": 1, "b": 1, "c": 3}  # lower is better for tvd


def test_friedman_and_nemenyi_separate_a_consistent_order(tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    for dataset in ("d1", "d2", "d3", "d4", "d5", "d6"):
        for seed in range(2):
            base = rng.uniform(0.5, 0.6)
            for gen, lift in (("best", 0.3), ("middle", 0.15), ("worst", 0.0)):
                rows.append(result(gen, seed, scores(base + lift, 0.5 - lift), dataset=dataset))
    ranking = leaderboard_of(write_run(tmp_path, rows), DIRECTIONS).ranking
    assert ranking.blocks == 12
    assert ranking.friedman["pvalue"] < 0.001
    assert [(e["generator"], e["rank"]) for e in ranking.generators] == [("best", 1), ("middle", 2), ("worst", 3)]
    assert ranking.critical_difference == pytest.approx(0.957, abs=0.01)  # Demšar's q_0.05(k=3) = 2.343
    assert "Friedman χ²(2)" in ranking.statement and "Nemenyi" in ranking.statement


def test_no_significant_difference_means_one_shared_rank(tmp_path):
    rng = np.random.default_rng(1)
    rows = []
    for dataset in ("d1", "d2", "d3", "d4"):
        for gen in ("a", "b", "c"):
            rows.append(result(gen, 0, scores(*rng.uniform(0, 1, 2)), dataset=dataset))
    ranking = leaderboard_of(write_run(tmp_path, rows), DIRECTIONS).ranking
    assert ranking.friedman["pvalue"] > 0.05
    assert {e["rank"] for e in ranking.generators} == {1.0}
    assert "not significantly different" in ranking.statement


def test_a_minus_infinite_value_is_written_as_strict_json(tmp_path):
    """A held-out log-likelihood of −∞ (a test row where the model puts no density) once aborted the JSON."""
    rows = [result(g, s, {"loglik": value}) for s in (0, 1) for g, value in (("a", -float("inf")), ("b", -3.0))]
    write_leaderboard(write_run(tmp_path, rows), {"loglik": Direction.HIGHER})
    payload = json.loads((tmp_path / "leaderboard.json").read_text(),
                         parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert {r["generator"]: r["loglik_mean"] for r in payload["rows"]} == {"a": "-inf", "b": -3.0}
    assert "| a | formal | 1.001 | — | — | 2 | 0 | 1.0 | −∞ #2 |" in (tmp_path / "leaderboard.md").read_text()


def test_a_value_missing_from_one_seed_is_not_ranked_on_the_others(tmp_path):
    """Dropping the NaN left one seed, no interval, and nothing able to beat it: rank 1."""
    rows = [result("a", 0, scores(0.48, 0.5)), result("a", 1, scores(float("nan"), 0.5))]
    rows += [result("b", s, scores(v, 0.4)) for s, v in ((0, 0.69), (1, 0.70))]
    board = leaderboard_of(write_run(tmp_path, rows), DIRECTIONS).board.set_index("generator")
    assert board.loc["a"].auroc_mean == pytest.approx(0.48) and np.isnan(board.loc["a"].auroc_rank)
    assert board.loc["b"].auroc_rank == 1 and board.loc["a"].tvd_rank == 2  # tvd is complete: ranked


def test_a_failed_seed_is_not_charged_a_value_its_generator_never_has(tmp_path):
    rows = [result("uniform", s, scores(0.5, 0.5)) for s in (0, 1)]
    rows += [result("sampler", 0, {"auroc": 0.7}), result("sampler", 1, {}, status="failed")]  # no tvd, by design
    board = leaderboard_of(write_run(tmp_path, rows), DIRECTIONS).board.set_index("generator")
    assert board.loc["sampler"].auroc_mean == pytest.approx(0.6)  # charged uniform's 0.5
    assert np.isnan(board.loc["sampler"].tvd_mean) and np.isnan(board.loc["sampler"].tvd_rank)


def test_values_without_a_declared_direction_are_shown_but_not_ranked(tmp_path):
    rows = [result(g, s, {**scores(v, 1 - v), "diagnostic": v}) for s in (0, 1) for g, v in (("a", 0.9), ("b", 0.5))]
    lb = leaderboard_of(write_run(tmp_path, rows), DIRECTIONS)
    assert lb.board.diagnostic_rank.isna().all() and lb.board.diagnostic_mean.notna().all()
    assert lb.ranking.blocks == 2  # auroc and tvd only
    write_leaderboard(tmp_path, DIRECTIONS)
    assert "diagnostic (direction undeclared)" in (tmp_path / "leaderboard.md").read_text()


def test_a_block_where_every_generator_ties_is_no_evidence_for_the_ranking(tmp_path):
    rows = [result(g, s, {**scores(v, 1 - v), "real_accuracy": 0.85}) for s in (0, 1)
            for g, v in (("a", 0.9), ("b", 0.5), ("c", 0.7))]
    ranking = leaderboard_of(write_run(tmp_path, rows), {**DIRECTIONS, "real_accuracy": Direction.HIGHER}).ranking
    assert ranking.blocks == 2


def test_labels_and_errors_cannot_break_the_markdown_table(tmp_path):
    failed = result("b|c", 1, {}, status="failed")
    failed["error"]["message"] = "line one\nline | two"
    rows = [result("uniform", s, scores(0.5, 0.5)) for s in (0, 1)] + [result("b|c", 0, scores(0.6, 0.4)), failed]
    _, markdown = write_leaderboard(write_run(tmp_path, rows), DIRECTIONS)
    table = [line for line in markdown.splitlines() if line.startswith("| b")]
    assert table and all(line.count(" | ") == markdown.splitlines()[2].count(" | ") for line in table)
    assert "- b\\|c × adult × ε=1 × seed 1: fit: RuntimeError: line one line \\| two" in markdown


def test_a_run_of_generators_and_learners_ranks_the_generators(tmp_path):
    """The two kinds share no metric, so no block held both and nothing was ranked."""
    rows = []
    for dataset in ("d1", "d2"):
        for s in (0, 1):
            rows += [result(g, s, scores(v, 1 - v), dataset=dataset) for g, v in (("a", 0.9), ("b", 0.5), ("c", 0.7))]
            for learner, auc in (("l1", 0.8), ("l2", 0.6)):
                rows.append({**result(learner, s, {"auc": auc + 0.01 * s}, dataset=dataset), "task": "private_learning"})
    ranking = leaderboard_of(write_run(tmp_path, rows), {**DIRECTIONS, "auc": Direction.HIGHER}).ranking
    assert [e["generator"] for e in ranking.generators] == ["a", "c", "b"] and ranking.blocks == 4
    assert ranking.excluded == ["l1", "l2"] and "Private learners are not in this ranking" in ranking.statement


def test_cells_of_two_deltas_are_refused_not_compared_as_one(tmp_path):
    rows = [result("a", 0, scores(0.9, 0.1)), result("b", 0, scores(0.5, 0.5))]
    rows[1]["cell"]["delta"] = 1e-7
    with pytest.raises(ValueError, match=r"its cells span δ = 1e-07, 1e-05, and a leaderboard compares one δ"):
        leaderboard_of(write_run(tmp_path, rows), DIRECTIONS)


def test_html_in_a_label_stays_text_in_the_markdown(tmp_path):
    rows = [result("x<td>y", s, scores(0.6, 0.4)) for s in (0, 1)]
    _, markdown = write_leaderboard(write_run(tmp_path, rows), DIRECTIONS)
    assert "x&lt;td>y" in markdown and "<td>" not in markdown


def rendered(tables) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    for table in tables:
        console.print(table)
    return console.export_text()


def test_the_terminal_shows_the_suites_headline_values_and_defaults_to_a_few(three_generators):
    board = leaderboard_of(three_generators, {**DIRECTIONS, "tstr_auroc": Direction.HIGHER})
    chosen = rendered(terminal_summary(board, ("tvd",)))
    assert "tvd ↓" in chosen and "auroc" not in chosen
    assert "independent" in chosen and "0.100 #2" in chosen
    assert headline_metrics(board, None) == ["auroc", "tvd"]  # no default headline value: the run's first few
    assert headline_metrics(board, ("tvd", "no_such_value")) == ["tvd"]


def test_a_value_that_ignores_the_generator_is_shown_once_per_dataset_not_in_every_row(tmp_path):
    """A detector trained on the real rows (dp_ad) gives every generator of a dataset and seed the same
    value: it is summarised once per dataset and takes no part in the generators' ranks."""
    rows = []
    for seed, detector in enumerate((0.80, 0.84, 0.82)):
        rows += [result(name, seed, {**scores(a + seed / 100, 0.1), "detector_accuracy": detector})
                 for name, a in (("real", 0.9), ("independent", 0.7), ("uniform", 0.5))]
    run = write_run(tmp_path, rows)
    directions = {**DIRECTIONS, "detector_accuracy": Direction.HIGHER}
    lb = leaderboard_of(run, directions, generator_independent=["detector_accuracy"])
    assert "detector_accuracy_mean" not in lb.board and "detector_accuracy" not in lb.metrics
    (row,) = lb.dataset_values.to_dict(orient="records")
    assert row["dataset"] == "adult" and row["value"] == "detector_accuracy" and row["seeds"] == 3
    assert row["mean"] == pytest.approx(0.82) and row["ci_low"] <= 0.82 <= row["ci_high"]
    from dpgym.results.render import save_leaderboard, to_json

    markdown = save_leaderboard(RunStore(run), lb)
    assert "### Computed from the real data alone (the same for every generator)" in markdown
    assert "| adult | detector_accuracy ↑ | 0.820 |" in markdown
    assert to_json(lb)["dataset_values"][0]["value"] == "detector_accuracy"
    assert "computed from the real data alone" in rendered(terminal_summary(lb))


def test_the_ranking_weighs_each_family_once_over_dataset_and_epsilon_blocks(tmp_path):
    # "many" wins three values of a family that is not ranked; "good" wins the two ranked values.
    directions = {**DIRECTIONS, "share_a": Direction.LOWER, "share_b": Direction.LOWER, "share_c": Direction.LOWER}
    rows = []
    for dataset in ("adult", "census"):
        for epsilon in (1.0, 4.0):
            for seed in range(2):
                unranked = {"share_a": 0.1, "share_b": 0.1, "share_c": 0.1}
                rows += [result("good", seed, {**scores(0.9, 0.1), **unranked, "share_a": 0.5, "share_b": 0.5,
                                                "share_c": 0.5}, dataset=dataset, epsilon=epsilon),
                         result("many", seed, {**scores(0.7, 0.3), **unranked}, dataset=dataset, epsilon=epsilon),
                         result("uniform", seed, {**scores(0.5, 0.5), **unranked, "share_a": 0.3},
                                dataset=dataset, epsilon=epsilon)]
    lb = leaderboard_of(write_run(tmp_path, rows), directions, ranked=["auroc", "tvd"])
    assert lb.ranking.ranked == ["auroc", "tvd"] and lb.ranking.blocks == 2 * 2 * 2
    assert [e["generator"] for e in lb.ranking.generators] == ["good", "many", "uniform"]
    assert "(auroc, tvd: one per metric family)" in lb.ranking.statement
    assert "optimistic" not in lb.ranking.statement  # two datasets: no one-dataset caveat
    one_dataset = leaderboard_of(write_run(tmp_path / "one", [r for r in rows if r["cell"]["dataset"] == "adult"]),
                                 directions, ranked=["auroc", "tvd"])
    assert "The blocks come from one dataset" in one_dataset.ranking.statement


def copies(train_sized: float, holdout: float) -> dict:
    return {"exact_match_rate_holdout": holdout}, {"privacy": {"exact_match_rate_train_sized_as_test": train_sized}}


def test_a_generator_that_copies_training_rows_or_fails_its_audit_is_flagged_and_not_ranked(tmp_path):
    directions = {**DIRECTIONS, "exact_match_rate_holdout": Direction.LOWER}
    rows = []
    for seed in range(3):
        for name, (train, holdout), audit in [("copier", (0.30, 0.05), None), ("real", (0.95, 0.05), None),
                                              ("duplicates", (0.05, 0.045), None), ("leaky", (0.0, 0.0), "violation"),
                                              ("fair", (0.0, 0.0), None), ("uniform", (0.0, 0.0), None)]:
            values, detail = copies(train, holdout)
            rows.append(result(name, seed, {**scores(0.9 - len(name) / 100, 0.1), **values}, detail=detail,
                               audit={"verdict": audit} if audit else None))
    lb = leaderboard_of(write_run(tmp_path, rows), directions, ranked=["auroc", "tvd"])
    flags = lb.board.set_index("generator").privacy_check
    assert flags["copier"] == "copies training rows (0.3 exact matches vs 0.05 of holdout rows)"
    assert flags["leaky"] == "audit: violation"
    assert flags["real"] == flags["duplicates"] == flags["fair"] == ""  # no claim; equal shares; nothing
    assert lb.ranking.flagged == ["copier", "leaky"]
    assert {e["generator"] for e in lb.ranking.generators} == {"real", "duplicates", "fair", "uniform"}
    assert "Left out by the privacy check: copier, leaky." in lb.ranking.statement


def test_the_terminal_cuts_a_long_label_and_marks_a_flagged_row(tmp_path):
    label = "dp_hflow-per-layer-clipping-sparsity-0.75"
    rows = [result(label, seed, scores(0.8, 0.2), audit={"verdict": "violation"}) for seed in range(2)]
    rows += [result("uniform", seed, scores(0.5, 0.5)) for seed in range(2)]
    lb = leaderboard_of(write_run(tmp_path, rows), DIRECTIONS)
    console = Console(file=io.StringIO(), width=100)
    for table in terminal_summary(lb):
        console.print(table)
    text = console.file.getvalue()
    assert "dp_hflow-per-layer-clip…" in text and "(flagged)" in text and label not in text
    assert label in to_markdown(lb)


def test_a_generator_run_on_part_of_the_grid_is_ranked_by_dataset_not_overall(tmp_path):
    rows = []
    for dataset in ("adult", "census", "wage"):
        for epsilon in (0.5, 1.0, 4.0):
            for seed in range(2):
                rows += [result("good", seed, scores(0.9, 0.1), dataset=dataset, epsilon=epsilon),
                         result("fair", seed, scores(0.7 if dataset != "wage" else 0.95, 0.3), dataset=dataset,
                                epsilon=epsilon),
                         result("uniform", seed, scores(0.5, 0.5), dataset=dataset, epsilon=epsilon)]
                if epsilon == 1.0:  # a third of the blocks
                    rows.append(result("deep", seed, scores(0.8, 0.2), dataset=dataset, epsilon=epsilon))
    lb = leaderboard_of(write_run(tmp_path, rows), DIRECTIONS)
    assert lb.ranking.partial == ["deep"] and lb.ranking.blocks == 3 * 3 * 2
    assert [e["generator"] for e in lb.ranking.generators] == ["good", "fair", "uniform"]
    assert "cover fewer than 50% of the blocks (the suite runs them on part of its grid): deep" in lb.ranking.statement
    ranks = lb.by_dataset
    assert list(ranks.columns) == ["adult", "census", "wage"]
    assert list(ranks.index) == ["good", "deep", "fair", "uniform"]  # by mean, each over where it ran
    assert ranks.loc["good", "adult"] == 0.0 and ranks.loc["uniform", "adult"] == 1.0
    # On wage "fair" wins AUROC: 0 there; on tvd third of four at ε = 1 (2/3), second of three elsewhere (1/2).
    assert ranks.loc["fair", "wage"] == pytest.approx((0 + 0 + 0 + 0.5 + 2 / 3 + 0.5) / 6)
    assert ranks.loc["deep", "adult"] == pytest.approx(1 / 3)  # second of four, at ε = 1 only
