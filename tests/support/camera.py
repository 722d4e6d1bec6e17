"""Helpers of the camera tests: small pixel hyperparameters, a real Reverb server
with the pixel replay's tables, a rollout of random actions and random learner
batches."""

import numpy as np
import reverb
import tensorflow as tf
from tf_agents.policies import greedy_policy
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts

from sac_distributed import config as config_lib
from sac_distributed import replay
from sac_distributed.algorithm.pixel_policy import make_acting_policy
from sac_distributed.envs import loader
from support.repo import EXAMPLES_DIR
from support.training import small_hparams

CAMERA = "pointmass:make_env"


def pixel_hparams(**overrides):
    return small_hparams(
        **{"initial_collect_steps": 8, "batch_size": 8, "frame_stack": 3, **overrides}
    )


def pointmass_camera(**env_kwargs):
    """The example point mass seen as 16x16 RGB frames, stacked 3, and its specs."""
    env = loader.load_env(
        CAMERA,
        seed=0,
        env_kwargs={"pixels": True, "image_size": 16, **env_kwargs},
        module_dirs=(EXAMPLES_DIR,),
        frame_stack=3,
    )
    return env, loader.env_specs(env)


def learner_hparams(**changes):
    """A small pixel learner's: batches of 8, 16x16 actor and critic MLPs."""
    return config_lib.Hyperparams(
        batch_size=8,
        initial_collect_steps=8,
        actor_fc_layer_params=(16, 16),
        critic_joint_fc_layer_params=(16, 16),
        **changes,
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


def assert_numpy_actor_acts_as_the_tf_policy(learner, specs, hparams, env):
    """The actors' NumPy policy on the learner's weights takes the exported TF policy's
    greedy action on one of `env`'s observations."""
    policy = make_acting_policy(specs, hparams, seed=0)
    policy.set_weights(learner.variables().policy_weights)
    observation = env.reset().observation
    greedy = greedy_policy.GreedyPolicy(learner.policy)
    want = greedy.action(ts.restart(tf.constant(observation[None]), batch_size=1)).action
    np.testing.assert_allclose(policy.action(observation[None], greedy=True), want, atol=1e-5)
