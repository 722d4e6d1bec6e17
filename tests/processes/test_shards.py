"""The replay sharded over several Reverb servers.

In-process servers built with `make_tables` for S shards check the per-shard
sizes, the batch split and `SampleInfo`, the shard-count check, and an
actor's move away from a dead home shard and back. One multi-process run
with the real binaries kills a shard mid-run and checks that the run goes on,
the shard comes back from its checkpoint, and every transition is accounted for;
its actors are paused (SIGSTOP) while the test waits on another job.
"""

import dataclasses
import logging
import os
import re
import signal
import threading
import time
from typing import Optional

import numpy as np
import portpicker
import pytest
import reverb
import tensorflow as tf
from support.processes import DEADLINE_S, read, settled, start, stop, wait_for_log
from support.training import (
    ENV_NAME,
    learner_config,
    random_transitions,
    small_hparams,
    wait_for_size,
)

from sac_distributed import config as config_lib
from sac_distributed import paths, replay
from sac_distributed.envs import loader as env_loader
from sac_distributed.errors import SignatureMismatchError
from sac_distributed.jobs import learner_loop
from sac_distributed.jobs import watchdog as watchdog_lib
from sac_distributed.jobs.actor_loop import ActorLoop
from sac_distributed.jobs.learner_loop import LearnerLoop
from sac_distributed.replay.connection import Connection
from sac_distributed.runtime import Metrics

POLL_S = DEADLINE_S  # a deadline only stops a hang: 120 s ran out under load
# How often the actors and learners here look for a missing shard (--shard_probe_interval,
# 15 s by default): the same code path, less waiting. Not shorter than
# connection.PING_TIMEOUT_S, so a busy machine still trains between two pings of a
# dead shard.
SHARD_PROBE_S = 3.0


def _shard_config(hparams, num_shards: int, shard: int, root: str) -> config_lib.ServerConfig:
    return config_lib.ServerConfig(
        ENV_NAME, hparams, root, port=0, num_replay_shards=num_shards, replay_shard=shard
    )


@pytest.fixture
def shards(env_specs, tmp_path):
    """`shards(num_shards, hparams=None, ports=None)` -> S in-process servers (stopped after)."""
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


def _fill_shard(server, env_specs, n: int, reward: float):
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
        _fill_shard(server, env_specs, n, reward=100.0 + shard)
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
    _fill_shard(server, env_specs, 64, reward=1.0)
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
    from sac_distributed.jobs.server import ShardLock

    root = str(tmp_path)
    hparams = small_hparams()
    with (
        ShardLock(_shard_config(hparams, 2, 0, root)),
        ShardLock(_shard_config(hparams, 2, 1, root)),
    ):
        with pytest.raises(RunOwnedError, match="already serves replay shard 1"):
            with ShardLock(_shard_config(hparams, 2, 1, root)):
                pass
    assert os.path.exists(paths.server_lock_path(root, 1))
    assert paths.replay_checkpoint_dir(root, 0) == paths.replay_checkpoint_dir(root)
    assert paths.replay_checkpoint_dir(root, 1).endswith("replay_checkpoints_shard1")


# --- an actor moves away from a dead home shard and back --------------------------------


def _items_inserted(server) -> int:
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
        client=config_lib.ClientConfig(
            address,
            f"localhost:{ports[1]}",
            connect_timeout_s=30,
            shard_probe_interval_s=SHARD_PROBE_S,
        ),
        task=0,  # home shard 0
        seed=3,
    )
    envs = [env_loader.load_env(ENV_NAME, seed=3)]
    connection = Connection(config.client, "test actor", lambda: False)
    connection.open()
    stop = threading.Event()
    loop = ActorLoop(config, envs, connection, Metrics(None), stop.is_set)
    result = {}
    thread = threading.Thread(target=lambda: result.update(stats=loop.run()), daemon=True)
    thread.start()
    try:
        wait_for_size(servers[0].localhost_client(), replay.REPLAY_TABLE, 50, POLL_S)
        assert _items_inserted(servers[1]) == 0
        servers[0].stop()  # home shard gone
        _wait(lambda: _items_inserted(servers[1]) > 50, "the actor to write to shard 1", thread)
        servers[0] = reverb.Server(
            replay.make_tables(_shard_config(small_hparams(), 2, 0, root_dir), env_specs),
            port=ports[0],
        )
        _wait(lambda: _items_inserted(servers[0]) > 50, "the actor to return to shard 0", thread)
        assert connection.live_shards() == [0, 1]
        stop.set()
        thread.join(POLL_S)
        stats = result["stats"]
        # Read before the servers go: shard 1 never failed, and the actor confirmed
        # all it wrote there before going home.
        assert stats.transitions_written_per_shard[1] == _items_inserted(servers[1])
        new_home_inserted = _items_inserted(servers[0])
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


def _wait(condition, what: str, thread: Optional[threading.Thread] = None) -> None:
    """Polls `condition`; fails at the deadline, or at once if `thread` (the loop under
    test, whose error would otherwise only show in the log) has ended."""
    deadline = time.monotonic() + POLL_S
    while not condition():
        assert thread is None or thread.is_alive(), f"the loop's thread ended before {what}"
        assert time.monotonic() < deadline, f"waited {POLL_S} s for {what}"
        time.sleep(0.2)


# --- the learner drops a dead shard and takes it back ----------------------------------


def _sampled(server) -> int:
    info = replay.table_info(server.localhost_client(), replay.REPLAY_TABLE)
    return info.rate_limiter_info.sample_stats.completed


def test_learner_trains_on_without_a_dead_shard_and_takes_it_back(
    shards, env_specs, root_dir, caplog, monkeypatch
):
    # A training call stuck on the dead shard is noticed after 1 s, not 5 (the ping's
    # own timeout stays): a healthy call never lasts long enough to be checked.
    monkeypatch.setattr(watchdog_lib, "HEALTH_CHECK_INTERVAL_S", 1.0)
    caplog.set_level(logging.INFO, logger="absl")
    ports = [portpicker.pick_unused_port() for _ in range(2)]
    servers = shards(2, ports=ports)
    for shard, server in enumerate(servers):
        _fill_shard(server, env_specs, 96, reward=float(shard))
    addresses = ",".join(f"localhost:{p}" for p in ports)
    # No checkpoints, and no spare functions traced ahead from SPARES_FROM_STEP (the shard
    # is dropped well before that step, where the update traces again anyway): the learner
    # trains freely while the test waits.
    monkeypatch.setattr(learner_loop, "SPARES_FROM_STEP", 10_000_000)
    config = learner_config(root_dir, addresses, steps_per_call=5, checkpoint_interval=1_000_000)
    config = dataclasses.replace(
        config,
        hparams=small_hparams(num_iterations=1_000_000, policy_save_interval=1_000_000),
        client=config_lib.ClientConfig(
            addresses,
            f"localhost:{ports[0]}",
            connect_timeout_s=60,
            shard_probe_interval_s=SHARD_PROBE_S,
        ),
    )
    stop = threading.Event()
    connection = Connection(config.client, "learner", stop.is_set)
    connection.open()
    strategy = tf.distribute.get_strategy()
    loop = LearnerLoop(config, env_specs, strategy, connection, Metrics(None), stop.is_set)

    def train() -> None:
        # `run()` without its end (a final checkpoint and export, which nothing here reads).
        if loop.start():
            loop.train(config.hparams.num_iterations)

    thread = threading.Thread(target=train, daemon=True)
    thread.start()
    try:
        _wait(
            lambda: loop.step >= 10 and loop.shards_in_use == (0, 1), "training on 2 shards", thread
        )
        assert _sampled(servers[1]) > 0
        servers[1].stop()
        _wait(lambda: loop.shards_in_use == (0,), "the learner to drop shard 1", thread)
        step = loop.step
        _wait(lambda: loop.step > step + 10, "training on shard 0 alone", thread)
        servers[1] = reverb.Server(
            replay.make_tables(_shard_config(small_hparams(), 2, 1, root_dir), env_specs),
            port=ports[1],
        )
        # Restarted empty: it answers, but below its min size it is not taken back
        # (a batch share fixed at 0 items would never sample it).
        _wait(
            lambda: "answers but holds 0 of the" in caplog.text,
            "a probe of the empty shard",
            thread,
        )
        assert loop.shards_in_use == (0,)
        _fill_shard(servers[1], env_specs, 96, reward=1.0)
        _wait(lambda: loop.shards_in_use == (0, 1), "the learner to take shard 1 back", thread)
        _wait(lambda: _sampled(servers[1]) > 0, "samples from the restarted shard 1", thread)
    finally:
        stop.set()
        thread.join(POLL_S)
        servers[1].stop()
    assert not thread.is_alive()
    assert connection.reconnects == 0  # the variable container was never reconnected
    assert caplog.text.count("lost replay shard 1") == 1
    assert "samples from replay shards [0, 1] again" in caplog.text


# --- the real binaries: a shard SIGKILLed mid-run ------------------------------------

# More than the test lets it run: the test stops the learner with SIGTERM once
# the shard has rejoined, so how fast a busy machine trains does not matter.
E2E_ITERATIONS = 1_000_000
E2E_FLAGS = [
    f"--env_name={ENV_NAME}",
    f"--num_iterations={E2E_ITERATIONS}",
    "--initial_collect_steps=200",
    "--replay_buffer_capacity=4000",  # small replay checkpoints: quick to write and restore
    "--batch_size=32",
    "--actor_fc_layer_params=16,16",
    "--critic_joint_fc_layer_params=16,16",
    "--eval_interval=100000",
    "--num_eval_episodes=1",
    "--policy_save_interval=100000",
    "--samples_per_insert=0",  # actors run free, so the kill does not stall the learner
]
CONFIRMED = re.compile(
    r"Actor (\d+): (\d+) transitions confirmed by the server(?:, (\d+) sent but unconfirmed)?"
)


class ShardedRun:
    """Two replay shards, a learner and two actors on localhost, one root_dir."""

    def __init__(self, root: str):
        self.root = root
        self.ports = [portpicker.pick_unused_port() for _ in range(2)]
        replay_address = ",".join(f"localhost:{p}" for p in self.ports)
        self.client_flags = [
            f"--root_dir={root}",
            *E2E_FLAGS,
            f"--replay_buffer_server_address={replay_address}",
            f"--variable_container_server_address=localhost:{self.ports[0]}",
            "--connect_timeout=600",
            f"--shard_probe_interval={SHARD_PROBE_S}",
        ]
        self.procs = {}

    def log(self, name: str) -> str:
        return os.path.join(self.root, f"{name}.log")

    def start_shard(self, shard: int) -> None:
        flags = [
            f"--root_dir={self.root}",
            *E2E_FLAGS,
            f"--port={self.ports[shard]}",
            "--num_replay_shards=2",
            f"--replay_shard={shard}",
            "--stats_interval=5",
            "--replay_checkpoint_interval=2",
        ]
        name = f"shard{shard}"
        self.procs[name] = start("reverb_server", flags, self.log(name))

    def start_clients(self) -> None:
        learner = ["--checkpoint_interval=100000", "--summary_interval=200"]
        self.procs["learner"] = start("learner", self.client_flags + learner, self.log("learner"))
        for task in range(2):
            flags = self.client_flags + [
                f"--task={task}",
                "--variable_update_interval=100",
            ]
            self.procs[f"actor{task}"] = start("actor", flags, self.log(f"actor{task}"))

    def table(self, shard: int):
        """Shard `shard`'s replay TableInfo, from a fresh client, waiting for the server."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                client = reverb.Client(f"localhost:{self.ports[shard]}")
                return client.server_info(timeout=2)[replay.REPLAY_TABLE]
            except (reverb.errors.DeadlineExceededError, RuntimeError):
                assert time.monotonic() < deadline, f"shard {shard} never answered"
                time.sleep(0.2)

    def counts(self, shard: int) -> replay.TransitionCounts:
        return replay.transition_counts(self.table(shard))

    def cleanup(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def sharded_run(tmp_path):
    run = ShardedRun(str(tmp_path))
    yield run
    run.cleanup()


def _pause(run: ShardedRun, *names: str) -> None:
    for name in names:
        os.kill(run.procs[name].pid, signal.SIGSTOP)


def _resume(run: ShardedRun, *names: str) -> None:
    for name in names:
        os.kill(run.procs[name].pid, signal.SIGCONT)


@pytest.mark.slow
def test_a_shard_killed_mid_run_rejoins_and_every_transition_is_accounted_for(sharded_run):
    """The actors are paused (SIGSTOP) while the test waits on another job: both while
    the learner traces its update on the replay they filled, actor 0 (whose shard stays
    up) from the kill until shard 1 is back, actor 1 from its move to shard 0 until shard
    1 is back, and both from actor 1's return home until the learner has stopped."""
    run = sharded_run
    run.start_shard(0)
    run.start_shard(1)
    run.start_clients()
    # The learner builds its dataset once both shards hold their warm-up.
    wait_for_log(
        run.log("learner"), r"Sampling \[\d+, \d+\] items per batch", DEADLINE_S, run.procs
    )
    _pause(run, "actor0", "actor1")
    wait_for_log(run.log("learner"), r"train_step \d+: loss", DEADLINE_S, run.procs)
    _resume(run, "actor0", "actor1")
    # The learner samples from both shards, each fed by its own actor.
    _wait(lambda: all(run.counts(s).sampled > 0 for s in (0, 1)), "samples from both shards")
    mark = len(read(run.log("shard1")))
    wait_for_log(run.log("shard1"), r"Replay checkpoint written", DEADLINE_S, start_at=mark)

    # Pause shard 1's only writer to read its insert count at the kill, then kill it.
    # Actor 0 stays paused until shard 1 is back: it plays no part in the outage.
    _pause(run, "actor1", "actor0")
    inserted_at_kill = settled(lambda: run.counts(1).inserted, "shard 1's insert count")
    run.procs.pop("shard1").kill()
    _resume(run, "actor1")
    learner_mark = len(read(run.log("learner")))
    actor_mark = len(read(run.log("actor1")))
    wait_for_log(
        run.log("actor1"), r"writing to replay shard 0 \(home shard 1\)", DEADLINE_S, run.procs
    )
    # Moved: actor 1 waits paused until shard 1 is back (it writes on to shard 0 then,
    # until its home-shard probe takes it home).
    _pause(run, "actor1")
    for pattern in [r"lost replay shard 1", r"sampling from replay shards \[0\]"]:
        wait_for_log(run.log("learner"), pattern, DEADLINE_S, run.procs)
    assert "reconnected" not in read(run.log("learner"))[learner_mark:]
    assert "reconnected" not in read(run.log("actor1"))[actor_mark:]

    # Actor 1 is still paused while shard 1 restarts: its home-shard probe could otherwise
    # write to the restored shard before the restored counts are read.
    run.start_shard(1)  # same port and root_dir: restores its own replay checkpoint
    restored = run.counts(1)
    _resume(run, "actor0", "actor1")
    # Reverb's checkpoint restores the rate limiter's insert count with the items.
    tail = inserted_at_kill - restored.inserted
    assert restored.stored > 0 and 0 <= tail < inserted_at_kill, (restored, inserted_at_kill)
    print(
        f"[figure] shard 1 SIGKILL: {restored.inserted} of {inserted_at_kill} inserts restored "
        f"from its checkpoint; post-checkpoint tail lost: {tail} transitions"
    )
    wait_for_log(
        run.log("actor1"), r"writing to replay shard 1 \(home shard 1\)", DEADLINE_S, run.procs
    )
    # Home again: the actors wait paused from here until the learner has stopped.
    _pause(run, "actor0", "actor1")
    wait_for_log(
        run.log("learner"), r"samples from replay shards \[0, 1\] again", DEADLINE_S, run.procs
    )
    _wait(lambda: run.counts(1).sampled > restored.sampled, "the learner to sample shard 1 again")
    assert "reconnected" not in read(run.log("learner"))[learner_mark:]

    # The run ends as an operator ends it: learner first (it checkpoints and
    # exports), then the actors, which drain their inserts into the live shards.
    assert stop(run.procs.pop("learner")) == 0
    _resume(run, "actor0", "actor1")
    for task in (0, 1):
        assert stop(run.procs.pop(f"actor{task}")) == 0
    assert "stop signal" in read(run.log("learner"))
    final = [run.counts(s).inserted for s in (0, 1)]
    for shard in (0, 1):
        assert stop(run.procs[f"shard{shard}"]) == 0

    written = unconfirmed = 0
    for task in (0, 1):
        match = CONFIRMED.findall(read(run.log(f"actor{task}")))[-1]
        written += int(match[1])
        unconfirmed += int(match[2] or 0)
    # What the shards received, counting the killed shard's lost tail, is what
    # the actors wrote, give or take what was sent but never acknowledged.
    received = final[0] + final[1] + tail
    print(
        f"[figure] actors wrote {written} (+{unconfirmed} unconfirmed); shards received "
        f"{final[0]} + {final[1]} + {tail} (lost tail) = {received}"
    )
    assert written <= received <= written + unconfirmed
