"""Environments, their specs, and the Reverb table signatures derived from them.

The server builds both signatures from the environment name and the network
sizes alone, so it can start before (or without) any learner. Actors and the
learner derive the same signatures from the same config and check them
against the server's tables before writing or reading.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf
import tree
from tf_agents.environments import py_environment, wrappers
from tf_agents.specs import tensor_spec

from sac_distributed.agent import EnvSpecs, policy_variable_specs
from sac_distributed.config import Hyperparams
from sac_distributed.errors import EnvError

# The fields of one transition, in the order they are packed into a replay row.
OBSERVATION = "observation"
ACTION = "action"
REWARD = "reward"
DISCOUNT = "discount"
NEXT_OBSERVATION = "next_observation"
TRANSITION_FIELDS = (OBSERVATION, ACTION, REWARD, DISCOUNT, NEXT_OBSERVATION)
# The single column of a replay item: [transitions_per_item, row width] float32.
TRANSITIONS = "transitions"
_ROWS_OF = "rows of "

# Fields of the single item in the variable container table.
POLICY_VARIABLES = "policy_variables"
TRAIN_STEP = "train_step"
LEARNER_DONE = "learner_done"
# The learner's observation statistics; clip is inf when it does not normalize.
OBSERVATION_MEAN = "observation_mean"
OBSERVATION_STD = "observation_std"
OBSERVATION_CLIP = "observation_clip"


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


@dataclasses.dataclass(frozen=True)
class RowLayout:
    """Where each field of a transition sits in its flat float32 replay row.

    A row is [observation (flattened), action (flattened), reward, discount,
    next_observation (flattened)], all float32; observations of another dtype
    are cast for storage and cast back by `replay.to_transition`.
    """

    observation_shape: tuple
    observation_dtype: tf.dtypes.DType
    action_shape: tuple
    action_dtype: tf.dtypes.DType

    @property
    def observation_size(self) -> int:
        return int(np.prod(self.observation_shape, dtype=np.int64))

    @property
    def action_size(self) -> int:
        return int(np.prod(self.action_shape, dtype=np.int64))

    @property
    def width(self) -> int:
        """Floats per row."""
        return 2 * self.observation_size + self.action_size + 2

    @property
    def split_sizes(self) -> Sequence[int]:
        """Sizes of (observation, action, reward, discount, next_observation) in a row."""
        o = self.observation_size
        return (o, self.action_size, 1, 1, o)

    def describe(self) -> str:
        """E.g. 'rows of (observation: float32[3], action: float32[1], reward, ...)'."""
        obs = f"{self.observation_dtype.name}{list(self.observation_shape)}"
        act = f"{self.action_dtype.name}{list(self.action_shape)}"
        return (
            f"{_ROWS_OF}(observation: {obs}, action: {act}, reward: float32[], "
            f"discount: float32[], next_observation: {obs})"
        )

    def pack(self, observation, action, reward, discount, next_observation) -> np.ndarray:
        """Rows [N, width] from N transitions given field by field (leading dim N)."""
        n = len(reward)
        return np.concatenate(
            [
                np.reshape(observation, (n, -1)),
                np.reshape(action, (n, -1)),
                np.reshape(reward, (n, 1)),
                np.reshape(discount, (n, 1)),
                np.reshape(next_observation, (n, -1)),
            ],
            axis=1,
            dtype=np.float32,
        )

    def unpack(self, rows: np.ndarray) -> Dict[str, np.ndarray]:
        """The inverse of `pack`: fields with their env shapes and dtypes."""
        rows = np.asarray(rows)
        n = rows.shape[0]
        obs, act, reward, discount, next_obs = np.split(
            rows, np.cumsum(self.split_sizes)[:-1], axis=1
        )
        obs_dtype, act_dtype = (
            self.observation_dtype.as_numpy_dtype,
            self.action_dtype.as_numpy_dtype,
        )
        return {
            OBSERVATION: obs.reshape((n,) + self.observation_shape).astype(obs_dtype),
            ACTION: act.reshape((n,) + self.action_shape).astype(act_dtype),
            REWARD: reward[:, 0],
            DISCOUNT: discount[:, 0],
            NEXT_OBSERVATION: next_obs.reshape((n,) + self.observation_shape).astype(obs_dtype),
        }


def row_layout(specs: EnvSpecs) -> RowLayout:
    """The replay row layout of `specs`' environment."""
    return RowLayout(
        observation_shape=tuple(specs.observation.shape.as_list()),
        observation_dtype=tf.as_dtype(specs.observation.dtype),
        action_shape=tuple(specs.action.shape.as_list()),
        action_dtype=tf.as_dtype(specs.action.dtype),
    )


def pack_transition(transition: Dict[str, np.ndarray]) -> np.ndarray:
    """One transition dict as its flat float32 row (the layout needs no specs)."""
    return np.concatenate(
        [
            np.ravel(transition[OBSERVATION]),
            np.ravel(transition[ACTION]),
            (transition[REWARD], transition[DISCOUNT]),
            np.ravel(transition[NEXT_OBSERVATION]),
        ],
        dtype=np.float32,
    )


def transition_signature(
    specs: EnvSpecs, transitions_per_item: Optional[int] = None
) -> Dict[str, tf.TensorSpec]:
    """Signature of one replay item: K consecutive transitions as flat float32 rows.

    With `transitions_per_item=None` the leading dimension is left unknown: a
    signature that `signatures_match` accepts for a table of any K.
    """
    layout = row_layout(specs)
    shape = (transitions_per_item, layout.width)
    # The name (kept by the server) records the layout for error messages.
    return {TRANSITIONS: tf.TensorSpec(shape, tf.float32, layout.describe())}


def transitions_per_item_of(signature: object) -> int:
    """K of a replay table signature; 1 for tables without a transitions column."""
    if isinstance(signature, dict) and TRANSITIONS in signature:
        k = signature[TRANSITIONS].shape[0]
        if k is not None:
            return int(k)
    return 1


def variable_signature(specs: EnvSpecs, hparams: Hyperparams) -> Dict[str, object]:
    """Signature of the variable container item: policy weights, train_step, done
    flag and observation statistics (present whether or not the learner
    normalizes, so actors need not know; only the learner's setting counts)."""
    policy = tuple(
        tf.TensorSpec(s.shape, s.dtype, f"{POLICY_VARIABLES}_{i}")
        for i, s in enumerate(policy_variable_specs(specs, hparams))
    )
    observation_shape = specs.observation.shape
    return {
        POLICY_VARIABLES: policy,
        TRAIN_STEP: tf.TensorSpec((), tf.int64, TRAIN_STEP),
        LEARNER_DONE: tf.TensorSpec((), tf.bool, LEARNER_DONE),
        OBSERVATION_MEAN: tf.TensorSpec(observation_shape, tf.float32, OBSERVATION_MEAN),
        OBSERVATION_STD: tf.TensorSpec(observation_shape, tf.float32, OBSERVATION_STD),
        OBSERVATION_CLIP: tf.TensorSpec((), tf.float32, OBSERVATION_CLIP),
    }


def describe_signature(signature: object) -> str:
    """A compact, readable form of a signature for error messages."""
    flat = tree.flatten_with_path(signature)
    parts = [
        f"{'/'.join(str(p) for p in path)}: {spec.dtype.name}{list(spec.shape)}"
        + (f" {spec.name}" if (spec.name or "").startswith(_ROWS_OF) else "")
        for path, spec in flat
    ]
    return "{" + ", ".join(parts) + "}"


def signatures_match(expected: object, actual: object) -> bool:
    """True when both signatures have the same structure, shapes and dtypes.

    A dimension `expected` leaves unknown (None) matches any size.
    """
    try:
        tf.nest.assert_same_structure(expected, actual)
    except (ValueError, TypeError):
        return False
    pairs = zip(tf.nest.flatten(expected), tf.nest.flatten(actual))
    return all(_shape_matches(a.shape, b.shape) and a.dtype == b.dtype for a, b in pairs)


def _shape_matches(expected: tf.TensorShape, actual: tf.TensorShape) -> bool:
    if expected.rank is None or actual.rank is None or expected.rank != actual.rank:
        return expected.rank == actual.rank
    return all(e is None or e == a for e, a in zip(expected.as_list(), actual.as_list()))
