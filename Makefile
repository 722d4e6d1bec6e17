# Two entry points for a fresh machine with Python 3.11:
#   make run    installs into .venv (if needed) and trains the embedded default
#   make test   installs into .venv (if needed), lints, and runs the test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: run test lint install clean bench-sb3

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/activate setup.py
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $@

install: $(VENV)/.installed

run: $(VENV)/.installed
	$(BIN)/sac-launch $(ARGS)

lint: $(VENV)/.installed
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

test: lint
	$(BIN)/python -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder --durations=10

# Benchmark only: SB3 for benchmarks/learning.py --systems=sb3, in its own virtualenv.
SB3_VENV := benchmarks/.venv-sb3
bench-sb3: $(SB3_VENV)/.installed

$(SB3_VENV)/.installed: benchmarks/requirements-sb3.txt
	$(PYTHON) -m venv $(SB3_VENV)
	$(SB3_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SB3_VENV)/bin/python -m pip install --quiet -r benchmarks/requirements-sb3.txt
	@touch $@

clean:
	rm -rf $(VENV) sac_runs
