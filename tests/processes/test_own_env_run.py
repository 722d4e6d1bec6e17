"""A user's own envs launched by sac-launch as processes: one whose step fails mid-run,
and one with Dict observations (a camera, vectors and a Discrete part).

(The working case, examples/pointmass.py trained from its folder and evaluated
from another, is docs/own-env.md's runnable block: tests/tools/test_docs_examples.py.)"""

import pytest
from support.processes import DEADLINE_S, TINY_RUN_FLAGS, run
from support.repo import TESTS_DIR

pytestmark = pytest.mark.slow


def test_an_env_that_fails_mid_run_stops_with_its_name_and_the_run_keeps_its_replay(tmp_path):
    root = tmp_path / "failing"
    launched = run(
        "launch",
        f"--root_dir={root}",
        "--env_name=user_envs:make_failing",
        # Step 150 comes after the 100-step warm-up, in the actor. The evaluator plays
        # one 100-step episode per evaluation and runs its second only at train step
        # 200, so it cannot meet the failure first.
        """--env_kwargs={"at": 150}""",
        *TINY_RUN_FLAGS,
        timeout_s=DEADLINE_S,
        cwd=TESTS_DIR,
    )
    out = launched.stdout + launched.stderr
    assert launched.returncode == 1, out[-4000:]
    assert "actor_0 exited with code 2" in out
    assert "user_envs:make_failing raised ValueError at step 150: solver diverged" in out
    # The other jobs were stopped in order: the server wrote what the actor had sent.
    assert "Replay checkpoint written" in (root / "logs" / "server.log").read_text()
    assert "Traceback" not in (root / "logs" / "actor_0.log").read_text()


def test_a_dict_observation_env_with_a_camera_trains_and_its_exported_policy_plays(tmp_path):
    """A Dict of a camera, vectors and a Discrete part trains through sac-launch as one
    flattened vector, says so, and sac-evaluate plays the exported greedy policy."""
    root = tmp_path / "dict"
    kwargs = '--env_kwargs={"camera": true}'
    launched = run(
        "launch",
        f"--root_dir={root}",
        "--env_name=user_envs:make_dict_goal",
        kwargs,
        *TINY_RUN_FLAGS,
        timeout_s=DEADLINE_S,
        cwd=TESTS_DIR,
    )
    out = launched.stdout + launched.stderr
    assert launched.returncode == 0, out[-4000:]
    assert (
        "sac-launch: observations (camera: image 1x8x8 uint8 (channels-first), goal: "
        "float32[1], position: float32[1], velocity_sign: Discrete as 3 one-hot floats): "
        "one flat vector of 69 floats; images inside a Dict or Tuple are flattened" in out
    )
    results = (root / "eval" / "results.csv").read_text().splitlines()
    assert len(results) >= 2, results  # a header and at least one evaluation
    evaluated = run(
        "evaluate",
        f"--policy_dir={root}",
        "--num_episodes=2",
        timeout_s=DEADLINE_S,
        cwd=str(tmp_path),  # not TESTS_DIR: run_info says where user_envs came from
    )
    assert evaluated.returncode == 0, (evaluated.stdout + evaluated.stderr)[-4000:]
    assert "2 episodes" in evaluated.stdout, evaluated.stdout
