# The two commands: `make demo` and `make test`. Both build .venv first.
# `make test` runs `make lint` (ruff, then mypy on src/) before pytest.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

BENCH_STAMP := $(VENV)/.bench-installed

.PHONY: demo test lint bench bench-quick clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/progresscast demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

# Four test processes (pytest-xdist) on 2 cores: most tests wait on pacing, sockets
# and child processes, so the others fill one's waits. `realtime` tests run alone.
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE):
# the test processes and every command they start then skip compiling and rewriting.
test: lint
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 4 --dist worksteal

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $(BENCH_STAMP)

# Every benchmark (< 15 min); prints a table and rewrites BENCHMARKS.md.
bench: $(BENCH_STAMP)
	$(BIN)/python bench/run.py

# The reduced set (< 2 min).
bench-quick: $(BENCH_STAMP)
	$(BIN)/python bench/run.py --quick

clean:
	rm -rf $(VENV) build src/*.egg-info
