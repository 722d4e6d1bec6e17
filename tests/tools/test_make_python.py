"""`make run` on a machine whose only Python is 3.12+ (Ubuntu 24.04, Debian 13, ...).

Every target that creates a virtualenv takes its Python from scripts/find-python. With
no 3.9-3.11 to be found, make stops before creating anything, with one line on stderr
naming the commands that get one (issue 72). Each test runs the real Makefile and script,
copied into a temporary folder, with PATH set to a folder of symlinks that holds the
tools the Makefile needs and the interpreters the test chooses; `make -n` shows which
Python a run would use without installing anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, NamedTuple, Optional

import pytest
from support.repo import REPO

# The way out the message gives, as a newcomer would paste it (GOAL is the make goal).
UV_COMMANDS = 'uv python install 3.11 && make {goal} PYTHON="$(uv python find 3.11)"'
DOCKER_COMMAND = "docker compose -f launch/docker-compose.yml up --build"

# What make and the venv recipe run, besides the interpreters under test.
TOOLS = ("make", "sh", "env", "touch", "rm")

# The targets that create a virtualenv: their own, or .venv as a prerequisite.
VENV_GOALS = ("run", "test", "lint", "install", "install-test", "docs", "bench-sb3")


def _real_python(minor: int) -> Optional[str]:
    """The executable (not a pyenv shim) of an installed CPython 3.<minor>, or None."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [str(p) for p in sorted(pyenv.glob(f"versions/3.{minor}.*/bin/python3.{minor}"))]
    candidates += [p for p in [shutil.which(f"python3.{minor}")] if p]
    for candidate in candidates:
        script = "import os, sys; print(sys.version_info[1], os.path.realpath(sys.executable))"
        try:
            out = subprocess.run(
                [candidate, "-c", script], capture_output=True, text=True, timeout=30
            ).stdout.split()
        except (OSError, subprocess.TimeoutExpired):
            continue
        if len(out) == 2 and out[0] == str(minor):
            return out[1]
    return None


PY312 = _real_python(12)
PY311 = _real_python(11)
needs_312 = pytest.mark.skipif(PY312 is None, reason="no CPython 3.12 installed")
needs_311 = pytest.mark.skipif(PY311 is None, reason="no CPython 3.11 installed")
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")


class Sandbox(NamedTuple):
    repo: Path  # a copy of the Makefile and scripts/find-python
    bin: Path  # the whole PATH
    venv: Path  # VENV= for every make call; it must never appear


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """A repo copy and a PATH whose only Python is 3.12 (`python3`)."""
    if PY312 is None:
        pytest.skip("no CPython 3.12 installed")
    repo, bin_dir = tmp_path / "repo", tmp_path / "bin"
    (repo / "scripts").mkdir(parents=True)
    (repo / "benchmarks").mkdir()
    shutil.copy(Path(REPO, "Makefile"), repo)
    shutil.copy(Path(REPO, "scripts", "find-python"), repo / "scripts")
    # Prerequisites make looks for; never read, since nothing gets installed.
    (repo / "setup.py").touch()
    (repo / "benchmarks" / "requirements-sb3.txt").touch()
    bin_dir.mkdir()
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(shutil.which(tool))
    (bin_dir / "python3").symlink_to(PY312)
    return Sandbox(repo, bin_dir, tmp_path / "venv")


def _make(box: Sandbox, *args: str) -> subprocess.CompletedProcess:
    env: Dict[str, str] = {"PATH": str(box.bin)}
    return subprocess.run(
        [str(box.bin / "make"), "--no-print-directory", "-C", str(box.repo), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _assert_refused(box: Sandbox, result: subprocess.CompletedProcess, goal: str) -> str:
    """The refusal: non-zero, one line on stderr with the commands, nothing created."""
    assert result.returncode != 0, result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert UV_COMMANDS.format(goal=goal) in lines[0]
    assert DOCKER_COMMAND in lines[0]
    assert result.stdout == ""
    assert not box.venv.exists()
    assert not (box.repo / "benchmarks" / ".venv-sb3").exists()
    return lines[0]


@pytest.mark.parametrize("goal", VENV_GOALS)
def test_only_python312_stops_before_creating_a_venv(sandbox: Sandbox, goal: str) -> None:
    line = _assert_refused(sandbox, _make(sandbox, goal, f"VENV={sandbox.venv}"), goal)
    assert "python3 here is 3.12" in line


def test_a_name_is_not_trusted(sandbox: Sandbox) -> None:
    (sandbox.bin / "python3.11").symlink_to(PY312)
    _assert_refused(sandbox, _make(sandbox, "run", f"VENV={sandbox.venv}"), "run")


@needs_311
def test_python311_on_path_is_picked(sandbox: Sandbox) -> None:
    (sandbox.bin / "python3.11").symlink_to(PY311)
    result = _make(sandbox, "-n", "run", f"VENV={sandbox.venv}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"{sandbox.bin / 'python3.11'} -m venv {sandbox.venv}"
    assert not sandbox.venv.exists()


@needs_311
def test_explicit_python312_is_refused(sandbox: Sandbox) -> None:
    (sandbox.bin / "python3.11").symlink_to(PY311)  # a good one on PATH does not overrule
    result = _make(sandbox, "run", f"VENV={sandbox.venv}", f"PYTHON={PY312}")
    assert f"PYTHON={PY312} is 3.12" in _assert_refused(sandbox, result, "run")


@needs_311
def test_explicit_python311_is_used(sandbox: Sandbox) -> None:
    result = _make(sandbox, "-n", "test", f"VENV={sandbox.venv}", f"PYTHON={PY311}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"{PY311} -m venv {sandbox.venv}"


@needs_311
def test_uv_finds_an_installed_python(sandbox: Sandbox) -> None:
    log = sandbox.bin.parent / "uv.log"
    uv = sandbox.bin / "uv"
    uv.write_text(
        "#!/bin/sh\n"
        f"printf '%s\\n' \"$UV_PYTHON_DOWNLOADS $*\" >> {log}\n"
        f'[ "$1 $2" = "python find" ] && echo {PY311}\n'
    )
    uv.chmod(0o755)
    result = _make(sandbox, "-n", "run", f"VENV={sandbox.venv}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"{PY311} -m venv {sandbox.venv}"
    assert log.read_text().splitlines() == ["never python find >=3.9,<3.12"]


def test_an_existing_venv_is_not_rechecked(sandbox: Sandbox) -> None:
    """A .venv that exists is used as it is, whatever Python PATH or PYTHON names."""
    (sandbox.venv / "bin").mkdir(parents=True)
    (sandbox.venv / "bin" / "activate").touch()
    (sandbox.venv / ".installed").touch()
    os.utime(sandbox.repo / "setup.py", (0, 0))  # older than the stamp: nothing to install
    result = _make(sandbox, "-n", "run", f"VENV={sandbox.venv}", f"PYTHON={PY312}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"{sandbox.venv}/bin/sac-launch "]


@needs_312
def test_setup_py_names_the_same_way_out(tmp_path: Path) -> None:
    """pip on 3.12 runs setup.py with setuptools present; a stub stands in for it."""
    shutil.copy(Path(REPO, "setup.py"), tmp_path)
    (tmp_path / "setuptools.py").write_text("find_packages = setup = None\n")
    result = subprocess.run(
        [PY312, "setup.py", "--name"],
        cwd=tmp_path,
        env={"PATH": os.defpath, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert 'uv python install 3.11 && "$(uv python find 3.11)" -m venv .venv' in line
    assert DOCKER_COMMAND in line
