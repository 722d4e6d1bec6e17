"""Helpers of the camera tests: small pixel hyperparameters, a real Reverb server
with the pixel replay's tables, a rollout of random actions and random learner
batches."""

import numpy as np
import reverb
import tensorflow as tf
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts

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


def random_pixel_batches(specs, batch, seed=0):
    """Endless learner batches of random uint8 frames, 2-d actions and rewards."""
    rng = np.random.default_rng(seed)
    shape = (batch, *specs.observation.shape.as_list())
    mid = tf.fill([batch], ts.StepType.MID)
    while True:
        obs, next_obs = (tf.constant(rng.integers(0, 256, shape, dtype=np.uint8)) for _ in "ab")
        action = tf.constant(rng.uniform(-1, 1, (batch, 2)).astype(np.float32))
        reward = tf.constant(rng.normal(size=batch).astype(np.float32))
        yield trajectory.Transition(
            ts.TimeStep(mid, tf.zeros(batch), tf.ones(batch), obs),
            policy_step.PolicyStep(action, (), ()),
            ts.TimeStep(mid, reward, tf.ones(batch), next_obs),
        )
