"""The replay module's public API: the row layout's fields (n-step ones included),
counts in transitions, and the start-up check of a job against the server's tables."""

import time

import numpy as np
import pytest
import reverb
import tensorflow as tf
from conftest import small_hparams

from sac_distributed import replay
from sac_distributed.errors import SignatureMismatchError

K = 4
DEADLINE_S = 60.0


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


# --- the row layout --------------------------------------------------------------------


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


# --- counts in transitions -------------------------------------------------------------


def _poll_counts(client: reverb.Client, until) -> replay.TransitionCounts:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        counts = replay.transition_counts(replay.table_info(client, replay.REPLAY_TABLE))
        if until(counts):
            return counts
        assert time.monotonic() < deadline, f"counts stayed at {counts} for {DEADLINE_S} s"
        time.sleep(0.05)


def test_transition_counts_are_items_times_the_tables_k(new_server, write_replay):
    server = new_server(small_hparams(transitions_per_item=K))
    try:
        client = server.localhost_client()
        write_replay(client, 64)  # 16 items: the warm-up the rate limiter waits for
        assert _poll_counts(client, lambda c: c.inserted == 64) == (64, 64, 0)
        samples = list(client.sample(replay.REPLAY_TABLE, num_samples=2))
        assert len(samples) == 2
        counts = _poll_counts(client, lambda c: c.sampled == 2 * K)
        assert counts == replay.TransitionCounts(stored=64, inserted=64, sampled=2 * K)
    finally:
        server.stop()


# --- the start-up check ----------------------------------------------------------------


def _check(server: reverb.Server, env_specs, **hparams) -> None:
    client = server.localhost_client()
    replay.check_server_tables(client, client, env_specs, small_hparams(**hparams), "actor 0")


def test_a_job_built_like_the_server_passes_the_check(reverb_server, env_specs):
    _check(reverb_server, env_specs)  # raises if it does not


def test_an_actor_with_other_network_sizes_is_refused_naming_both(reverb_server, env_specs):
    with pytest.raises(SignatureMismatchError) as raised:
        _check(reverb_server, env_specs, actor_fc_layer_params=(32, 32))
    message = str(raised.value)
    assert "The actor 0's policy variable spec" in message
    assert replay.VARIABLE_TABLE in message
    assert "float32[3, 32]" in message  # the actor's first layer
    assert "float32[3, 16]" in message  # the server's
    assert "actor_fc_layer_params" in message


def test_an_actor_with_another_k_is_refused_naming_both(reverb_server, env_specs):
    with pytest.raises(SignatureMismatchError) as raised:
        _check(reverb_server, env_specs, transitions_per_item=K)
    message = str(raised.value)
    assert f"The actor 0 runs with transitions_per_item={K}" in message
    assert "stores 1 transitions per item" in message
    assert "--transitions_per_item=1" in message
