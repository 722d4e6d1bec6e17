"""Environments, their specs, and the Reverb table signatures derived from them.

The server builds both signatures from the environment name and the network
sizes alone, so it can start before (or without) any learner. Actors and the
learner derive the same signatures from the same config and check them
against the server's tables before writing or reading.
"""

from __future__ import annotations

import contextlib
import io
from typing import Dict, Optional

import numpy as np
import tensorflow as tf
import tree
from tf_agents.environments import py_environment
from tf_agents.specs import tensor_spec

from sac_distributed.agent import EnvSpecs, policy_variable_specs
from sac_distributed.config import Hyperparams
from sac_distributed.errors import EnvError

# Fields of one replay item: a single transition.
OBSERVATION = "observation"
ACTION = "action"
REWARD = "reward"
DISCOUNT = "discount"
NEXT_OBSERVATION = "next_observation"
TRANSITION_FIELDS = (OBSERVATION, ACTION, REWARD, DISCOUNT, NEXT_OBSERVATION)

# Fields of the single item in the variable container table.
POLICY_VARIABLES = "policy_variables"
TRAIN_STEP = "train_step"
LEARNER_DONE = "learner_done"


def load_env(env_name: str, seed: Optional[int] = None) -> py_environment.PyEnvironment:
    """Loads a pybullet env through suite_pybullet, anything else through suite_gym."""
    try:
        if "Bullet" in env_name:
            # pybullet prints its build time on stdout when imported; keep logs clean.
            with contextlib.redirect_stdout(io.StringIO()):
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
    if seed is not None:
        env.seed(seed)
    return env


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


def transition_signature(specs: EnvSpecs) -> Dict[str, tf.TensorSpec]:
    """Signature of one replay item: (s, a, r, discount, s')."""
    obs = tf.TensorSpec(specs.observation.shape, specs.observation.dtype, OBSERVATION)
    return {
        OBSERVATION: obs,
        ACTION: tf.TensorSpec(specs.action.shape, specs.action.dtype, ACTION),
        REWARD: tf.TensorSpec((), tf.float32, REWARD),
        DISCOUNT: tf.TensorSpec((), tf.float32, DISCOUNT),
        NEXT_OBSERVATION: tf.TensorSpec(obs.shape, obs.dtype, NEXT_OBSERVATION),
    }


def variable_signature(specs: EnvSpecs, hparams: Hyperparams) -> Dict[str, object]:
    """Signature of the variable container item: policy weights + train_step."""
    policy = tuple(
        tf.TensorSpec(s.shape, s.dtype, f"{POLICY_VARIABLES}_{i}")
        for i, s in enumerate(policy_variable_specs(specs, hparams))
    )
    return {
        POLICY_VARIABLES: policy,
        TRAIN_STEP: tf.TensorSpec((), tf.int64, TRAIN_STEP),
        LEARNER_DONE: tf.TensorSpec((), tf.bool, LEARNER_DONE),
    }


def describe_signature(signature: object) -> str:
    """A compact, readable form of a signature for error messages."""
    flat = tree.flatten_with_path(signature)
    parts = [
        f"{'/'.join(str(p) for p in path)}: {spec.dtype.name}{list(spec.shape)}"
        for path, spec in flat
    ]
    return "{" + ", ".join(parts) + "}"


def signatures_match(expected: object, actual: object) -> bool:
    """True when both signatures have the same structure, shapes and dtypes."""
    try:
        tf.nest.assert_same_structure(expected, actual)
    except (ValueError, TypeError):
        return False
    pairs = zip(tf.nest.flatten(expected), tf.nest.flatten(actual))
    return all(a.shape == b.shape and a.dtype == b.dtype for a, b in pairs)
