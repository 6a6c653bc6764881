# The two commands: `make demo` and `make test`. Both build .venv first.
# `make test` runs ruff, then pytest with mypy on src/ beside it (`make lint`: both linters).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

BENCH_STAMP := $(VENV)/.bench-installed
# mypy's cache is kept for the user, not per clone (as uv keeps its downloads): a new
# clone or worktree checks only what differs from a tree checked before (a module's
# cache is used when its source's hash matches). Without it mypy spends about 15 s of
# CPU on a fresh clone, beside the tests.
MYPY := $(BIN)/mypy --cache-dir "$${XDG_CACHE_HOME:-$${HOME:-.}/.cache}/progresscast/mypy"

.PHONY: demo test lint install bench bench-quick clean

$(STAMP): pyproject.toml
	@echo "Installing progresscast and its test tools into $(VENV) (the first time: about 1-2 minutes) ..."
	$(PYTHON) -m venv $(VENV)
	@# uv installs what pip would (the same versions) in half the time: it fetches and
	@# unpacks in parallel and compiles the modules on every core. Where it cannot be had, pip.
	@if $(BIN)/pip install --quiet uv; then \
		$(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode -e '.[test]'; \
	else \
		$(BIN)/pip install --quiet -e '.[test]'; \
	fi
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/progresscast demo

# `progresscast` on every shell's and agent's PATH, in ~/.local/bin, apart from .venv:
# with pipx, its own venv; without, a venv of its own the same way (pip's --user install
# is refused by Pythons marked externally managed, Debian's among them).
APP_VENV := $(HOME)/.local/share/progresscast-venv
install:
	@if command -v pipx >/dev/null 2>&1; then \
		pipx install --force . ; \
	else \
		echo "Installing progresscast into $(APP_VENV), linked from ~/.local/bin (about a minute) ..." && \
		$(PYTHON) -m venv $(APP_VENV) && \
		$(APP_VENV)/bin/pip install --quiet --upgrade pip && \
		$(APP_VENV)/bin/pip install --quiet . && \
		$(APP_VENV)/bin/pip install --quiet --force-reinstall --no-deps . && \
		mkdir -p $(HOME)/.local/bin && \
		ln -sf $(APP_VENV)/bin/progresscast $(HOME)/.local/bin/progresscast ; \
	fi
	@command -v progresscast >/dev/null 2>&1 \
		&& echo "progresscast is $$(command -v progresscast)" \
		|| echo "progresscast is in ~/.local/bin, which is not on PATH: export PATH=\"\$$HOME/.local/bin:\$$PATH\" (in your shell's profile too)"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(MYPY)

# Six test processes (pytest-xdist) on 2 cores: most tests wait on pacing, sockets
# and child processes, so the others fill one's waits. `realtime` and `alone` tests run
# beside each other only.
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE):
# the test processes and every command they start then skip compiling and rewriting.
# mypy runs beside the tests (a core for about 15 s the first time on a machine, a
# second or so once its cache holds a tree like this one), its report printed after
# theirs; either failing fails `make test`.
test: $(STAMP)
	$(BIN)/ruff check src tests bench
	@$(MYPY) >$(VENV)/mypy.log 2>&1 & typing=$$!; \
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 6 --dist worksteal; tests=$$?; \
	wait $$typing; typed=$$?; \
	echo "mypy:"; cat $(VENV)/mypy.log; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

$(BENCH_STAMP): $(STAMP) pyproject.toml
	@if [ -x $(BIN)/uv ]; then $(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[test,bench]'; \
	else $(BIN)/pip install --quiet -e '.[test,bench]'; fi
	touch $(BENCH_STAMP)

# Every benchmark (< 15 min); prints a table and rewrites BENCHMARKS.md.
bench: $(BENCH_STAMP)
	$(BIN)/python bench/run.py

# The reduced set (< 2 min).
bench-quick: $(BENCH_STAMP)
	$(BIN)/python bench/run.py --quick

clean:
	rm -rf $(VENV) build src/*.egg-info
