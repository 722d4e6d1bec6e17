"""Helpers of the camera tests: small pixel hyperparameters, a real Reverb server
with the pixel replay's tables, and a rollout of random actions."""

import numpy as np
import reverb

from sac_distributed import config as config_lib
from sac_distributed import replay
from support.training import small_hparams

CAMERA = "pointmass:make_env"


def pixel_hparams(**overrides):
    return small_hparams(
        **{"initial_collect_steps": 8, "batch_size": 8, "frame_stack": 3, **overrides}
    )


def pixel_server(specs, hparams, tmp_path):
    config = config_lib.ServerConfig(
        env_name=CAMERA, hparams=hparams, root_dir=str(tmp_path), port=0
    )
    return reverb.Server(replay.make_tables(config, specs), port=None)


def rollout(env, steps, seed=0):
    """(observation, action, reward, discount, next observation, last) per step."""
    rng = np.random.default_rng(seed)
    out = []
    observation = env.reset().observation
    for _ in range(steps):
        action = rng.uniform(-1, 1, 2).astype(np.float32)
        step = env.step(action)
        out.append((observation, action, step.reward, step.discount, step.observation))
        if step.is_last():
            observation = env.reset().observation
            out[-1] += (True,)
        else:
            observation = step.observation
            out[-1] += (False,)
    return out
