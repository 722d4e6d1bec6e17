"""Where things are: the repository, the tests folder and what the tests read there.

Defined once, from this file's place (tests/support/), so that a test file reads the
same paths whichever folder under tests/ it sits in. Strings, as os.path gives them;
`Path(REPO)` where a test wants a Path.
"""

import os

# tests/: where user_envs.py and tiny_algorithm/ live. A binary that loads
# `user_envs:<factory>` or the tiny algorithm runs with this as its cwd or PYTHONPATH.
TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TESTS_DIR)
DATA_DIR = os.path.join(TESTS_DIR, "data")  # run directories written by older commits
BENCHMARKS_DIR = os.path.join(REPO, "benchmarks")
DOCS_DIR = os.path.join(REPO, "docs")
EXAMPLES_DIR = os.path.join(REPO, "examples")
PACKAGE_DIR = os.path.join(REPO, "sac_distributed")
SETUP_PY = os.path.join(REPO, "setup.py")
