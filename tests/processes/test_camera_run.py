"""A camera env trained end to end by sac-launch with real processes: the example
point mass seen as 32x32 RGB frames (examples/pointmass.py, pixels=true), alone,
and in a Dict with a second (wrist) camera beside the mass's velocity, goes
through the pixel path (stacked uint8 frames, each stored once, a conv encoder
per camera; the Dict run with 3-step returns), and its exported greedy policy
plays the env's own uint8 observations, in sac-evaluate (with a video) and in
stock TF-Agents."""

import json
import os

import numpy as np
import pytest
from support.processes import DEADLINE_S, TINY_RUN_FLAGS, TINY_RUN_ITERATIONS, run
from support.repo import EXAMPLES_DIR

from sac_distributed.envs import loader

pytestmark = pytest.mark.slow

# The camera alone, and two cameras beside the mass's velocity (a Dict observation,
# trained on 3-step returns): env kwargs, what the launcher says, further flags.
CAMERAS = {
    "camera": ('{"pixels": true, "max_episode_steps": 50}', "observations image 32x32x3", ()),
    "cameras_and_state": (
        '{"pixels": true, "velocity": true, "wrist": true, "max_episode_steps": 50}',
        "as one state vector beside their features",
        ("--n_step=3",),
    ),
}


@pytest.mark.parametrize("kind", sorted(CAMERAS))
def test_a_camera_env_trains_through_sac_launch_and_its_policy_plays_pixels(tmp_path, kind):
    kwargs, said, flags = CAMERAS[kind]
    root = tmp_path / "camera"
    launched = run(
        "launch",
        f"--root_dir={root}",
        "--env_name=pointmass:make_env",
        f"--env_kwargs={kwargs}",
        *TINY_RUN_FLAGS,
        "--samples_per_insert=32",
        *flags,
        timeout_s=DEADLINE_S,
        cwd=EXAMPLES_DIR,
    )
    out = launched.stdout + launched.stderr
    assert launched.returncode == 0, out[-4000:]
    assert said in out and "trained from pixels" in out
    assert "every job exited 0" in out
    results = (root / "eval" / "results.csv").read_text().splitlines()
    assert len(results) >= 2, results  # a header and at least one evaluation
    learner_log = (root / "logs" / "learner.log").read_text()
    assert f"Learner stopped at train_step {TINY_RUN_ITERATIONS}" in learner_log

    video = tmp_path / "camera.gif"
    evaluated = run(
        "evaluate",
        f"--policy_dir={root}",
        "--num_episodes=2",
        f"--video={video}",
        timeout_s=DEADLINE_S,
        cwd=str(tmp_path),  # run_info says where the example module came from
    )
    assert evaluated.returncode == 0, (evaluated.stdout + evaluated.stderr)[-4000:]
    assert "2 episodes" in evaluated.stdout, evaluated.stdout
    assert video.stat().st_size > 0

    from tf_agents.policies import py_tf_eager_policy

    policy = py_tf_eager_policy.SavedModelPyTFEagerPolicy(
        os.path.join(root, "policies", "greedy_policy"), load_specs_from_pbtxt=True
    )
    env = loader.load_env(
        "pointmass:make_env",
        seed=0,
        env_kwargs=json.loads(kwargs),
        module_dirs=(EXAMPLES_DIR,),
        frame_stack=3,
    )
    time_step = env.reset()
    pixels = time_step.observation
    want = policy.time_step_spec.observation
    if kind == "cameras_and_state":  # the export takes the env's {"pixels", "state"}
        pixels = pixels["pixels"]
        assert set(want) == {"pixels", "state"} and want["state"].shape == (2,)
        want = want["pixels"]
        assert want.shape == (32, 32, 12)  # 3 frames of the top view's 3 and the wrist's 1
    assert pixels.dtype == np.uint8 and want.dtype == np.uint8
    action = policy.action(time_step).action
    assert action.shape == (2,) and np.all(np.abs(action) <= 1.0)
