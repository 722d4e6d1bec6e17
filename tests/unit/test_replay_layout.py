"""replay/layout.py: the row layout's fields (n-step ones included), packing and
unpacking, and observations of other dtypes stored as float32 and cast back."""

import numpy as np
import tensorflow as tf
from support.training import random_transitions

from sac_distributed import replay


def _layout() -> replay.RowLayout:
    """Observations [2, 3] float32 and actions [2]: every field has its own width."""
    return replay.RowLayout((2, 3), tf.float32, (2,), tf.float32)


def _fields(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(n, 2, 3)).astype(np.float32),
        rng.uniform(-1, 1, (n, 2)).astype(np.float32),
        rng.normal(size=n).astype(np.float32),
        rng.choice([0.0, 1.0], n).astype(np.float32),
        rng.normal(size=(n, 2, 3)).astype(np.float32),
    )


def test_the_layout_reads_each_rows_reward_discount_and_next_observation():
    layout = _layout()
    observation, action, reward, discount, next_observation = _fields(5)
    rows = layout.pack(observation, action, reward, discount, next_observation)
    for i, row in enumerate(rows):
        assert layout.reward(row) == reward[i]
        assert layout.discount(row) == discount[i]
    np.testing.assert_array_equal(layout.next_observations(rows), next_observation.reshape(5, -1))
    # A view: the actor takes the next observations from the rows it wrote, without a copy.
    assert np.shares_memory(layout.next_observations(rows), rows)


def test_with_n_step_fields_replaces_exactly_those_in_a_copy():
    layout = _layout()
    rows = layout.pack(*_fields(2))
    new_next = np.full((2, 3), 7.0, np.float32)
    out = layout.with_n_step_fields(rows[0], reward=1.5, discount=0.25, next_observation=new_next)
    before, after = layout.unpack(rows[:1]), layout.unpack(out[np.newaxis])
    np.testing.assert_array_equal(after[replay.OBSERVATION], before[replay.OBSERVATION])
    np.testing.assert_array_equal(after[replay.ACTION], before[replay.ACTION])
    assert after[replay.REWARD][0] == 1.5 and after[replay.DISCOUNT][0] == 0.25
    np.testing.assert_array_equal(after[replay.NEXT_OBSERVATION][0], new_next)
    assert not np.shares_memory(out, rows)
    np.testing.assert_array_equal(rows, layout.pack(*_fields(2)))  # the input is unchanged


def test_pack_row_and_pack_transition_give_the_rows_of_pack():
    layout = _layout()
    fields = _fields(3, seed=1)
    rows = layout.pack(*fields)
    for i in range(3):
        one = [field[i] for field in fields]
        row = replay.pack_row(*one)
        assert row.dtype == np.float32 and row.shape == (layout.width,)
        np.testing.assert_array_equal(row, rows[i])
        transition = dict(zip(replay.TRANSITION_FIELDS, one))
        np.testing.assert_array_equal(replay.pack_transition(transition), rows[i])


def test_non_float32_observations_are_stored_as_float32_and_cast_back():
    layout = replay.RowLayout(
        observation_shape=(2, 3),
        observation_dtype=tf.uint8,
        action_shape=(2,),
        action_dtype=tf.float32,
    )
    assert layout.width == 2 * 6 + 2 + 2
    rng = np.random.default_rng(0)
    n = 6
    fields = {
        replay.OBSERVATION: rng.integers(0, 256, (n, 2, 3)).astype(np.uint8),
        replay.ACTION: rng.uniform(-1, 1, (n, 2)).astype(np.float32),
        replay.REWARD: rng.normal(size=n).astype(np.float32),
        replay.DISCOUNT: np.ones(n, np.float32),
        replay.NEXT_OBSERVATION: rng.integers(0, 256, (n, 2, 3)).astype(np.uint8),
    }
    rows = layout.pack(*(fields[name] for name in replay.TRANSITION_FIELDS))
    assert rows.dtype == np.float32 and rows.shape == (n, layout.width)
    for name, value in layout.unpack(rows).items():
        assert value.dtype == fields[name].dtype, name
        np.testing.assert_array_equal(value, fields[name])
    # What the learner gets: the env's shapes and dtypes again.
    items = tf.constant(rows.reshape(n // 2, 2, -1))
    time_step, action_step, next_time_step = replay.items_to_transition(items, layout)
    assert time_step.observation.dtype == tf.uint8
    assert time_step.observation.shape == (n, 2, 3)
    np.testing.assert_array_equal(time_step.observation.numpy(), fields[replay.OBSERVATION])
    np.testing.assert_array_equal(
        next_time_step.observation.numpy(), fields[replay.NEXT_OBSERVATION]
    )
    np.testing.assert_array_equal(action_step.action.numpy(), fields[replay.ACTION])
    np.testing.assert_array_equal(next_time_step.reward.numpy(), fields[replay.REWARD])


def test_pack_transition_matches_the_layout(env_specs):
    layout = replay.row_layout(env_specs)
    transitions = random_transitions(env_specs, 3)
    rows = np.stack([replay.pack_transition(t) for t in transitions])
    assert rows.shape == (3, layout.width) and rows.dtype == np.float32
    unpacked = layout.unpack(rows)
    for i, transition in enumerate(transitions):
        for name in replay.TRANSITION_FIELDS:
            np.testing.assert_array_equal(unpacked[name][i], transition[name])
