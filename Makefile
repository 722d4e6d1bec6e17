# Two entry points for a fresh machine with Python 3.11:
#   make run    installs into .venv (if needed) and trains the embedded default
#   make test   installs into .venv (if needed), lints, and runs the test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: run test lint install clean

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
	$(BIN)/python -m pytest -q --durations=10

clean:
	rm -rf $(VENV) sac_runs
