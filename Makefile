# The two commands: `make demo` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench bench-quick clean
BENCH_STAMP := $(VENV)/.bench-installed

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/progresscast demo

test: $(STAMP)
	$(BIN)/python -m pytest

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
