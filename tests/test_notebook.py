"""examples/sac_minitaur_tutorial.ipynb runs end to end on the tiny budget.

The notebook is executed with nbclient in a kernel of this very Python (a
kernelspec written to a temporary directory, so nothing has to be installed
by hand), with papermill-style parameters injected after its "parameters"
cell: the tiny budget and an output directory that the test then inspects.
"""

import base64
import json
import os
import struct
import sys
import time

import imageio
import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

pytestmark = pytest.mark.slow

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
NOTEBOOK = os.path.join(EXAMPLES, "sac_minitaur_tutorial.ipynb")
KERNEL_NAME = "sac_distributed_test"
TINY_ENV = "Pendulum-v1"
PENDULUM_STEPS = 200
CELL_TIMEOUT_S = 900  # a deadline against hangs, not a speed target


def _kernel_manager(tmp_path) -> KernelManager:
    """A KernelManager for an ipykernel running sys.executable (this virtualenv)."""
    kernel_dir = tmp_path / "kernels" / KERNEL_NAME
    kernel_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "sac_distributed test",
        "language": "python",
        "env": {"SDL_VIDEODRIVER": "dummy", "SDL_AUDIODRIVER": "dummy", "MPLBACKEND": "Agg"},
    }
    (kernel_dir / "kernel.json").write_text(json.dumps(spec))
    specs = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")])
    return KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)


def _inject_parameters(nb, **params) -> None:
    """Adds a cell setting `params` right after the cell tagged "parameters"."""
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "the notebook needs exactly one cell tagged 'parameters'"
    source = "\n".join(f"{name} = {value!r}" for name, value in params.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    nb.cells.insert(tagged[0] + 1, cell)


def _outputs(nb, kind: str) -> list:
    """Every `kind` (a MIME type, or "stream") output of the executed code cells."""
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if kind == "stream" and out.output_type == "stream":
                found.append(out.text)
            elif kind in out.get("data", {}):
                found.append(out.data[kind])
    return found


def _png_size(data: bytes) -> tuple:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """(executed notebook, output dir, seconds) of one tiny-budget run."""
    tmp_path = tmp_path_factory.mktemp("notebook")
    output_dir = str(tmp_path / "out")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    _inject_parameters(nb, budget="tiny", output_dir=output_dir)
    km = _kernel_manager(tmp_path)
    client = NotebookClient(
        nb, km=km, timeout=CELL_TIMEOUT_S, resources={"metadata": {"path": EXAMPLES}}
    )
    start = time.monotonic()
    try:
        client.execute()
    finally:
        # nbclient leaves a kernel it was given running; one whose notebook failed
        # midway may still be collecting and would slow every test after this one.
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    return nb, output_dir, time.monotonic() - start


def test_trains_and_reports_progress(executed):
    nb, _, seconds = executed
    text = "".join(_outputs(nb, "stream"))
    assert "already installed" in text
    assert "Observation Spec:" in text and "Action Spec:" in text
    assert "step = 0: AverageReturn = " in text
    assert f"step = {PENDULUM_STEPS}: AverageReturn = " in text  # num_iterations = 200
    assert "train_step" in text and "items (" in text  # at least one status line
    assert "Learner: num_iterations reached at train_step 200" in text
    print(f"[figure] notebook, tiny budget: {seconds:.0f} s")


def test_plot_is_written_and_shown(executed):
    nb, output_dir, _ = executed
    path = os.path.join(output_dir, "learning_curve.png")
    with open(path, "rb") as f:
        assert _png_size(f.read()) == (800, 600)
    shown = [base64.b64decode(png) for png in _outputs(nb, "image/png")]
    assert (800, 600) in [_png_size(png) for png in shown]  # the learning curve
    assert len(shown) >= 2  # and the environment's first frame


def test_video_is_written_and_embedded(executed):
    nb, output_dir, _ = executed
    path = os.path.join(output_dir, f"sac_{TINY_ENV}.mp4")
    with imageio.get_reader(path) as reader:
        assert reader.count_frames() == PENDULUM_STEPS + 1
    html = "".join(_outputs(nb, "text/html"))
    assert "data:video/mp4;base64," in html
    embedded = html.split("data:video/mp4;base64,")[1].split('"')[0]
    with open(path, "rb") as f:
        assert base64.b64decode(embedded) == f.read()


def test_prints_the_equivalent_commands(executed):
    nb, _, _ = executed
    text = "".join(_outputs(nb, "stream"))
    launch = [line for line in text.splitlines() if line.startswith("sac-launch ")]
    assert len(launch) == 1
    assert f"--env_name={TINY_ENV} --num_iterations=200" in launch[0]
    assert "--actor_fc_layer_params=32,32" in launch[0]
    for binary in ("sac-reverb-server", "sac-learner", "sac-actor", "sac-evaluator"):
        assert f"\n{binary} " in text
    assert f"SAC_ENV_NAME={TINY_ENV} docker compose -f launch/docker-compose.yml up" in text
