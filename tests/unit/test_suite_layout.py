"""The suite's layout, read from its files (nothing is imported or run).

* Every test file sits in tests/unit/ (in-process: no subprocess, no binary),
  tests/processes/ (tests that start real processes or binaries) or tests/tools/
  (docs, benchmarks and tools); none at the top of tests/ or anywhere else.
* No file under unit/ imports a module that starts processes (subprocess,
  multiprocessing, support.processes, ...) or reaches for sys.executable, os.fork
  and the like, so `pytest tests/unit` (`make test-fast`) starts none.
* No file under tests/ imports a test file or conftest: what files share is in
  tests/support/.

Each check is a function of a folder or of a source text; the last tests run them
on small synthetic inputs to show that each can fail.
"""

import ast
import os
from typing import List, Tuple

import pytest
from support.repo import TESTS_DIR

FOLDERS = ("unit", "processes", "tools")
# Modules whose import means a file starts processes (or helpers that only do that).
PROCESS_MODULES = (
    "subprocess",
    "multiprocessing",
    "support.processes",
    "support.compose_run",
    "support.learning_cli",
    "support.notebook_kernels",
)
# Attributes that start a process or name the interpreter to start one with.
PROCESS_ATTRIBUTES = {
    ("sys", "executable"),
    ("os", "fork"),
    ("os", "forkpty"),
    ("os", "system"),
    ("os", "popen"),
    ("os", "posix_spawn"),
    ("os", "posix_spawnp"),
}
PROCESS_PREFIXES = {"os": ("spawn", "exec")}  # os.spawnv, os.execv, ...


def _is_test_file(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def misplaced_test_files(tests_dir: str) -> List[str]:
    """Test files (as pytest names them) not directly in one of FOLDERS."""
    found = []
    for root, dirs, files in os.walk(tests_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if _is_test_file(name):
                rel = os.path.relpath(os.path.join(root, name), tests_dir)
                parts = rel.split(os.sep)
                if len(parts) != 2 or parts[0] not in FOLDERS:
                    found.append(rel)
    return found


def _imports(tree: ast.AST):
    """(line, module) for every import; `from a import b` gives a and a.b."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def _matched(module: str, prefixes) -> List[str]:
    return [p for p in prefixes if module == p or module.startswith(p + ".")]


def process_uses(source: str) -> List[Tuple[int, str]]:
    """(line, what) for each import or attribute in `source` that starts processes."""
    tree = ast.parse(source)
    found = [(line, p) for line, m in _imports(tree) for p in _matched(m, PROCESS_MODULES)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner, attr = node.value.id, node.attr
            if (owner, attr) in PROCESS_ATTRIBUTES or attr.startswith(
                PROCESS_PREFIXES.get(owner, ())
            ):
                found.append((node.lineno, f"{owner}.{attr}"))
    return sorted(set(found))


def imports_of_tests(source: str) -> List[Tuple[int, str]]:
    """(line, module) for each import of a test module or of conftest."""
    found = []
    for line, module in _imports(ast.parse(source)):
        first = module.split(".")[0]
        if first == "conftest" or _is_test_file(first + ".py"):
            found.append((line, first))
    return sorted(set(found))


def _python_files(folder: str) -> List[str]:
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "data"))
        out += [os.path.join(root, n) for n in sorted(files) if n.endswith(".py")]
    return out


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


# --- the rules, on the suite ---------------------------------------------------------


def test_every_test_file_sits_in_unit_processes_or_tools():
    assert misplaced_test_files(TESTS_DIR) == []
    for folder in FOLDERS:  # the folders are there and hold tests (the walk saw them)
        assert any(_is_test_file(n) for n in os.listdir(os.path.join(TESTS_DIR, folder))), folder


def test_no_unit_test_starts_a_process():
    unit = _python_files(os.path.join(TESTS_DIR, "unit"))
    assert len(unit) >= 30, unit
    found = {os.path.basename(p): process_uses(_read(p)) for p in unit}
    assert {name: uses for name, uses in found.items() if uses} == {}


def test_no_file_imports_a_test_file_or_conftest():
    files = _python_files(TESTS_DIR)
    assert os.path.join(TESTS_DIR, "conftest.py") in files
    found = {os.path.relpath(p, TESTS_DIR): imports_of_tests(_read(p)) for p in files}
    assert {name: imports for name, imports in found.items() if imports} == {}


# --- each check can fail -------------------------------------------------------------


PLACED = ("unit/test_a.py", "processes/test_b.py", "tools/c_test.py", "unit/helper.py")
MISPLACED = ("test_top.py", "support/test_helper.py", "unit/deeper/test_d.py", "other/e_test.py")


def test_a_test_file_outside_the_three_folders_is_found(tmp_path):
    def write(rel: str) -> None:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")

    for rel in PLACED:
        write(rel)
    assert misplaced_test_files(str(tmp_path)) == []
    for rel in MISPLACED:
        write(rel)
    found = misplaced_test_files(str(tmp_path))
    assert sorted(found) == sorted(os.path.normpath(rel) for rel in MISPLACED)


@pytest.mark.parametrize(
    "source, found",
    [
        ("import subprocess\n", [(1, "subprocess")]),
        ("import os\nfrom multiprocessing import Pool\n", [(2, "multiprocessing")]),
        ("from support.processes import run\n", [(1, "support.processes")]),
        ("from support import processes\n", [(1, "support.processes")]),
        ("from support import compose_run as c\n", [(1, "support.compose_run")]),
        ("import sys\nargv = [sys.executable, '-c', '']\n", [(2, "sys.executable")]),
        ("import os\npid = os.fork()\n", [(2, "os.fork")]),
        ("import os\nos.execv('/bin/true', ['true'])\n", [(2, "os.execv")]),
    ],
)
def test_a_process_use_is_found(source, found):
    assert process_uses(source) == found


def test_in_process_code_is_not_a_process_use():
    source = (
        "import os, sys, threading\n"
        "from support.training import small_hparams\n"
        "from support.repo import TESTS_DIR\n"
        "path = os.path.join(TESTS_DIR, 'x'); sys.path.insert(0, path)\n"
        "text = 'subprocess.run and sys.executable, in a string'\n"
    )
    assert process_uses(source) == []


@pytest.mark.parametrize(
    "source, found",
    [
        ("from test_crossq import batches\n", [(1, "test_crossq")]),
        ("import test_launch as launch\n", [(1, "test_launch")]),
        ("import conftest\n", [(1, "conftest")]),
        ("def f():\n    from conftest import ENV_NAME\n", [(2, "conftest")]),
    ],
)
def test_an_import_of_a_test_file_or_conftest_is_found(source, found):
    assert imports_of_tests(source) == found


def test_support_imports_are_not_test_imports():
    source = "from support.training import ENV_NAME\nimport user_envs, tiny_algorithm.config\n"
    assert imports_of_tests(source) == []
