# `make run` and `make test` work on a fresh machine: they create .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.gradcheck-installed

.PHONY: run test test-slow test-compat test-torch test-browser lint bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# reinstall only when the package metadata changes (editable install: code edits need no reinstall)
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Bytecode for the source tree, as pip writes it for a regular install (an editable one writes none): where
# PYTHONDONTWRITEBYTECODE is set, as in many CI images, every gradcheck process would otherwise compile its own
# modules from source (~0.2-0.4 s a start; the test lanes start hundreds). Only changed files are recompiled.
BYTECODE := $(BIN)/python -m compileall -q -j 0 -x 'broken_syntax' gradcheck scenarios tests

run: $(STAMP)
	@$(BYTECODE)
	$(BIN)/gradcheck run cartpole

# the contributor's lane: everything but the long runs (target: under 4 minutes on 2 cores from a cold kernel cache;
# measure with WARP_CACHE_PATH=$(mktemp -d) and --durations=40). Every test has a deadline (pytest-timeout).
# One worker per core (pytest-xdist); a test file stays on one worker so its module fixtures are built once.
# Warp's kernel cache is safe to share between processes (a build is renamed into place). TEST_WORKERS=0: serial.
TEST_WORKERS ?= auto
test: $(STAMP)
	@$(BYTECODE)
	$(BIN)/python -m pytest -q -m "not slow and not browser" -n $(TEST_WORKERS) --dist loadfile

# Third-party autodiff code for the slow lane's corpus (tests/test_thirdparty.py): skrl's Warp agents on warp-nn, pinned,
# installed beside .venv (--target, no dependency resolution: torch and jax stay out), put on those programs' PYTHONPATH
# only. Nothing of it is copied into this repository.
THIRDPARTY := .venv-thirdparty
THIRDPARTY_PACKAGES ?= skrl==2.1.1 warp-nn==0.4.1 gymnasium==1.4.0 cloudpickle==3.1.3 farama-notifications==0.0.6 \
	tqdm==4.70.1 tensorboard==2.21.0 tensorboard-data-server==0.7.2 protobuf==7.36.2 absl-py==2.5.1 markdown==3.11.3 \
	werkzeug==3.1.9 markupsafe==3.0.4 scipy==1.17.1 warpsphcore==0.6.0 warp-jsb==0.1.0

$(THIRDPARTY)/.installed: | $(BIN)/python
	$(BIN)/python -m pip install --quiet --no-deps --upgrade --target $(THIRDPARTY) $(THIRDPARTY_PACKAGES)
	touch $@

# the long runs, marked `slow`; .ci/run runs both lanes
test-slow: $(STAMP) $(THIRDPARTY)/.installed
	@$(BYTECODE)
	$(BIN)/python -m pytest -q -m slow -n $(TEST_WORKERS) --dist loadfile

# One virtual environment per historical warp-lang release (cached under .venv-compat/), where the
# upstream autodiff bugs gradcheck must catch are live. Newton needs warp-lang >= 1.17, so these get
# gradcheck's other runtime dependencies (as in pyproject.toml) and no newton; the Newton scenarios
# report that they cannot run there. The same tests then run on the latest Warp in .venv.
COMPAT_WARP ?= 1.5.1 1.7.0 1.8.0 1.9.1 1.16.0 1.17.0
COMPAT_DIR := .venv-compat
COMPAT_TESTS ?= tests/test_warp_versions.py tests/test_struct_audit.py tests/test_pure_warp_detectors.py tests/test_stats.py \
	tests/test_equivalence.py tests/test_internal_errors.py tests/test_captured_graphs.py tests/test_version_adjoints.py \
	tests/test_replay_speed.py tests/test_stats_host.py
COMPAT_DEPS := numpy typer rich tomli pytest pytest-timeout xmlschema

$(COMPAT_DIR)/%/.installed: pyproject.toml
	rm -rf $(COMPAT_DIR)/$*
	$(PYTHON) -m venv $(COMPAT_DIR)/$*
	$(COMPAT_DIR)/$*/bin/python -m pip install --quiet --upgrade pip
	$(COMPAT_DIR)/$*/bin/python -m pip install --quiet "warp-lang==$*" $(COMPAT_DEPS)
	$(COMPAT_DIR)/$*/bin/python -m pip install --quiet --no-deps -e .
	touch $@

test-compat: $(STAMP) $(foreach v,$(COMPAT_WARP),$(COMPAT_DIR)/$(v)/.installed)
	@set -e; for v in $(COMPAT_WARP); do \
		echo "== warp-lang $$v ($(COMPAT_DIR)/$$v)"; \
		$(COMPAT_DIR)/$$v/bin/python -m pytest -q -p no:cacheprovider $(COMPAT_TESTS); \
	done
	@echo "== warp-lang latest ($(VENV))"
	$(BIN)/python -m pytest -q -p no:cacheprovider $(COMPAT_TESTS)

# PyTorch programs under exec (the optional extra gradcheck[torch]), in their own virtual environment: torch's
# default wheel brings ~5 GB of CUDA libraries, so the lane pins the CPU build (torch 2.13.0, ~750 MB) first and the
# extra's range (torch>=2.1) is then satisfied. `make test` skips these tests where torch is not installed.
TORCH_VENV := .venv-torch
TORCH_PIN ?= torch==2.13.0
TORCH_TESTS ?= tests/test_torch_exec.py tests/test_torch_hosting.py tests/test_torch_functions.py tests/test_torch_reads.py tests/test_torch_grad_calls.py tests/test_torch_saved_overwrites.py tests/test_torch_unversioned.py tests/test_torch_thirdparty_data.py tests/test_torch_grad_by_hand.py tests/test_torch_distributed.py tests/test_torch_cross_rank.py tests/test_torch_thirdparty_ddp.py

$(TORCH_VENV)/.installed: pyproject.toml
	rm -rf $(TORCH_VENV)
	$(PYTHON) -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(TORCH_VENV)/bin/python -m pip install --quiet "$(TORCH_PIN)"
	$(TORCH_VENV)/bin/python -m pip install --quiet -e '.[dev,torch]'
	# the test lane only: TensorBoard's add_histogram is one of the gradient reads tests/test_torch_reads.py proves
	$(TORCH_VENV)/bin/python -m pip install --quiet "tensorboard>=2.14"
	touch $@

test-torch: $(TORCH_VENV)/.installed
	$(TORCH_VENV)/bin/python -m pytest -q -p no:cacheprovider $(TORCH_TESTS)

# The --html page in a real browser: Chromium from the OS (Debian: apt-get install chromium; .ci/run installs it),
# driven by Playwright (the `browser` extra, installed into .venv here). Without Chromium the tests skip and say so.
$(VENV)/.browser-installed: pyproject.toml | $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,browser]'
	touch $@

test-browser: $(STAMP) $(VENV)/.browser-installed
	@$(BYTECODE)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m browser tests/test_report_page_browser.py

lint: $(STAMP)
	$(BIN)/ruff check gradcheck scenarios tests bench
	$(BIN)/ruff format --check gradcheck scenarios tests bench

# BENCH_ARGS=--fail-on-regression: exit 1 when a row got slower than bench/baseline.json beyond its noise
bench: $(STAMP)
	$(BIN)/python bench/run_bench.py --output BENCHMARKS.md $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(COMPAT_DIR) $(TORCH_VENV) $(THIRDPARTY) build dist *.egg-info .pytest_cache .ruff_cache
