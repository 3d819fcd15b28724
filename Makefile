# The two front-door commands (see README): `make benchmark` and `make test`.
SUITE ?= smoke
OUT ?= runs/$(SUITE)

.PHONY: setup benchmark test benchmarks

setup:
	@bash scripts/setup.sh

benchmark: setup
	.venv/bin/dpgym run --suite $(SUITE) --out $(OUT)
	@echo "leaderboard: $(OUT)/leaderboard.md"
	@echo "report:      $(OUT)/report.html"

test: setup
	.venv/bin/python -m pytest -q

benchmarks: setup
	.venv/bin/python -m pytest benchmarks --benchmark-enable -q
