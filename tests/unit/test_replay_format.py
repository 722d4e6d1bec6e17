"""transitions_per_item (K): config checks, table sizes in items, writer counting,
the learner's dataset and the jobs' start-up refusals (the row layout: test_replay_layout.py)."""

import dataclasses
import os
import threading

import numpy as np
import pytest
import tensorflow as tf
from support.training import (
    ENV_NAME,
    learner_config,
    random_transitions,
    small_hparams,
    wait_for_size,
)

from sac_distributed import config as config_lib
from sac_distributed import jobs, paths, replay
from sac_distributed.errors import ConfigError, SignatureMismatchError

K = 4


@pytest.fixture
def k_server(new_server):
    """A server whose replay items hold K transitions (capacity 2000, warm-up 64)."""
    server = new_server(small_hparams(transitions_per_item=K))
    yield server
    server.stop()


# --- config ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"transitions_per_item": 0}, r"transitions_per_item must be a positive integer, got 0"),
        ({"transitions_per_item": 2.5}, r"transitions_per_item must be a positive integer"),
        ({"transitions_per_item": "8"}, r"transitions_per_item must be a positive integer"),
        (
            {"transitions_per_item": 3},
            r"batch_size \(32\) must be a multiple of transitions_per_item \(3\)",
        ),
        (
            # 60 // 32 = 1 whole item, but the learner waits for ceil(60 / 32) = 2.
            {"transitions_per_item": 32, "replay_buffer_capacity": 60, "initial_collect_steps": 60},
            r"replay_buffer_capacity \(60\) holds 1 items of 32 transitions, fewer than the 2",
        ),
    ],
)
def test_bad_transitions_per_item_is_a_config_error(overrides, message):
    with pytest.raises(ConfigError, match=message):
        small_hparams(**overrides)


def test_sizes_in_items_and_presets():
    hp = small_hparams(transitions_per_item=K)
    assert hp.replay_capacity_items == 2000 // K
    assert hp.min_replay_size == 64 and hp.min_replay_items == 64 // K
    # Rounded up: the learner never samples before min_replay_size transitions are in.
    assert dataclasses.replace(hp, initial_collect_steps=66).min_replay_items == 17
    # The locomotion presets store 8 transitions per item (the 1 GiB memory target);
    # the small-table presets keep one.
    for name in (
        "HalfCheetahBulletEnv-v0",
        "AntBulletEnv-v0",
        "HopperBulletEnv-v0",
        "Walker2DBulletEnv-v0",
    ):
        preset = config_lib.PRESETS[name]
        assert preset.transitions_per_item == 8
        assert preset.batch_size % 8 == 0 and preset.replay_capacity_items == 125_000
    for name in ("Pendulum-v1", "InvertedPendulumBulletEnv-v0", "MinitaurBulletEnv-v0"):
        assert config_lib.PRESETS[name].transitions_per_item == 1
    assert config_lib.GENERIC_PRESET.transitions_per_item == 1


def test_replay_table_sizes_are_items(k_server):
    info = replay.table_info(k_server.localhost_client(), replay.REPLAY_TABLE)
    assert info.max_size == 2000 // K
    assert info.rate_limiter_info.min_size_to_sample == 64 // K
    assert replay.transitions_per_item_of(info.signature) == K


def test_error_buffer_is_converted_to_items_above_reverbs_floor(root_dir):
    hp = small_hparams(transitions_per_item=K, samples_per_insert=2.0)
    config = config_lib.ServerConfig("Pendulum-v1", hp, root_dir)
    limiter = replay.make_rate_limiter(config)
    assert limiter._max_diff - limiter._min_diff == pytest.approx(2 * config.error_buffer / K)
    tiny = config_lib.ServerConfig("Pendulum-v1", hp, root_dir, samples_per_insert_error_buffer=2)
    limiter = replay.make_rate_limiter(tiny)
    assert limiter._max_diff - limiter._min_diff == pytest.approx(2 * 2.0)  # floor: max(1, 2)


# --- the writer ------------------------------------------------------------------------


def test_writer_counts_transitions_and_drops_a_partial_item(k_server, env_specs):
    client = k_server.localhost_client()
    writer = replay.TransitionWriter(client)
    assert writer.transitions_per_item == K
    transitions = random_transitions(env_specs, 5 * K + 3)
    for transition in transitions:
        writer.write(transition)
        assert writer.throttle(timeout_ms=300_000)
    assert writer.items_written == 5 * K  # complete items only
    # The last 3 rows never fill an item: close() drops and reports them.
    assert writer.close() == 3
    assert writer.transitions_incomplete == 3 and writer.transitions_unconfirmed == 0
    assert writer.items_written == writer.transitions_written == 5 * K
    info = replay.table_info(client, replay.REPLAY_TABLE)
    assert info.current_size == 5
    assert info.current_size * K == writer.items_written
    assert replay.stored_transitions(info) == 5 * K
    assert writer.close() == 0  # closing twice is harmless


def test_close_without_waiting_returns_at_once_from_a_closed_rate_limiter(new_server, env_specs):
    """With no sampler, a ratio limiter admits nothing past its buffer; close(0) must
    drop what it holds, not wait (Reverb reads timeout 0 as "no limit")."""
    server = new_server(small_hparams(samples_per_insert=4.0))
    try:
        client = server.localhost_client()
        writer = replay.TransitionWriter(client)
        for transition in random_transitions(env_specs, 400):
            writer.write(transition)
            if not writer.throttle(timeout_ms=200):
                break  # the limiter stopped admitting inserts
        result = {}
        closer = threading.Thread(
            target=lambda: result.update(dropped=writer.close(timeout_ms=0)), daemon=True
        )
        closer.start()
        closer.join(timeout=300.0)  # a regression would block forever: fail instead
        assert not closer.is_alive(), "close(timeout_ms=0) blocked on the rate limiter"
        assert result["dropped"] > 0
        stored = replay.stored_transitions(replay.table_info(client, replay.REPLAY_TABLE))
        assert writer.transitions_written == stored  # counts only what landed
        # What the limiter held back was sent but never acknowledged: unconfirmed.
        assert writer.transitions_unconfirmed == result["dropped"] - writer.transitions_incomplete
        assert writer.transitions_unconfirmed > 0
    finally:
        server.stop()


def test_writer_rows_land_in_write_order(new_server, env_specs):
    """write_rows (a batched actor's rows, with a mask) fills items in write order."""
    # One item is enough for the rate limiter to allow sampling.
    server = new_server(
        small_hparams(transitions_per_item=K, batch_size=K, initial_collect_steps=0)
    )
    client = server.localhost_client()
    layout = replay.row_layout(env_specs)
    fields = {
        name: np.stack([t[name] for t in random_transitions(env_specs, 12)])
        for name in replay.TRANSITION_FIELDS
    }
    rows = layout.pack(*(fields[name] for name in replay.TRANSITION_FIELDS))
    mask = np.ones(12, bool)
    mask[[2, 7, 9, 10]] = False  # e.g. non-finite steps, dropped by the actor
    writer = replay.TransitionWriter(client, transitions_per_item=K)
    writer.write_rows(rows, mask)
    assert writer.close() == 0
    assert writer.items_written == 8
    wait_for_size(client, replay.REPLAY_TABLE, 2)
    sampled = {
        tuple(tf.nest.flatten(s.data)[0][:, -1])  # next_observation's last float
        for s in client.sample(replay.REPLAY_TABLE, num_samples=50, emit_timesteps=False)
    }
    kept = rows[mask]
    assert sampled == {tuple(kept[:K, -1]), tuple(kept[K:, -1])}
    server.stop()


def test_writer_refuses_another_k_than_the_tables(k_server):
    with pytest.raises(SignatureMismatchError, match="--transitions_per_item"):
        replay.TransitionWriter(k_server.localhost_client(), transitions_per_item=K * 2)


def _refusal(run, config) -> str:
    """The one-line message a job refused at start-up raises."""
    with pytest.raises(SignatureMismatchError) as raised:
        run(config, lambda: False)
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_a_learner_with_another_k_than_the_servers_is_refused_at_start_up(k_server, tmp_path):
    root = str(tmp_path)
    config = learner_config(root, f"localhost:{k_server.port}", {"transitions_per_item": 1})
    message = _refusal(jobs.run_learner, config)
    assert message.startswith("The learner runs with transitions_per_item=1, ")
    assert f"table 'uniform_table' stores {K} transitions per item" in message
    assert f"--transitions_per_item={K}" in message
    assert not os.path.exists(paths.run_info_path(root))  # refused before writing anything


def test_a_learner_with_the_servers_k_trains(k_server, write_replay, tmp_path):
    """The counterpart of the refusal: the same K as the table passes every check."""
    write_replay(k_server.localhost_client(), 128)
    config = learner_config(
        str(tmp_path), f"localhost:{k_server.port}", {"transitions_per_item": K}
    )
    result = jobs.run_learner(config, lambda: False)
    assert (result.train_step, result.stop_reason) == (20, "num_iterations reached")


def test_an_evaluator_with_another_k_than_the_servers_is_refused_at_start_up(k_server, tmp_path):
    address = f"localhost:{k_server.port}"
    config = config_lib.EvaluatorConfig(
        ENV_NAME,
        small_hparams(transitions_per_item=2 * K),
        str(tmp_path),
        client=config_lib.ClientConfig(address, address, connect_timeout_s=10),
    )
    message = _refusal(jobs.run_evaluator, config)
    assert message.startswith(f"The evaluator runs with transitions_per_item={2 * K}, ")
    assert f"stores {K} transitions per item" in message
    assert not os.path.exists(paths.results_path(str(tmp_path)))


def test_the_learners_dataset_checks_k_against_the_table(k_server, env_specs):
    address = f"localhost:{k_server.port}"
    with pytest.raises(SignatureMismatchError, match=f"stores {K} transitions per item"):
        replay.make_dataset(address, env_specs, 32, transitions_per_item=2)
    assert replay.make_dataset(address, env_specs, 32, transitions_per_item=K) is not None


def test_wait_for_table_size_counts_items(k_server, write_replay):
    client = k_server.localhost_client()
    write_replay(client, 2 * K)
    stop_after = iter([False, True])
    assert replay.wait_for_table_size(client, replay.REPLAY_TABLE, 2, lambda: False)
    assert not replay.wait_for_table_size(client, replay.REPLAY_TABLE, 3, lambda: next(stop_after))
    # What the learner waits for: min_replay_size transitions, in whole items.
    assert small_hparams(transitions_per_item=K, initial_collect_steps=2 * K).min_replay_items == 8


def test_make_dataset_rejects_a_batch_that_is_not_whole_items(k_server, env_specs):
    with pytest.raises(ValueError, match="not a multiple"):
        replay.make_dataset(f"localhost:{k_server.port}", env_specs, K + 1)
