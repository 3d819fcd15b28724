# The two front-door commands (see README): `make benchmark` and `make test`.
SUITE ?= smoke
OUT ?= runs/$(SUITE)

.PHONY: setup benchmark test test-fast golden benchmarks

setup:
	@bash scripts/setup.sh

benchmark: setup
	.venv/bin/dpgym run --suite $(SUITE) --out $(OUT)

# The tests run on TEST_WORKERS processes (pytest-xdist), a whole test file to one worker, so that
# a file's module-scoped fixtures (the smoke run, fitted models) are built once.
TEST_WORKERS ?= 2

test: setup
	.venv/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The quick tier for the edit-run loop: every test not marked slow (a few seconds or more each).
test-fast: setup
	.venv/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow"

# The CI metric gate: run the golden suite and compare it with the committed baseline.
golden: setup
	rm -rf runs/golden
	.venv/bin/dpgym run --suite golden --out runs/golden --no-progress
	.venv/bin/dpgym check runs/golden --baseline leaderboard/baselines/golden.json

benchmarks: setup
	.venv/bin/python -m pytest benchmarks --benchmark-enable -q
