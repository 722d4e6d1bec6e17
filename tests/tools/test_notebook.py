"""examples/sac_minitaur_tutorial.ipynb runs end to end as Colab runs it.

The notebook is executed with nbclient (papermill-style parameters injected
after its "parameters" cell: the tiny budget, an output directory) in Jupyter
kernels of three Pythons, each from a kernelspec in a temporary directory:

* Python 3.12 and 3.13 (Colab's kernels since 2025-08 and 2026-08), each in a
  virtualenv with only ipykernel and matplotlib (tests/support/notebook_kernels.py),
  started with an environment that cannot see this project's virtualenv. The
  notebook has to find a Python 3.11 by itself (here: pyenv's shim
  `python3.11` on PATH), make the jobs' virtualenv and `pip install` this clone
  with its tools extra into it. The 3.12 run installs (one real install per
  suite run, into a temporary jobs_venv); the 3.13 run passes the same
  jobs_venv and must reuse it, as a second run of the notebook does.
* this project's own Python 3.11, where sac_distributed is installed: the
  notebook must use the kernel's Python for the jobs and install nothing.

Each run must train (sac-launch exits 0, the learner reaches num_iterations,
the evaluation lines are printed), show the 800x600 learning curve and write
and embed the policy's mp4. Cheaper tests run only the first cells: a bad
`budget` or `package` stops with a one-line error that says what to do, and
the Python search finds pyenv's 3.11 when PATH has none (or only a broken
shim).

Not tested here: the path where no Python 3.11 or 3.10 exists and the notebook
installs uv and has it download CPython 3.11 (`uv python install`), because
that download comes from GitHub, which this machine cannot reach (only PyPI,
Debian and npm are); nor `uv python find`, the `uv venv` fallback for a Python
without ensurepip, a `git+https://` install source, or Colab itself.
"""

import ast
import base64
import glob
import os
import struct
import sys
import time

import imageio
import nbformat
import pytest
from nbclient.exceptions import CellExecutionError
from support import notebook_kernels as kernels
from support.repo import EXAMPLES_DIR, REPO

NOTEBOOK = os.path.join(EXAMPLES_DIR, "sac_minitaur_tutorial.ipynb")
TINY_ENV = "Pendulum-v1"
PENDULUM_STEPS = 200
COLAB_PYTHONS = ("3.12", "3.13")
JOBS_CELL = "requirement = requirement_for(package)"  # a line of the "Python for the jobs" cell
TRAIN_CELL = 'launch = sac("launch"'


def _png_size(data: bytes) -> tuple:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _code(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


class Kernels:
    """Kernel virtualenvs, made on first use, one per Python version, for the whole module."""

    def __init__(self, root):
        self._root, self._pythons = root, {}

    def python(self, version: str) -> str:
        if version not in self._pythons:
            base = kernels.find_python(version)
            if base is None:
                pytest.skip(f"no Python {version} here (python{version} on PATH, pyenv)")
            venv = str(self._root / f"kernel-{version}")
            start = time.monotonic()
            python = kernels.make_kernel_venv(base, venv)
            seconds = time.monotonic() - start
            print(f"[figure] kernel venv of Python {version} ({base}): {seconds:.0f} s")
            assert not kernels.has_module(python, "sac_distributed")
            self._pythons[version] = python
        return self._pythons[version]


@pytest.fixture(scope="module")
def kernel_venvs(tmp_path_factory) -> Kernels:
    return Kernels(tmp_path_factory.mktemp("kernels"))


@pytest.fixture(scope="module")
def jobs_venv(tmp_path_factory) -> str:
    """Where the Colab-like runs put the jobs' virtualenv: the first installs, the next reuse."""
    return str(tmp_path_factory.mktemp("jobs") / "venv")


def _run(nb, python, tmp_path, **params) -> float:
    kernels.inject_parameters(nb, **params)
    return kernels.execute(nb, python, str(tmp_path / "kernelspecs"), EXAMPLES_DIR)


# -- The notebook's text -------------------------------------------------------------------


def test_badge_and_install_source_name_one_repository():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = _code(nb)
    definitions = [line for line in code.splitlines() if line.startswith("REPO_URL = ")]
    assert len(definitions) == 1, "one place in the notebook defines the repository URL"
    url = definitions[0].split("=", 1)[1].strip().strip('"')
    assert url.startswith("https://github.com/")
    assert code.count("github.com/") == 1  # the install source is built from REPO_URL
    first = nb.cells[0]
    assert first.cell_type == "markdown"
    owner_and_name = url[len("https://github.com/") :]
    colab = f"https://colab.research.google.com/github/{owner_and_name}/blob/main/examples/"
    assert f'href="{colab}sac_minitaur_tutorial.ipynb"' in first.source
    assert "https://colab.research.google.com/assets/colab-badge.svg" in first.source
    assert url == "https://github.com/sac-distributed/sac_distributed"


def test_kernel_imports_only_the_standard_library_and_ipython():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    imported = set()
    for node in ast.walk(ast.parse(_code(nb))):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
    assert imported - set(sys.stdlib_module_names) == {"IPython"}


# -- Its first cells only, on a Colab-like kernel --------------------------------------------


@pytest.mark.slow
def test_unknown_budget_stops_with_what_to_do(kernel_venvs, tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    with pytest.raises(CellExecutionError):
        _run(nb, kernel_venvs.python("3.12"), tmp_path, budget="huge", output_dir=str(tmp_path))
    (error,) = kernels.errors(nb)
    assert error.ename == "SetupError"
    assert error.traceback == [f"SetupError: {error.evalue}"]  # one line, no traceback
    assert "budget must be one of ['full', 'tiny'], got 'huge'" in error.evalue
    assert "parameters cell" in error.evalue


@pytest.mark.slow
def test_package_that_is_no_clone_stops_before_installing(kernel_venvs, tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    not_a_clone = tmp_path / "not_a_clone"
    not_a_clone.mkdir()
    venv = tmp_path / "jobs"
    with pytest.raises(CellExecutionError):
        _run(
            nb,
            kernel_venvs.python("3.12"),
            tmp_path,
            budget="tiny",
            output_dir=str(tmp_path / "out"),
            package=str(not_a_clone),
            jobs_venv=str(venv),
        )
    (error,) = kernels.errors(nb)
    assert error.traceback == [f"SetupError: {error.evalue}"]
    assert "\n" not in error.evalue
    assert f"package {str(not_a_clone)!r} is not a sac_distributed clone" in error.evalue
    assert "set package to one of those" in error.evalue
    assert not venv.exists()  # nothing was created or installed


@pytest.mark.slow
def test_python_search_falls_back_to_pyenv(kernel_venvs, tmp_path):
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    if not glob.glob(f"{pyenv}/versions/3.11.*/bin/python3.11"):
        pytest.skip(f"no pyenv Python 3.11 under {pyenv}")
    broken = tmp_path / "shims"
    broken.mkdir()
    shim = broken / "python3.11"  # like a pyenv shim of a version that is not selected
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.11: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    (last,) = [i for i, c in enumerate(nb.cells) if "def find_python():" in c.source]
    probe = (
        "for path in [os.environ['PATH'], BROKEN]:\n"
        "    os.environ['PATH'] = path\n"
        "    print('found:', find_python()[1])"
    )
    nb.cells = nb.cells[: last + 1] + [nbformat.v4.new_code_cell(probe)]
    kernels.inject_parameters(
        nb, budget="tiny", output_dir=str(tmp_path / "out"), BROKEN=str(broken)
    )
    kernels.execute(nb, kernel_venvs.python("3.12"), str(tmp_path / "kernelspecs"), EXAMPLES_DIR)
    found = [
        line for line in "".join(kernels.outputs(nb, "stream")).splitlines() if "found:" in line
    ]
    assert len(found) == 2
    assert found[0].startswith("found: Python 3.11 (PATH: ")  # the shim pyenv put on PATH
    assert found[1].startswith(f"found: Python 3.11 (pyenv: {pyenv}/versions/3.11.")


# -- Whole runs: Colab's Pythons and this project's ------------------------------------------


@pytest.fixture(scope="module", params=[*COLAB_PYTHONS, "3.11-installed"])
def executed(request, kernel_venvs, jobs_venv, tmp_path_factory):
    """(kernel, executed notebook, output dir, seconds, whether jobs_venv was new) of one
    tiny-budget run."""
    kernel = request.param
    tmp_path = tmp_path_factory.mktemp(f"notebook-{kernel}")
    output_dir = str(tmp_path / "out")
    if kernel in COLAB_PYTHONS:
        python = kernel_venvs.python(kernel)
        params = dict(package=REPO, jobs_venv=jobs_venv)
    else:
        python = sys.executable  # the project's virtualenv: sac_distributed is installed
        params = dict(jobs_venv=str(tmp_path / "unused_jobs_venv"))
    fresh = kernel in COLAB_PYTHONS and not os.path.exists(jobs_venv)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    seconds = _run(nb, python, tmp_path, budget="tiny", output_dir=output_dir, **params)
    jobs = "found Python 3.11, made and installed the jobs venv" if fresh else "Python for the jobs"
    print(
        f"[figure] notebook, tiny budget, kernel {kernel}: {seconds:.0f} s ({jobs} "
        f"{kernels.cell_seconds(nb, JOBS_CELL):.0f} s, sac-launch "
        f"{kernels.cell_seconds(nb, TRAIN_CELL):.0f} s)"
    )
    return kernel, nb, output_dir, seconds, fresh


@pytest.mark.slow
def test_finds_or_reuses_the_jobs_python(executed, jobs_venv):
    kernel, nb, _, _, fresh = executed
    text = "".join(kernels.outputs(nb, "stream"))
    if kernel not in COLAB_PYTHONS:
        assert "sac_distributed is already installed in this kernel's Python 3.11." in text
        assert f"jobs: Python 3.11 at {sys.executable}\n" in text
        return
    assert f"This kernel is Python {kernel}; the jobs " in text
    if fresh:
        assert f"Creating the virtualenv {jobs_venv} with Python 3.11 (PATH: " in text
        assert f"pip install '{REPO}[tools]'" in text and "Installed in " in text
    else:
        assert f"the jobs reuse the virtualenv {jobs_venv}:\n" in text
        assert "sac_distributed is already installed there" in text
        assert "pip install" not in text
    assert f"jobs: Python 3.11 at {jobs_venv}/bin/python\n" in text


@pytest.mark.slow
def test_trains_and_reports_progress(executed):
    _, nb, _, _, _ = executed
    text = "".join(kernels.outputs(nb, "stream"))
    assert "Observation Spec:" in text and "Action Spec:" in text
    assert "  num_iterations = 200\n" in text  # the hyperparameters, from the jobs' Python
    assert "step = 0: AverageReturn = " in text
    assert f"step = {PENDULUM_STEPS}: AverageReturn = " in text  # num_iterations = 200
    assert "[learner] Learner stopped at train_step 200: num_iterations reached" in text
    assert "sac-launch finished in " in text  # it exited 0
    assert "TF-Agents loaded " in text and "action for an all-zero observation: [" in text


@pytest.mark.slow
def test_plot_is_written_and_shown(executed):
    _, nb, output_dir, _, _ = executed
    (path,) = glob.glob(os.path.join(output_dir, "run_*", "eval", "learning_curve.png"))
    with open(path, "rb") as f:
        assert _png_size(f.read()) == (800, 600)
    shown = [base64.b64decode(png) for png in kernels.outputs(nb, "image/png")]
    assert (800, 600) in [_png_size(png) for png in shown]  # the learning curve
    assert len(shown) >= 2  # and the environment's first frame


@pytest.mark.slow
def test_video_is_written_and_embedded(executed):
    _, nb, output_dir, _, _ = executed
    path = os.path.join(output_dir, f"sac_{TINY_ENV}.mp4")
    with imageio.get_reader(path) as reader:
        assert reader.count_frames() == PENDULUM_STEPS + 1
    html = "".join(kernels.outputs(nb, "text/html"))
    assert "data:video/mp4;base64," in html
    embedded = html.split("data:video/mp4;base64,")[1].split('"')[0]
    with open(path, "rb") as f:
        assert base64.b64decode(embedded) == f.read()


@pytest.mark.slow
def test_prints_the_equivalent_commands(executed):
    _, nb, _, _, _ = executed
    text = "".join(kernels.outputs(nb, "stream"))
    launch = [
        line
        for line in text.splitlines()
        if line.startswith(f"sac-launch --root_dir=/tmp/sac_{TINY_ENV} ")
    ]
    assert len(launch) == 1
    assert f"--env_name={TINY_ENV} --num_iterations=200" in launch[0]
    assert "--actor_fc_layer_params=32,32" in launch[0]
    for binary in ("sac-reverb-server", "sac-learner", "sac-actor", "sac-evaluator"):
        assert f"\n{binary} " in text
    assert f"SAC_ENV_NAME={TINY_ENV} docker compose -f launch/docker-compose.yml up" in text
