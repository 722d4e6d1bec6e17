"""A user's own env, end to end: examples/pointmass.py (Gymnasium API, registered
nowhere) trained by sac-launch as processes, then evaluated from another folder."""

import json
import os
import subprocess
import sys

import pytest
from proc_utils import DEADLINE_S, TINY_RUN_FLAGS

from sac_distributed import paths, results

pytestmark = pytest.mark.slow
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def _run(module, *flags, cwd):
    return subprocess.run(
        [sys.executable, "-m", f"sac_distributed.bin.{module}", *flags],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def test_an_unregistered_gymnasium_env_trains_and_evaluates_from_anywhere(tmp_path):
    root = tmp_path / "pointmass"
    launched = _run(
        "launch",
        f"--root_dir={root}",
        "--env_name=pointmass:make_env",
        """--env_kwargs={"goal_radius": 0.2}""",
        *TINY_RUN_FLAGS,
        cwd=EXAMPLES,  # as the README says: run from the module's folder
    )
    out = launched.stdout + launched.stderr
    assert launched.returncode == 0, out[-4000:]
    assert "env pointmass.make_env(**env_kwargs), a user factory" in out
    points = results.read_results(paths.results_path(str(root)))
    assert points and points[-1].train_step == 200
    info = json.loads((root / "run_info.json").read_text())
    assert info["env_name"] == "pointmass:make_env"
    assert info["env_loader"] == "factory" and info["env_module_dir"] == EXAMPLES
    assert json.loads(info["env_kwargs"]) == {"goal_radius": 0.2}

    # Elsewhere, with no PYTHONPATH: the run says where the module is.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    evaluated = _run(
        "evaluate", f"--policy_dir={root}", "--num_episodes=2", "--seed=1", cwd=str(elsewhere)
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "on pointmass:make_env" in evaluated.stdout
    assert "2 episodes: return mean" in evaluated.stdout


def test_an_env_that_fails_mid_run_stops_with_its_name_and_the_run_keeps_its_replay(tmp_path):
    root = tmp_path / "failing"
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    launched = _run(
        "launch",
        f"--root_dir={root}",
        "--env_name=user_envs:make_failing",
        """--env_kwargs={"at": 50}""",
        *TINY_RUN_FLAGS,
        cwd=tests_dir,
    )
    out = launched.stdout + launched.stderr
    assert launched.returncode == 1, out[-4000:]
    assert "actor_0 exited with code 2" in out
    assert "user_envs:make_failing raised ValueError at step 50: solver diverged" in out
    # The other jobs were stopped in order: the server wrote what the actor had sent.
    assert "Replay checkpoint written" in (root / "logs" / "server.log").read_text()
    assert "Traceback" not in (root / "logs" / "actor_0.log").read_text()
