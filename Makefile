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

# The e2e tests need a real llama.cpp server and model: built once (~15 min on 2 cores) into
# ~/.cache/lmclient, with progress shown here rather than inside pytest's captured output.
test: install
	$(BIN)/python scripts/llamacpp.py install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check lmclient tests benchmarks examples scripts
	$(BIN)/ruff format --check lmclient tests benchmarks examples scripts
	$(BIN)/mypy --strict lmclient

demo: install
	$(BIN)/python examples/demo.py

# lmclient next to httpx, the openai SDK and a raw socket, one table (~2 min on 2 cores);
# `$(BIN)/python benchmarks/run.py --readme README.md` also writes it into the README.
bench: install
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/items_linear.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
