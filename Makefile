# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint demo bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check lmclient tests benchmarks examples scripts
	$(BIN)/ruff format --check lmclient tests benchmarks examples scripts
	$(BIN)/mypy --strict lmclient

demo: install
	$(BIN)/python examples/demo.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
