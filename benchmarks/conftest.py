"""Collects benchmark medians and prints DP / non-private step ratios at the end of the run."""

import pytest

RESULTS: dict[tuple[str, str], float] = {}
PAIRED: dict[tuple[str, str], float] = {}


@pytest.fixture
def record():
    def store(model: str, variant: str, benchmark) -> None:
        if benchmark.stats is not None:  # None under --benchmark-disable
            RESULTS[(model, variant)] = benchmark.stats.stats.median
            if "paired_ratio" in benchmark.extra_info:
                PAIRED[(model, variant)] = benchmark.extra_info["paired_ratio"]
    return store


def pytest_terminal_summary(terminalreporter):
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
