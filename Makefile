# `make run` and `make test` work on a fresh machine: they create .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.gradcheck-installed

.PHONY: run test lint bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# reinstall only when the package metadata changes (editable install: code edits need no reinstall)
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/gradcheck run cartpole

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check gradcheck scenarios tests bench
	$(BIN)/ruff format --check gradcheck scenarios tests bench

bench: $(STAMP)
	$(BIN)/python bench/run_bench.py --output BENCHMARKS.md

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
