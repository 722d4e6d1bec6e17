"""sac-plot and plotting.py: a learning-curve PNG from an evaluator results.csv."""

import io
import os
import struct
import subprocess
import sys

import pytest

from sac_distributed import paths
from sac_distributed.errors import ConfigError
from sac_distributed.launchers import supervisor
from sac_distributed.paths import RESULTS_HEADER
from sac_distributed.results import EpisodeLog, EvalPoint, append_result, read_results
from sac_distributed.tools import plotting

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _write_results(root: str, n: int = 9) -> str:
    """An evaluator-style results.csv (written with the evaluator's own helper)."""
    path = plotting.results_path(root)
    for i in range(n):
        append_result(path, EvalPoint(i * 1000, i * 1200, -1500.0 + 160 * i, 200.0, 1.7e9 + 10 * i))
    return path


def _write_episodes(root: str, task: int, n: int, start_return: float) -> None:
    """An actor-style episodes.csv: n Pendulum episodes of 200 steps."""
    log = EpisodeLog(paths.episodes_path(root, task))
    for i in range(n):
        log.append(200 * (i + 1), start_return + 50.0 * i, 200)
    log.close()


def _green_pixels(path: str) -> int:
    import matplotlib.image

    pixels = matplotlib.image.imread(path)[..., :3]
    r, g, b = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    return int(((g > r + 0.15) & (g > b + 0.15)).sum())


def _png_file_size(path: str) -> tuple:
    """(width, height) from a PNG's IHDR chunk; fails unless the file is a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def test_launch_summary_reads_the_results_through_plotting(tmp_path):
    """sac-launch's closing line: the first and last evaluation of results.csv."""
    console = io.StringIO()
    supervisor.print_summary(str(tmp_path), console)
    assert console.getvalue() == "No evaluation results were written.\n"
    path = _write_results(str(tmp_path), n=3)
    console = io.StringIO()
    supervisor.print_summary(str(tmp_path), console)
    assert console.getvalue() == (
        "Eval return: -1500.0 at train_step 0 -> -1180.0 at train_step 2000 "
        f"(3 evaluations, {path})\n"
    )


def test_read_results_parses_the_evaluator_format(tmp_path):
    path = _write_results(str(tmp_path), n=3)
    points = read_results(path)
    assert [p.train_step for p in points] == [0, 1000, 2000]
    assert [p.env_steps for p in points] == [0, 1200, 2400]
    assert points[2].average_return == pytest.approx(-1180.0)
    assert points[0].average_episode_length == 200.0


@pytest.mark.parametrize("x", plotting.X_AXES)
def test_plot_writes_a_readable_png(tmp_path, x):
    points = read_results(_write_results(str(tmp_path)))
    out = plotting.plot_learning_curve(points, str(tmp_path / "plots" / "curve.png"), x=x)
    assert _png_file_size(out) == (800, 600)
    assert os.path.getsize(out) > 10_000  # axes, labels and two curves, not a blank canvas

    import matplotlib.image

    pixels = matplotlib.image.imread(out)
    assert pixels.shape[:2] == (600, 800)
    assert len({tuple(p) for p in pixels.reshape(-1, pixels.shape[-1])[::97]}) > 5


def test_bad_results_files_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="No results file"):
        read_results(str(tmp_path / "missing.csv"))
    other = tmp_path / "other.csv"
    other.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(ConfigError, match="does not start with the header"):
        read_results(str(other))
    broken = tmp_path / "broken.csv"
    broken.write_text(",".join(RESULTS_HEADER) + "\n10,20,not-a-number,200.0,1.0\n")
    with pytest.raises(ConfigError, match="line 2"):
        read_results(str(broken))
    with pytest.raises(ConfigError, match="No evaluation results"):
        plotting.plot_learning_curve([], str(tmp_path / "empty.png"))


def test_results_file_format_is_the_evaluators(tmp_path):
    """One writer for the evaluator and the peers: the bytes every reader expects."""
    path = str(tmp_path / "eval" / "results.csv")
    append_result(path, EvalPoint(0, 1100, 23.1, 23.1, 1795431115.54))
    append_result(path, EvalPoint(1300, 2474, 200.1, 200.1, 1795431121.2))
    with open(path, "rb") as f:
        assert f.read() == (
            b"train_step,env_steps,average_return,average_episode_length,wall_time\n"
            b"0,1100,23.100,23.1,1795431115.5\n"
            b"1300,2474,200.100,200.1,1795431121.2\n"
        )
    assert read_results(path)[1] == EvalPoint(1300, 2474, 200.1, 200.1, 1795431121.2)
    other = tmp_path / "other.csv"
    other.write_text("a,b,c\n")
    with pytest.raises(ConfigError, match="does not start with the header"):
        append_result(str(other), EvalPoint(0, 0, 0.0, 0.0, 0.0))


def test_training_episodes_of_every_actor_are_drawn_on_the_env_steps_axis(tmp_path):
    root = str(tmp_path)
    points = read_results(_write_results(root))
    assert plotting.training_episodes(root) == []
    _write_episodes(root, 0, 20, -1500.0)
    _write_episodes(root, 2, 5, -1400.0)  # actor 1 has not finished an episode yet
    episodes = plotting.training_episodes(root)
    assert len(episodes) == 25
    assert episodes[-1][0] == 200 * 20 + 200 * 5  # both actors' steps, summed
    assert [steps for steps, _ in episodes] == sorted(steps for steps, _ in episodes)

    plain = plotting.plot_learning_curve(points, str(tmp_path / "plain.png"))
    with_train = plotting.plot_learning_curve(
        points, str(tmp_path / "train.png"), episodes=episodes
    )
    on_train_steps = plotting.plot_learning_curve(
        points, str(tmp_path / "steps.png"), x="train_step", episodes=episodes
    )
    assert _green_pixels(plain) == 0 and _green_pixels(on_train_steps) == 0
    assert _green_pixels(with_train) > 200  # the training points and their running mean


@pytest.mark.slow
def test_binary_plots_root_dir_results(tmp_path):
    root = str(tmp_path)
    _write_results(root)
    result = subprocess.run(
        [sys.executable, "-m", "sac_distributed.bin.plot", f"--root_dir={root}", "--x=env_steps"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = os.path.join(root, "eval", "learning_curve.png")
    assert f"{out}: 9 evaluations, last at train_step 8000: average return -220.00" in result.stdout
    assert _png_file_size(out) == (800, 600)
    assert "training episodes" not in result.stdout  # the actors logged none
    _write_episodes(root, 0, 30, -1500.0)
    result = subprocess.run(
        [sys.executable, "-m", "sac_distributed.bin.plot", f"--root_dir={root}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "with 30 training episodes from the actors' episodes.csv" in result.stdout
    assert _green_pixels(out) > 200
    missing = subprocess.run(
        [sys.executable, "-m", "sac_distributed.bin.plot", f"--root_dir={tmp_path / 'none'}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert missing.returncode == 2 and "error: No results file" in missing.stderr


@pytest.mark.slow
def test_binary_default_x_axis_is_env_steps(tmp_path):
    root = str(tmp_path)
    _write_results(root)
    outputs = {}
    for name, extra in (
        ("default", []),
        ("env_steps", ["--x=env_steps"]),
        ("train", ["--x=train_step"]),
    ):
        outputs[name] = str(tmp_path / f"{name}.png")
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "sac_distributed.bin.plot",
                f"--root_dir={root}",
                f"--output={outputs[name]}",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=600,  # against hangs only
        )
        assert result.returncode == 0, result.stderr[-3000:]
    read = {name: open(path, "rb").read() for name, path in outputs.items()}
    assert read["default"] == read["env_steps"]
    assert read["default"] != read["train"]


def _png_title(path: str) -> str:
    from PIL import Image

    with Image.open(path) as image:
        return image.info.get("Title", "")


@pytest.mark.parametrize("by", ["root_dir", "results"])
def test_the_plot_title_names_the_runs_env(tmp_path, by):
    """sac-plot's default title: the env from the run's run_info.json."""
    root = str(tmp_path / "run")
    results = _write_results(root, n=3)
    with open(paths.run_info_path(root), "w") as f:
        f.write('{"env_name": "MountainCarContinuous-v0", "hparams": {}}')
    out = str(tmp_path / "curve.png")
    flag = f"--root_dir={root}" if by == "root_dir" else f"--results={results}"
    result = subprocess.run(
        [sys.executable, "-m", "sac_distributed.bin.plot", flag, f"--output={out}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert _png_title(out) == "MountainCarContinuous-v0: greedy evaluation (3 points)"


def test_without_run_info_the_title_stays_generic(tmp_path):
    points = [EvalPoint(0, 0, -1.0, 200.0, 1.7e9), EvalPoint(10, 10, -0.5, 200.0, 1.7e9)]
    assert plotting.run_title(str(tmp_path), len(points)) is None
    out = plotting.plot_learning_curve(points, str(tmp_path / "c.png"))
    assert _png_title(out) == "Evaluation (2 points)"
