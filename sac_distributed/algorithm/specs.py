"""Environments and their tensor specs.

The replay row layout and the Reverb table signatures built from these specs
live in `replay`. The server builds them from the environment name and the
network sizes alone, so it can start before (or without) any learner.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import tensorflow as tf
from tf_agents.environments import py_environment, wrappers
from tf_agents.specs import tensor_spec

from sac_distributed.algorithm.agent import EnvSpecs
from sac_distributed.errors import EnvError


def load_env(env_name: str, seed: Optional[int] = None) -> py_environment.PyEnvironment:
    """Loads a pybullet env through suite_pybullet, anything else through suite_gym."""
    try:
        if "Bullet" in env_name:
            from tf_agents.environments import suite_pybullet

            env = suite_pybullet.load(env_name)
        else:
            from tf_agents.environments import suite_gym

            env = suite_gym.load(env_name)
    except Exception as e:  # gym raises several unrelated types for a bad id
        if _is_unknown_env_error(e):
            raise EnvError(
                f"Unknown environment {env_name!r}: gym has no such id ({e}). Use a gym id "
                "such as Pendulum-v1 or a pybullet id such as HalfCheetahBulletEnv-v0 "
                "(see sac_distributed.config.PRESETS for tuned ones)."
            ) from e
        raise
    env = TruncationKeepsDiscount(env)
    if seed is not None:
        env.seed(seed)
    return env


class TruncationKeepsDiscount(wrappers.PyEnvironmentBaseWrapper):
    """Gives a time-limit ending discount 1, so that critics bootstrap from it.

    gym's TimeLimit ends an episode with done=True, which TF-Agents' GymWrapper
    turns into discount 0, as if the state were terminal; a critic then learns
    that value runs out at step 200 (Pendulum) or 1000 (pybullet). gym marks
    such endings with info["TimeLimit.truncated"]; true terminations keep 0.
    """

    def _step(self, action):
        time_step = self._env.step(action)
        if time_step.is_last() and _truncated(self._env.get_info()):
            time_step = time_step._replace(discount=np.ones_like(time_step.discount))
        return time_step


def _truncated(info: object) -> bool:
    return isinstance(info, dict) and bool(info.get("TimeLimit.truncated", False))


def _is_unknown_env_error(error: Exception) -> bool:
    import gym

    return isinstance(error, gym.error.Error) or "registered" in str(error).lower()


def env_specs(env: py_environment.PyEnvironment, env_name: str = "") -> EnvSpecs:
    """Tensor specs of `env`, checked to be usable by SAC."""
    obs_spec = env.observation_spec()
    action_spec = env.action_spec()
    if tf.nest.is_nested(obs_spec) or tf.nest.is_nested(action_spec):
        raise EnvError(
            f"{env_name or 'The environment'} has nested observations or actions; "
            "sac_distributed supports one flat Box observation and one Box action."
        )
    if not np.issubdtype(action_spec.dtype, np.floating):
        raise EnvError(
            f"{env_name or 'The environment'} has discrete actions ({action_spec}); "
            "SAC here needs continuous (Box) actions."
        )
    return EnvSpecs(
        observation=tensor_spec.from_spec(obs_spec),
        action=tensor_spec.from_spec(action_spec),
        time_step=tensor_spec.from_spec(env.time_step_spec()),
    )


def specs_for(env_name: str) -> EnvSpecs:
    """Loads the env once to read its specs, then closes it."""
    env = load_env(env_name)
    try:
        return env_specs(env, env_name)
    finally:
        env.close()
