# Two entry points for a fresh machine with Python 3.9-3.11:
#   make run    installs what a run needs into .venv (if needed) and trains the embedded default
#   make test   installs the test extra too (if needed), lints, and runs the test suite
#   make test-fast  lints and runs tests/unit only (in-process, no binaries): the edit loop
#   make docs   installs the docs extra (if needed) and serves the docs site on 127.0.0.1:8000
# Without such a Python they stop before creating anything, with one line saying how to get one.
PYTHON ?=
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: run test test-fast lint install install-test clean bench-sb3 docs docs-build

# The Python a new virtualenv is made from: PYTHON if given, else the first 3.9-3.11 that
# scripts/find-python finds. Only the recipes that create a virtualenv expand it, so an
# existing .venv is used as it is. The script prints one word, the interpreter, or the one
# line that says how to get one, which stops make here.
venv_python = $(call checked_python,$(shell GOAL='$(MAKECMDGOALS)' $(SHELL) scripts/find-python $(PYTHON) 2>&1))
checked_python = $(if $(word 2,$1),$(error $1),$1)

$(BIN)/activate:
	$(venv_python) -m venv $(VENV)

# A run needs the package alone; the test extra (Ray, MuJoCo, ruff, Jupyter, the
# Kubernetes schemas, ...) is for `make test`.
$(VENV)/.installed: $(BIN)/activate setup.py
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $@

$(VENV)/.installed-docs: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	@touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

run: $(VENV)/.installed
	$(BIN)/sac-launch $(ARGS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

test: lint
	$(BIN)/python -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder --durations=10

# The in-process tests alone (tests/unit/: no subprocess, no binary), as `make test` runs them.
test-fast: lint
	$(BIN)/python -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder --durations=10 tests/unit

# The docs site (mkdocs.yml, docs/): served with live reload, or built once into site/
# with warnings as errors (tests/tools/test_docs.py builds it in `make test`). Offline.
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve -a 127.0.0.1:8000

docs-build: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Benchmark only: SB3 for benchmarks/learning.py --systems=sb3, in its own virtualenv.
SB3_VENV := benchmarks/.venv-sb3
bench-sb3: $(SB3_VENV)/.installed

$(SB3_VENV)/.installed: benchmarks/requirements-sb3.txt
	$(venv_python) -m venv $(SB3_VENV)
	$(SB3_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SB3_VENV)/bin/python -m pip install --quiet -r benchmarks/requirements-sb3.txt
	@touch $@

clean:
	rm -rf $(VENV) sac_runs site
