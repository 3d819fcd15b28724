"""Collects benchmark medians and prints, at the end of the run, DP / non-private step ratios and
each metric's time as a multiple of its dataset's yardstick fit."""

import pytest

RESULTS: dict[tuple[str, str], float] = {}
PAIRED: dict[tuple[str, str], float] = {}
METRIC_SECONDS: dict[tuple[str, str], float] = {}  # (dataset, metric or "yardstick") -> median seconds


@pytest.fixture
def record():
    def store(model: str, variant: str, benchmark) -> None:
        if benchmark.stats is not None:  # None under --benchmark-disable
            RESULTS[(model, variant)] = benchmark.stats.stats.median
            if "paired_ratio" in benchmark.extra_info:
                PAIRED[(model, variant)] = benchmark.extra_info["paired_ratio"]
    return store


@pytest.fixture
def metric_seconds() -> dict[tuple[str, str], float]:
    return METRIC_SECONDS


def pytest_terminal_summary(terminalreporter):
    metric_ratios(terminalreporter)
    models = sorted({m for m, _ in RESULTS})
    if not models:
        return
    terminalreporter.section("DP-SGD step / non-private step, batch 256 (median; paired = timed back to back)")
    for model in models:
        base = RESULTS.get((model, "non_private"))
        for (m, variant), t in sorted(RESULTS.items()):
            if m == model and variant != "non_private" and base:
                terminalreporter.write_line(f"{model:>10}  {variant:<18} {t * 1e3:8.2f} ms   {t / base:6.2f}x"
                                            f"   paired {PAIRED.get((m, variant), float('nan')):6.2f}x")
        if base:
            terminalreporter.write_line(f"{model:>10}  {'non_private':<18} {base * 1e3:8.2f} ms")
    if ("calibration", "prv_10000_steps") in RESULTS:
        terminalreporter.write_line(f"PRV noise calibration, 10,000 steps: {RESULTS[('calibration', 'prv_10000_steps')]:.2f} s")


def metric_ratios(terminalreporter) -> None:
    datasets = sorted({d for d, name in METRIC_SECONDS if name == "yardstick"})
    if not datasets:
        return
    terminalreporter.section("metric time / one HistGradientBoosting fit on the real rows (median)")
    for dataset in datasets:
        base = METRIC_SECONDS[(dataset, "yardstick")]
        metrics = {n: s for (d, n), s in METRIC_SECONDS.items() if d == dataset and n != "yardstick"}
        for name, seconds in sorted(metrics.items()):
            terminalreporter.write_line(f"{dataset:>8}  {name:<10} {seconds:8.2f} s  {seconds / base:6.2f}x")
        terminalreporter.write_line(f"{dataset:>8}  {'yardstick':<10} {base:8.2f} s   metrics together "
                                    f"{sum(metrics.values()) / base:.2f}x")
