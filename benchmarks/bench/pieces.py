"""The throughput pieces: each sets up, warms up, and returns its Measure.

A piece is one stage of the pipeline on one side, stock TF-Agents or ours,
fed the same experience: the env alone, an actor, a learner (fed by Reverb,
or ours on a constant batch), replay inserts and replay samples. Its setup
pays every trace and first connection, so the Measure it returns times the
steady state only. `SETUPS` names them as `settings.PIECES` does.
"""

from __future__ import annotations

import itertools
import time
from typing import Callable, Dict, Iterator

import numpy as np
import reverb
from tf_agents.policies import py_tf_eager_policy
from tf_agents.train import actor as tfa_actor

from benchmarks.bench.experience import inserted_items
from benchmarks.bench.fixtures import Bench
from benchmarks.bench.settings import PIECES
from benchmarks.bench.stock import STOCK_TABLE
from benchmarks.bench.timing import Measure, lead_in_for, run_for, timed_rate
from sac_distributed import replay
from sac_distributed.config import ActorConfig, ClientConfig
from sac_distributed.envs import loader as env_loader
from sac_distributed.jobs.actor_loop import ActorLoop
from sac_distributed.replay.connection import Connection
from sac_distributed.runtime import Metrics

ENV_CHUNK = 100  # env steps between clock checks
REPLAY_CHUNK = 256  # inserts between clock checks


def setup_raw_env(bench: Bench) -> Measure:
    """The py env alone: uniform random actions, no policy, no writing."""
    env = env_loader.load_env(bench.settings.env_name, bench.settings.seed)
    spec = env.action_spec()
    rng = np.random.default_rng(bench.settings.seed)
    low, high = np.broadcast_to(spec.minimum, spec.shape), np.broadcast_to(spec.maximum, spec.shape)
    time_step = env.reset()

    def chunk() -> int:
        nonlocal time_step
        for _ in range(ENV_CHUNK):
            time_step = env.step(rng.uniform(low, high).astype(spec.dtype))
            if time_step.is_last():
                time_step = env.reset()
        return ENV_CHUNK

    return timed_rate(chunk)


def setup_stock_actor(bench: Bench) -> Measure:
    """tf_agents Actor + PyTFEagerPolicy(collect_policy) + ReverbAddTrajectoryObserver."""
    stock = bench.stock_replay
    env = env_loader.load_env(bench.settings.env_name, bench.settings.seed)
    policy = py_tf_eager_policy.PyTFEagerPolicy(stock.agent.collect_policy, use_tf_function=True)
    observer = stock.observer()
    actor = tfa_actor.Actor(
        env, policy, stock.train_step, steps_per_run=ENV_CHUNK, observers=[observer]
    )
    actor.run()  # traces the policy's tf.function

    def chunk() -> int:
        actor.run()
        return ENV_CHUNK  # PyDriver counts non-boundary steps, like ActorLoop's env_steps

    return lambda d: run_for(chunk, d, lead_in_for(d), finish=observer.flush)


def setup_actor(bench: Bench) -> Measure:
    """Our ActorLoop: num_envs envs, one batched NumPy policy call, TransitionWriter."""
    s = bench.settings
    our = bench.our_replay  # holds pushed weights; initial_collect_steps=0
    client_config = ClientConfig(our.address, our.address)
    config = ActorConfig(
        s.env_name,
        bench.hparams,
        bench.tmpdir("actor"),
        client=client_config,
        num_envs=s.num_envs,
        seed=s.seed,
        variable_update_interval=s.variable_update_interval,
    )
    envs = [env_loader.load_env(s.env_name, s.seed + i) for i in range(s.num_envs)]
    connection = Connection(client_config, "benchmark actor", lambda: False)
    connection.open()

    def measure(duration: float) -> float:
        deadline = time.monotonic() + duration
        loop = ActorLoop(
            config, envs, connection, Metrics(None), lambda: time.monotonic() >= deadline
        )
        start = time.monotonic()
        stats = loop.run()  # ends by flushing and closing its writer
        rate = stats.env_steps / (time.monotonic() - start)
        _check_collect_policy_used(loop)
        return rate

    measure(1.0)  # warm-up (NumPy needs no trace; this checks the wiring once)
    return measure


def _check_collect_policy_used(loop: ActorLoop) -> None:
    """Fails loudly if ours was measured with the random warm-up policy."""
    # `warm`: ActorLoop's switch from random to collect actions.
    if loop.stats.weight_updates < 1 or not loop.warm:
        raise RuntimeError(
            "ActorLoop ran without the learner's weights or still in its random "
            "warm-up; the actor number would not measure the collect policy."
        )


def setup_stock_learner(bench: Bench, iterations: int = 1) -> Measure:
    """tf_agents Learner over ReverbReplayBuffer.as_dataset(num_steps=2).prefetch(50).

    iterations=1 is the tutorial's `agent_learner.run(iterations=1)`;
    stock_learner_multi uses our steps_per_call to separate the cost of one
    tf.function call per step from the data path.
    """
    learner = bench.stock_learner
    for _ in range(3):
        learner.run(iterations=1)  # traces _train
    learner.run(iterations=iterations)

    def chunk() -> int:
        learner.run(iterations=iterations)
        return iterations

    return timed_rate(chunk)


def setup_stock_learner_multi(bench: Bench) -> Measure:
    """The stock Learner with `run(iterations=steps_per_call)`."""
    return setup_stock_learner(bench, bench.settings.steps_per_call)


def setup_learner(bench: Bench) -> Measure:
    """Our LearnerLoop: steps_per_call SAC updates per call over make_dataset()."""
    driver = bench.learner_driver
    for _ in range(2):
        driver.step()  # the first call traces
    return timed_rate(driver.step)


def setup_learner_const_batch(bench: Bench) -> Measure:
    """Our SAC update (SacLearner.step) on a constant in-memory batch (no Reverb)."""
    driver = bench.learner_driver
    for _ in range(2):
        driver.const_batch_step()
    return timed_rate(driver.const_batch_step)


def setup_stock_replay_insert(bench: Bench) -> Measure:
    """ReverbAddTrajectoryObserver alone (2-step items, stride 1) from stored steps."""
    stock = bench.stock_replay
    observer = stock.observer()
    trajectories = itertools.cycle(bench.stock_trajectories)

    def write_chunk() -> None:
        for _ in range(REPLAY_CHUNK):
            observer(next(trajectories))

    return lambda d: _insert_rate(
        write_chunk, observer.flush, stock.buffer.py_client, STOCK_TABLE, d
    )


def setup_replay_insert(bench: Bench) -> Measure:
    """TransitionWriter.write_row + throttle alone on packed rows, as ActorLoop calls them.

    Counted in transitions (server items x K), comparable with stock's 2-step items.
    """
    our = bench.our_replay
    writer = replay.TransitionWriter(our.client)
    rows = itertools.cycle(bench.our_rows)

    def write_chunk() -> None:
        for _ in range(REPLAY_CHUNK):
            writer.write_row(next(rows))
            while not writer.throttle():
                pass

    k = writer.transitions_per_item
    return lambda d: k * _insert_rate(write_chunk, writer.flush, our.client, replay.REPLAY_TABLE, d)


def _insert_rate(
    write_chunk: Callable[[], None],
    flush: Callable[[], object],
    client: reverb.Client,
    table: str,
    duration: float,
) -> float:
    """Items the server accepted per second (counted server-side, flush included)."""
    write_chunk()
    flush()
    before = inserted_items(client, table)
    start = time.monotonic()
    deadline = start + duration
    while time.monotonic() < deadline:
        write_chunk()
    flush()
    elapsed = time.monotonic() - start
    return (inserted_items(client, table) - before) / elapsed


def setup_stock_replay_sample(bench: Bench) -> Measure:
    """Items/s out of the stock dataset (num_steps=2, sample_batch_size, prefetch 50)."""
    batch_size = bench.hparams.batch_size
    iterator = iter(bench.stock_replay.dataset(batch_size))
    return _sample_measure(iterator, batch_size)


def setup_replay_sample(bench: Bench) -> Measure:
    """Transitions/s out of replay.make_dataset, the learner's input pipeline."""
    s = bench.settings
    batch_size = bench.hparams.batch_size
    dataset = replay.make_dataset(
        bench.our_replay.address,
        bench.specs,
        batch_size,
        max_in_flight=s.max_in_flight,
        num_parallel_datasets=s.num_parallel_datasets,
    )
    return _sample_measure(iter(dataset), batch_size)


def _sample_measure(iterator: Iterator, batch_size: int) -> Measure:
    for _ in range(5):
        next(iterator)

    def chunk() -> int:
        next(iterator)
        return batch_size

    return timed_rate(chunk)


SETUPS: Dict[str, Callable[[Bench], Measure]] = {
    "raw_env": setup_raw_env,
    "stock_actor": setup_stock_actor,
    "actor": setup_actor,
    "stock_learner": setup_stock_learner,
    "stock_learner_multi": setup_stock_learner_multi,
    "learner": setup_learner,
    "learner_const_batch": setup_learner_const_batch,
    "stock_replay_insert": setup_stock_replay_insert,
    "replay_insert": setup_replay_insert,
    "stock_replay_sample": setup_stock_replay_sample,
    "replay_sample": setup_replay_sample,
}
assert set(SETUPS) == set(PIECES), "every repeated piece has exactly one setup"
