# The two front-door commands (see README): `make benchmark` and `make test`.
SUITE ?= smoke
OUT ?= runs/$(SUITE)

.PHONY: setup benchmark test test-fast golden benchmarks results checkpoint

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

# The committed reference results (leaderboard/results/<suite>/; docs/results.md): each suite runs
# into runs/results/<suite> (re-running resumes it), then its leaderboard, report and manifest are
# copied beside the suite's name. Each suite's CPU hours: docs/measurements.md. A checkpoint of the suite
# (`make checkpoint`), when runs/results/<suite> has no cells, is where its run starts.
RESULTS ?= main main-large marginal paper-dp-nf paper-expm-nf paper-dp-auto-gan paper-dp-hflow-nonprivate paper-dp-hflow
# The part of a suite's grid the committed results cover, where not all of it (docs/results.md says why).
RESULTS_ARGS_marginal = --datasets adult --epsilons 0.5,1 --seeds 3
RESULTS_ARGS_paper-dp-nf = --datasets lifesci,lifesci:fold=2,lifesci:fold=3
RESULTS_ARGS_paper-expm-nf = --seeds 3
RESULTS_ARGS_paper-dp-auto-gan = --seeds 3
RESULTS_ARGS_paper-dp-hflow-nonprivate = --seeds 3
RESULTS_ARGS_paper-dp-hflow = --datasets adult --epsilons 1 --seeds 3
# The one-run audit of each generator at each ε, into the same directory: the report shows it beside the
# claimed and spent ε (docs/privacy.md#one-run-audit). A fit past main's cell limit fails its audit.
AUDIT_OPTIONS = --datasets adult --canaries 1000 --audit-rows 2000 --synthetic-rows 5000 --timeout 10m
RESULTS_AUDIT_marginal = --generators aim,mst,privbayes,privsyn,independent,dp_hflow,dp_merf --epsilons 0.5,1 $(AUDIT_OPTIONS)
RESULTS_AUDIT_main = --generators aim,mst,privbayes,privsyn,dp_hflow,dp_nf,dp_autogan,dp_merf,dp_cgan,dp_vae,dp_mog,independent,uniform,real \
                     --epsilons 0.5,1,4 $(AUDIT_OPTIONS)

define publish
	.venv/bin/python scripts/checkpoint.py unpack $(1)
	.venv/bin/dpgym run --suite $(1) --out runs/results/$(1) --no-progress $(RESULTS_ARGS_$(1))
	$(if $(RESULTS_AUDIT_$(1)),.venv/bin/dpgym audit $(RESULTS_AUDIT_$(1)) --out runs/results/$(1) > /dev/null)
	.venv/bin/dpgym leaderboard runs/results/$(1) > /dev/null
	.venv/bin/dpgym report runs/results/$(1) > /dev/null
	mkdir -p leaderboard/results/$(1)
	cp runs/results/$(1)/leaderboard.json runs/results/$(1)/leaderboard.md runs/results/$(1)/report.html \
	   runs/results/$(1)/run.json leaderboard/results/$(1)/
	if grep -q '^references' leaderboard/suites/$(1).toml; then \
	  .venv/bin/dpgym compare runs/results/$(1) > /dev/null && cp runs/results/$(1)/compare-*.* leaderboard/results/$(1)/; fi
	rm -f leaderboard/checkpoints/$(1).tar.xz

endef

results: setup
	$(foreach suite,$(RESULTS),$(call publish,$(suite)))

# A suite longer than a session: pack what its run has finished into leaderboard/checkpoints/ to commit;
# `make results` resumes from it on another machine (scripts/checkpoint.py says what it holds).
checkpoint: setup
	for suite in $(RESULTS); do \
	  if [ -d runs/results/$$suite/cells ]; then .venv/bin/python scripts/checkpoint.py pack $$suite || exit 2; fi; \
	done
