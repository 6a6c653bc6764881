# The two commands: `make demo` and `make test`. Both build .venv first.
# `make test` runs `make lint` (ruff, then mypy on src/) before pytest.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

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

test: lint
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/render_bench.py

clean:
	rm -rf $(VENV) build src/*.egg-info
