"""Jupyter kernels on other Pythons for tests/tools/test_notebook.py, set up as Colab's is.

A kernel here is a virtualenv of that Python holding only what Colab's kernel
has that the notebook could use (ipykernel, matplotlib), started with an
environment that cannot see this project's virtualenv: no VIRTUAL_ENV or
PYTHONPATH, no project venv on PATH. PIP_*, SSL and proxy variables stay, so
pip inside the notebook reaches the same index as the test does.
"""

import datetime
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

KERNEL_PACKAGES = ("ipykernel", "matplotlib")  # what Colab ships that the notebook may touch
HIDDEN_VARIABLES = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "CONDA_PREFIX")
# Colab's kernel has this; the notebook must not pass it to the jobs' Python, which lacks it.
COLAB_MPLBACKEND = "module://matplotlib_inline.backend_inline"
PROBE = "import sys; print('%d.%d' % sys.version_info[:2], sys.executable)"
KERNEL_NAME = "sac_notebook_test"
CELL_TIMEOUT_S = 1200  # a deadline against hangs (the install cell included), not a speed target


def python_version(python: str) -> Optional[str]:
    """'3.12' for a Python that runs, None for one that does not (e.g. a pyenv shim of a
    version pyenv does not have selected)."""
    try:
        done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.split()[0] if done.returncode == 0 and done.stdout.strip() else None


def find_python(version: str) -> Optional[str]:
    """A Python `version` ("3.12") of this machine: python3.12 on PATH, or pyenv's; None if
    neither runs and reports that version."""
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates = [shutil.which(f"python{version}")]
    candidates += sorted(glob.glob(f"{pyenv}/versions/{version}.*/bin/python{version}"))
    for python in filter(None, candidates):
        if python_version(python) == version:
            return python
    return None


def kernel_env() -> Dict[str, str]:
    """This process's environment without a trace of the project's virtualenv."""
    venv = os.path.realpath(sys.prefix)
    path = [
        entry
        for entry in os.environ.get("PATH", "").split(os.pathsep)
        if entry and not os.path.realpath(entry).startswith(venv + os.sep)
    ]
    env = {k: v for k, v in os.environ.items() if k not in HIDDEN_VARIABLES}
    env.update(
        PATH=os.pathsep.join(path),
        MPLBACKEND=COLAB_MPLBACKEND,
        SDL_VIDEODRIVER="dummy",
        SDL_AUDIODRIVER="dummy",
    )
    return env


def make_kernel_venv(python: str, venv: str) -> str:
    """A virtualenv of `python` at `venv` with only KERNEL_PACKAGES; returns its python."""
    subprocess.run([python, "-m", "venv", venv], check=True, capture_output=True)
    venv_python = os.path.join(venv, "bin", "python")
    pip = [venv_python, "-m", "pip", "install", "-q", *KERNEL_PACKAGES]
    done = subprocess.run(pip, capture_output=True, text=True)
    assert done.returncode == 0, f"pip install {KERNEL_PACKAGES} failed:\n{done.stderr[-2000:]}"
    return venv_python


def has_module(python: str, module: str) -> bool:
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    # -I: not from the current directory (this repository's root, which has sac_distributed/)
    return subprocess.run([python, "-I", "-c", probe], env=kernel_env()).returncode == 0


def inject_parameters(nb, **params) -> None:
    """Adds a cell setting `params` right after the cell tagged "parameters" (as papermill)."""
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "the notebook needs exactly one cell tagged 'parameters'"
    source = "\n".join(f"{name} = {value!r}" for name, value in params.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    nb.cells.insert(tagged[0] + 1, cell)


def execute(nb, python: str, kernels_dir: str, cwd: str) -> float:
    """Runs every cell of `nb` in a kernel of `python` started in `cwd`; returns the seconds.

    Raises nbclient's CellExecutionError at the first failing cell (its outputs are in `nb`).
    """
    env = kernel_env()
    spec = {
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"notebook test ({python})",
        "language": "python",
        "env": env,  # explicit, on top of the `env` start_kernel gets (the same)
    }
    os.makedirs(os.path.join(kernels_dir, KERNEL_NAME), exist_ok=True)
    with open(os.path.join(kernels_dir, KERNEL_NAME, "kernel.json"), "w") as f:
        json.dump(spec, f)
    specs = KernelSpecManager(kernel_dirs=[kernels_dir])
    km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)
    client = NotebookClient(
        nb, km=km, timeout=CELL_TIMEOUT_S, resources={"metadata": {"path": cwd}}
    )
    start = time.monotonic()
    try:
        client.execute(env=env)
    finally:
        # nbclient leaves a kernel it was given running; one whose notebook failed midway
        # may still be busy and would slow every test after this one.
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    return time.monotonic() - start


def outputs(nb, kind: str) -> List:
    """Every `kind` (a MIME type, or "stream") output of the executed code cells."""
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if kind == "stream" and out.output_type == "stream":
                found.append(out.text)
            elif kind in out.get("data", {}):
                found.append(out.data[kind])
    return found


def errors(nb) -> List:
    """The error outputs (ename, evalue, traceback) of the executed code cells."""
    return [out for c in nb.cells for out in c.get("outputs", []) if out.output_type == "error"]


def cell_seconds(nb, marker: str) -> float:
    """How long the one code cell whose source contains `marker` ran (nbclient's timestamps)."""
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
    timing = cell.metadata["execution"]
    start, end = (
        datetime.datetime.fromisoformat(timing[key].replace("Z", "+00:00"))
        for key in ("iopub.execute_input", "shell.execute_reply")
    )
    return (end - start).total_seconds()
