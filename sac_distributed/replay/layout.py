"""The replay row layout: one transition as one flat float32 row.

Each transition (s, a, r, discount, s') is one row [observation, action,
reward, discount, next_observation]; `RowLayout` packs and unpacks rows and
reads and replaces the n-step fields (reward, discount, next observation), so
the actor, the n-step accumulator and the learner's dataset do no arithmetic
on rows of their own. A new row format is a change here.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Dict, Mapping, Sequence

import numpy as np
import tensorflow as tf

from sac_distributed.envs.specs import EnvSpecs

# The fields of one transition, in the order they are packed into a replay row.
OBSERVATION = "observation"
ACTION = "action"
REWARD = "reward"
DISCOUNT = "discount"
NEXT_OBSERVATION = "next_observation"
TRANSITION_FIELDS = (OBSERVATION, ACTION, REWARD, DISCOUNT, NEXT_OBSERVATION)
# The single column of a replay item: [transitions_per_item, row width] float32.
TRANSITIONS = "transitions"
# How a replay signature's name starts when it records the row layout (`describe`).
ROWS_OF = "rows of "


@dataclasses.dataclass(frozen=True)
class RowLayout:
    """Where each field of a transition sits in its flat float32 replay row.

    A row is [observation (flattened), action (flattened), reward, discount,
    next_observation (flattened)], all float32; observations of another dtype
    are cast for storage and cast back by `to_transition`. Everything that
    reads or writes single fields of a row (the actor, the n-step accumulator,
    the learner's dataset) goes through this class, so a new row format is a
    change here and nowhere else.
    """

    observation_shape: tuple
    observation_dtype: tf.dtypes.DType
    action_shape: tuple
    action_dtype: tf.dtypes.DType

    @functools.cached_property
    def observation_size(self) -> int:
        return int(np.prod(self.observation_shape, dtype=np.int64))

    @functools.cached_property
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

    @functools.cached_property
    def _reward_index(self) -> int:
        return self.observation_size + self.action_size

    def describe(self) -> str:
        """E.g. 'rows of (observation: float32[3], action: float32[1], reward, ...)'."""
        obs = f"{self.observation_dtype.name}{list(self.observation_shape)}"
        act = f"{self.action_dtype.name}{list(self.action_shape)}"
        return (
            f"{ROWS_OF}(observation: {obs}, action: {act}, reward: float32[], "
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

    # The n-step fields: what an n-step transition replaces in its first step's row.

    def reward(self, row: np.ndarray) -> float:
        """The reward of one row."""
        return float(row[self._reward_index])

    def discount(self, row: np.ndarray) -> float:
        """The discount of one row."""
        return float(row[self._reward_index + 1])

    def next_observations(self, rows: np.ndarray) -> np.ndarray:
        """The flat next observations of rows [..., width], as a view (no copy)."""
        return rows[..., self._reward_index + 2 :]

    def with_n_step_fields(
        self, row: np.ndarray, reward: float, discount: float, next_observation: np.ndarray
    ) -> np.ndarray:
        """A copy of `row` whose reward, discount and next observation are replaced."""
        out = np.array(row, dtype=np.float32, copy=True)
        out[self._reward_index] = reward
        out[self._reward_index + 1] = discount
        out[self._reward_index + 2 :] = np.ravel(next_observation)
        return out


def row_layout(specs: EnvSpecs) -> RowLayout:
    """The replay row layout of `specs`' environment."""
    return RowLayout(
        observation_shape=tuple(specs.observation.shape.as_list()),
        observation_dtype=tf.as_dtype(specs.observation.dtype),
        action_shape=tuple(specs.action.shape.as_list()),
        action_dtype=tf.as_dtype(specs.action.dtype),
    )


def pack_row(observation, action, reward, discount, next_observation) -> np.ndarray:
    """One transition as its flat float32 row (the layout's order needs no specs)."""
    return np.concatenate(
        (
            np.ravel(observation),
            np.ravel(action),
            (reward, discount),
            np.ravel(next_observation),
        ),
        dtype=np.float32,
    )


def pack_transition(transition: Mapping[str, np.ndarray]) -> np.ndarray:
    """One transition dict (keys `TRANSITION_FIELDS`) as its flat float32 row."""
    return pack_row(*(transition[name] for name in TRANSITION_FIELDS))
