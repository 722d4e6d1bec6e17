"""The replay sharded over several Reverb servers.

In-process servers built with `make_tables` for S shards check the per-shard
sizes, the batch split and `SampleInfo`, the shard-count check, and an
actor's move away from a dead home shard and back. One multi-process run
with the real binaries kills a shard mid-run and checks that the run goes on,
the shard comes back from its checkpoint, and every transition is accounted for.
"""

import os
import re
import signal
import threading
import time

import numpy as np
import portpicker
import pytest
import reverb
import tensorflow as tf
from conftest import ENV_NAME, random_transitions, small_hparams, wait_for_size
from proc_utils import DEADLINE_S, read, start, stop, wait_all, wait_for_log

from sac_distributed import config as config_lib
from sac_distributed import paths, replay
from sac_distributed import specs as specs_lib
from sac_distributed.actor_loop import ActorLoop
from sac_distributed.connection import Connection
from sac_distributed.errors import SignatureMismatchError
from sac_distributed.runtime import Metrics

POLL_S = 120.0  # generous: a deadline only stops a hang


def _shard_config(hparams, num_shards: int, shard: int, root: str) -> config_lib.ServerConfig:
    return config_lib.ServerConfig(
        ENV_NAME, hparams, root, port=0, num_replay_shards=num_shards, replay_shard=shard
    )


@pytest.fixture
def shards(env_specs, tmp_path):
    """`shards(num_shards, hparams=None, ports=None)` -> S in-process servers, stopped at the end."""
    started = []

    def build(num_shards: int, hparams=None, ports=None):
        hparams = hparams or small_hparams()
        servers = []
        for i in range(num_shards):
            config = _shard_config(hparams, num_shards, i, str(tmp_path))
            port = ports[i] if ports else None
            servers.append(reverb.Server(replay.make_tables(config, env_specs), port=port))
        started.extend(servers)
        return servers

    yield build
    for server in started:
        server.stop()


def _addresses(servers):
    return [f"localhost:{s.port}" for s in servers]


def _fill(server, env_specs, n: int, reward: float):
    """Writes `n` transitions with the given reward (marks the shard) and waits for them."""
    client = server.localhost_client()
    writer = replay.TransitionWriter(client)
    for transition in random_transitions(env_specs, n, reward=reward):
        writer.write(transition)
    assert writer.flush(timeout_ms=300_000)
    assert writer.close() == 0
    wait_for_size(client, replay.REPLAY_TABLE, n // writer.transitions_per_item)


# --- sizes and the batch split -----------------------------------------------------------


def test_each_shard_holds_its_share_of_capacity_and_warm_up(shards):
    hparams = small_hparams(replay_buffer_capacity=2_000, initial_collect_steps=64)
    servers = shards(3, hparams)
    for server in servers:
        info = server.localhost_client().server_info()[replay.REPLAY_TABLE]
        assert info.max_size == 2_000 // 3 == replay.shard_capacity_items(hparams, 3)
        # ceil(64 / 3): the shards together wait for at least the whole warm-up.
        assert info.rate_limiter_info.min_size_to_sample == 22
    assert replay.shard_capacity_items(hparams, 1) == hparams.replay_capacity_items
    assert replay.shard_min_size_items(hparams, 1) == hparams.min_replay_items


def test_the_ratio_limiter_keeps_samples_per_insert_and_splits_the_error_buffer(tmp_path):
    hparams = small_hparams(samples_per_insert=8.0)
    one = _shard_config(hparams, 1, 0, str(tmp_path))
    two = _shard_config(hparams, 2, 1, str(tmp_path))
    assert replay.shard_error_buffer(two) == pytest.approx(replay.shard_error_buffer(one) / 2)
    tiny = config_lib.ServerConfig(
        ENV_NAME, hparams, str(tmp_path), num_replay_shards=2, samples_per_insert_error_buffer=8.0
    )
    assert replay.shard_error_buffer(tiny) == 8.0  # never below Reverb's floor
    for config in (one, two, tiny):
        assert isinstance(
            replay.make_rate_limiter(config), reverb.rate_limiters.SampleToInsertRatio
        )


@pytest.mark.parametrize(
    "sizes, min_sizes, items, expected",
    [
        ([30, 10], [1, 1], 8, [6, 2]),
        ([10, 10, 10], [1, 1, 1], 8, [3, 3, 2]),  # largest remainder, ties by order
        ([100, 5], [22, 22], 8, [8, 0]),  # a shard below its min size gets nothing
        ([0, 0], [22, 22], 8, [4, 4]),  # nothing sampleable yet: all count
        ([1, 1, 98], [1, 1, 1], 10, [0, 0, 10]),
    ],
)
def test_batch_shares_follow_sizes_and_sum_to_the_batch(sizes, min_sizes, items, expected):
    shares = replay.batch_shares(sizes, min_sizes, items)
    assert shares == expected
    assert sum(shares) == items


def test_a_batch_holds_every_shard_in_proportion_with_exact_sample_info(shards, env_specs):
    servers = shards(2)
    sizes = (96, 32)
    for shard, (server, n) in enumerate(zip(servers, sizes)):
        _fill(server, env_specs, n, reward=100.0 + shard)
    dataset = replay.make_dataset(_addresses(servers), env_specs, 32, with_sample_info=True)
    transition, info = next(iter(dataset))

    assert transition.next_time_step.reward.shape == (32,)
    for field in info:
        assert field.shape == (32,)  # K = 1: one entry per item per row
    assert (info.key.dtype, info.shard.dtype) == (tf.uint64, tf.int32)
    assert (info.probability.dtype, info.replay_size.dtype) == (tf.float64, tf.int64)
    shard = info.shard.numpy()
    # 32 items split 96:32 -> 24 from shard 0, 8 from shard 1; the rewards say where
    # each row really came from.
    assert np.bincount(shard, minlength=2).tolist() == [24, 8]
    np.testing.assert_array_equal(transition.next_time_step.reward.numpy(), 100.0 + shard)
    share = np.where(shard == 0, 24 / 32, 8 / 32)
    size = np.where(shard == 0, 96, 32)
    np.testing.assert_allclose(info.probability.numpy(), share / size)
    np.testing.assert_array_equal(info.replay_size.numpy(), np.round(size / share))
    # Uniform over the whole replay: every item's weight is 1.
    np.testing.assert_allclose(info.replay_size.numpy() * info.probability.numpy(), 1.0)
    assert len(set(zip(shard.tolist(), info.key.numpy().tolist()))) <= 32


def test_one_address_with_sample_info_reports_the_table(shards, env_specs):
    (server,) = shards(1)
    _fill(server, env_specs, 64, reward=1.0)
    address = f"localhost:{server.port}"
    transition, info = next(
        iter(replay.make_dataset(address, env_specs, 16, with_sample_info=True))
    )
    assert transition.next_time_step.reward.shape == (16,)
    np.testing.assert_array_equal(info.shard.numpy(), 0)
    np.testing.assert_allclose(info.probability.numpy(), 1 / 64)
    np.testing.assert_array_equal(info.replay_size.numpy(), 64)
    # Without it, a single address is the plain path: Transitions only.
    plain = next(iter(replay.make_dataset(address, env_specs, 16)))
    assert plain.next_time_step.reward.shape == (16,)


def test_a_job_listing_another_number_of_shards_is_refused_naming_both(shards, env_specs):
    servers = shards(2)
    hparams = small_hparams()
    addresses = _addresses(servers) + ["localhost:1"]
    clients = [s.localhost_client() for s in servers]
    with pytest.raises(SignatureMismatchError) as refused:
        replay.check_shard_capacity(clients[0], addresses[0], hparams, 3)
    message = str(refused.value)
    assert f"The replay server at {addresses[0]} holds 1000 items per shard" in message
    assert "as started with --num_replay_shards=2" in message
    assert "this job lists 3 replay addresses" in message
    # The right count passes for every shard.
    replay.check_server_tables(
        clients, clients[0], env_specs, hparams, "test", replay_addresses=addresses[:2]
    )


def test_a_second_server_for_the_same_shard_is_refused_but_other_shards_coexist(tmp_path):
    from sac_distributed.errors import RunOwnedError
    from sac_distributed.server import ShardLock

    root = str(tmp_path)
    hparams = small_hparams()
    with (
        ShardLock(_shard_config(hparams, 2, 0, root)),
        ShardLock(_shard_config(hparams, 2, 1, root)),
    ):
        with pytest.raises(RunOwnedError, match="already serves replay shard 1"):
            with ShardLock(_shard_config(hparams, 2, 1, root)):
                pass
    assert os.path.isdir(paths.replay_checkpoint_dir(root, 1))
    assert paths.replay_checkpoint_dir(root, 0) == paths.replay_checkpoint_dir(root)


# --- an actor moves away from a dead home shard and back --------------------------------


def _inserted(server) -> int:
    return replay.table_info(
        server.localhost_client(), replay.REPLAY_TABLE
    ).rate_limiter_info.insert_stats.completed


def test_actor_moves_to_a_live_shard_and_returns_home(shards, env_specs, root_dir):
    ports = [portpicker.pick_unused_port() for _ in range(2)]
    servers = shards(2, ports=ports)
    address = ",".join(f"localhost:{p}" for p in ports)
    config = config_lib.ActorConfig(
        env_name=ENV_NAME,
        hparams=small_hparams(),
        root_dir=root_dir,
        # The variables on shard 1, which stays up: losing shard 0 is a replay loss only.
        client=config_lib.ClientConfig(address, f"localhost:{ports[1]}", connect_timeout_s=30),
        task=0,  # home shard 0
        seed=3,
    )
    envs = [specs_lib.load_env(ENV_NAME, seed=3)]
    connection = Connection(config.client, "test actor", lambda: False)
    connection.open()
    stop = threading.Event()
    loop = ActorLoop(config, envs, connection, Metrics(None), stop.is_set)
    result = {}
    thread = threading.Thread(target=lambda: result.update(stats=loop.run()), daemon=True)
    thread.start()
    try:
        wait_for_size(servers[0].localhost_client(), replay.REPLAY_TABLE, 50, POLL_S)
        assert _inserted(servers[1]) == 0
        servers[0].stop()  # home shard gone
        _wait(lambda: _inserted(servers[1]) > 50, "the actor to write to shard 1")
        servers[0] = reverb.Server(
            replay.make_tables(_shard_config(small_hparams(), 2, 0, root_dir), env_specs),
            port=ports[0],
        )
        _wait(lambda: _inserted(servers[0]) > 50, "the actor to return to shard 0")
        assert connection.live_shards() == [0, 1]
        stop.set()
        thread.join(POLL_S)
        stats = result["stats"]
        # Read before the servers go: shard 1 never failed, and the actor confirmed
        # all it wrote there before going home.
        assert stats.transitions_written_per_shard[1] == _inserted(servers[1])
        new_home_inserted = _inserted(servers[0])
    finally:
        stop.set()
        thread.join(POLL_S)
        servers[0].stop()
    assert stats.shard_moves == 2  # away, and back
    assert stats.reconnects == 0  # the variable container was never reconnected
    # Shard 0's second life holds all that was confirmed there since the return;
    # the rest of the actor's count for shard 0 was confirmed by its first life.
    assert 0 < new_home_inserted < stats.transitions_written_per_shard[0]
    # Every env step is in exactly one bucket.
    assert (
        stats.transitions_written + stats.transitions_unconfirmed + stats.transitions_dropped
        == stats.env_steps
    )


def _wait(condition, what: str, deadline_s: float = POLL_S) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, f"waited {deadline_s} s for {what}"
        time.sleep(0.2)
