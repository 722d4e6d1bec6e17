"""Stock TF-Agents SAC vs sac_distributed, measured in one process on one machine.

Throughput mode (default) measures each piece for --duration seconds, alternating
stock and ours (stock, ours, stock, ours, ...) for --repeats rounds, and reports
the median of the rounds:

    python benchmarks/compare.py --env_name=HalfCheetahBulletEnv-v0 --layers=256,256 \
        --batch_size=256 --num_envs=1 --duration=20 --repeats=3

Time-to-return mode measures the wall-clock time until the greedy policy's
average eval return reaches --target_return (default -200 on Pendulum-v1):
ours by running `sac-launch` as a subprocess and watching
root_dir/eval/results.csv, stock by running the TF-Agents tutorial loop
in-process (collect one step, train one step, evaluate every eval_interval):

    python benchmarks/compare.py --mode=time_to_return --max_minutes=10 --repeats=1

A readable table goes to stdout and the LAST stdout line is one JSON object.
Everything else (TensorFlow, Reverb, pybullet chatter, progress) goes to stderr.
See benchmarks/README.md for what each number means.
"""

from __future__ import annotations

import sac_distributed  # noqa: F401  (selects tf-keras before TensorFlow is imported)

# isort: split

import argparse
import dataclasses
import functools
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import portpicker
import reverb
import tensorflow as tf
from absl import logging
from tf_agents.agents.sac import sac_agent
from tf_agents.environments import py_environment
from tf_agents.policies import greedy_policy, py_tf_eager_policy, random_py_policy
from tf_agents.replay_buffers import reverb_replay_buffer, reverb_utils
from tf_agents.train import actor as tfa_actor
from tf_agents.train import learner as tfa_learner
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts

from sac_distributed import agent as agent_lib
from sac_distributed import paths, replay, results
from sac_distributed import specs as specs_lib
from sac_distributed.actor_loop import ActorLoop
from sac_distributed.agent import EnvSpecs
from sac_distributed.config import (
    ActorConfig,
    ClientConfig,
    Hyperparams,
    LearnerConfig,
    ServerConfig,
    hyperparams_for,
)
from sac_distributed.connection import Connection
from sac_distributed.errors import ConfigError, ServerUnreachableError
from sac_distributed.learner_loop import LearnerLoop
from sac_distributed.runtime import Metrics
from sac_distributed.variables import VariableContainer

STOCK_TABLE = "uniform_table"  # the tutorial's table name, on its own server
NEVER = 10**9  # an interval (train steps) that a benchmark never reaches
ENV_CHUNK = 100  # env steps between clock checks
REPLAY_CHUNK = 256  # inserts between clock checks
STOCK_PREFETCH = 50  # the tutorial's .prefetch(50)
SERVER_START_TIMEOUT_S = 180.0

Measure = Callable[[float], float]  # duration in seconds -> rate per second
RandomStep = Tuple[ts.TimeStep, np.ndarray, ts.TimeStep]

# Repeated pieces, in the order of one round: each stock piece right before ours.
# name -> (result key, unit)
PIECES: Dict[str, Tuple[str, str]] = {
    "raw_env": ("raw_env_steps_per_s", "env steps/s"),
    "stock_actor": ("stock_actor_env_steps_per_s", "env steps/s"),
    "actor": ("actor_env_steps_per_s", "env steps/s"),
    "stock_learner": ("stock_learner_steps_per_s", "train steps/s"),
    "stock_learner_multi": ("stock_learner_multi_steps_per_s", "train steps/s"),
    "learner": ("learner_steps_per_s", "train steps/s"),
    "learner_const_batch": ("learner_const_batch_steps_per_s", "train steps/s"),
    "stock_replay_insert": ("stock_replay_insert_per_s", "transitions/s"),
    "replay_insert": ("replay_insert_per_s", "transitions/s"),
    "stock_replay_sample": ("stock_replay_sample_per_s", "transitions/s"),
    "replay_sample": ("replay_sample_per_s", "transitions/s"),
}
# One-shot pieces (run once, after the rounds).
ONE_SHOT_PIECES = ("stock_server_rss", "server_rss")
REQUIRED_KEYS = (
    "raw_env_steps_per_s",
    "stock_actor_env_steps_per_s",
    "actor_env_steps_per_s",
    "stock_learner_steps_per_s",
    "learner_steps_per_s",
    "replay_insert_per_s",
    "replay_sample_per_s",
    "server_rss_mb",
)


# --- settings ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Settings:
    """Command-line options, parsed and checked."""

    mode: str
    env_name: str
    layers: Optional[Tuple[int, ...]]  # None: the env preset's
    batch_size: Optional[int]  # None: the env preset's
    num_envs: int
    duration: float
    repeats: int
    rss_items: int
    fill_items: int
    steps_per_call: int
    only: Tuple[str, ...]
    server: str  # inprocess | subprocess
    settle_s: float
    seed: int
    max_minutes: float
    target_return: float
    num_actors: int
    launch_flags: Tuple[str, ...]
    transitions_per_item: Optional[int]  # None: the env preset's
    num_parallel_datasets: int
    max_in_flight: Optional[int]  # None: make_dataset's default
    actor_counts: Tuple[int, ...]
    actor_steps: int


def parse_settings(argv: Sequence[str]) -> Settings:
    """Parses `argv` (without the program name) into Settings."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--mode", choices=("throughput", "time_to_return", "actor_scaling"), default="throughput"
    )
    p.add_argument("--env_name", default=None, help="gym or pybullet id (default Pendulum-v1)")
    p.add_argument("--layers", default=None, help="actor and critic MLP sizes, e.g. 256,256")
    p.add_argument("--batch_size", type=int, default=None, help="transitions per train step")
    p.add_argument("--num_envs", type=int, default=1, help="envs per actor (ours only)")
    p.add_argument("--duration", type=float, default=20.0, help="seconds per measurement")
    p.add_argument("--repeats", type=int, default=3, help="alternating rounds; median reported")
    p.add_argument("--rss_items", type=int, default=100_000, help="transitions for server_rss")
    p.add_argument("--fill_items", type=int, default=10_000, help="random steps pre-filled")
    p.add_argument("--steps_per_call", type=int, default=50, help="ours: SGD steps per call")
    p.add_argument("--only", default="", help="comma list of pieces: " + ", ".join(all_pieces()))
    p.add_argument(
        "--server",
        choices=("inprocess", "subprocess"),
        default="inprocess",
        help="where the replay servers of the throughput pieces run",
    )
    p.add_argument("--settle", type=float, default=1.0, help="idle seconds between pieces")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max_minutes", type=float, default=15.0, help="time_to_return cap per run")
    p.add_argument("--target_return", type=float, default=-200.0)
    p.add_argument("--num_actors", type=int, default=1, help="time_to_return: ours' actors")
    p.add_argument("--launch_flags", default="", help="extra flags for sac-launch, spaced")
    p.add_argument(
        "--transitions_per_item", type=int, default=None, help="ours: K (default: env preset)"
    )
    p.add_argument(
        "--num_parallel_datasets",
        type=int,
        default=replay.DEFAULT_PARALLEL_DATASETS,
        help="ours: interleaved Reverb streams in make_dataset",
    )
    p.add_argument(
        "--max_in_flight", type=int, default=None, help="ours: items in flight per stream"
    )
    p.add_argument(
        "--actor_counts", default="1,2,4", help="actor_scaling: actor process counts to run"
    )
    p.add_argument(
        "--actor_steps", type=int, default=20_000, help="actor_scaling: --max_env_steps per actor"
    )
    a = p.parse_args(argv)
    only = tuple(x.strip() for x in a.only.split(",") if x.strip())
    unknown = sorted(set(only) - set(all_pieces()))
    if unknown:
        p.error(f"--only: unknown pieces {unknown}; choose from {', '.join(all_pieces())}")
    for name in (
        "num_envs",
        "repeats",
        "rss_items",
        "fill_items",
        "steps_per_call",
        "num_parallel_datasets",
        "actor_steps",
    ):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    if a.duration <= 0 or a.max_minutes <= 0:
        p.error("--duration and --max_minutes must be > 0")
    return Settings(
        mode=a.mode,
        env_name=a.env_name or "Pendulum-v1",
        layers=_parse_layers(p, a.layers),
        batch_size=a.batch_size,
        num_envs=a.num_envs,
        duration=a.duration,
        repeats=a.repeats,
        rss_items=a.rss_items,
        fill_items=a.fill_items,
        steps_per_call=a.steps_per_call,
        only=only,
        server=a.server,
        settle_s=max(0.0, a.settle),
        seed=a.seed,
        max_minutes=a.max_minutes,
        target_return=a.target_return,
        num_actors=a.num_actors,
        launch_flags=tuple(a.launch_flags.split()),
        transitions_per_item=a.transitions_per_item,
        num_parallel_datasets=a.num_parallel_datasets,
        max_in_flight=a.max_in_flight,
        actor_counts=tuple(int(x) for x in a.actor_counts.split(",") if x.strip()),
        actor_steps=a.actor_steps,
    )


def _parse_layers(
    parser: argparse.ArgumentParser, text: Optional[str]
) -> Optional[Tuple[int, ...]]:
    if not text:
        return None
    try:
        layers = tuple(int(x) for x in text.split(","))
    except ValueError:
        parser.error(f"--layers must be comma-separated integers, got {text!r}")
    if not layers or min(layers) < 1:
        parser.error(f"--layers must be positive sizes, got {text!r}")
    return layers


def all_pieces() -> Tuple[str, ...]:
    """Every name --only accepts."""
    return tuple(PIECES) + ONE_SHOT_PIECES


def preset_hparams(s: Settings) -> Hyperparams:
    """The env preset with the network sizes and batch given on the command line."""
    return hyperparams_for(
        s.env_name,
        {
            "batch_size": s.batch_size,
            "actor_fc_layer_params": s.layers,
            "critic_joint_fc_layer_params": s.layers,
            "transitions_per_item": s.transitions_per_item,
        },
    )


def throughput_hparams(s: Settings) -> Hyperparams:
    """Preset + flags, with nothing that blocks or interrupts a measurement.

    No SampleToInsertRatio (it would block inserts when nobody samples), no
    random warm-up for our actor (initial_collect_steps=0, so it uses the
    collect policy from its first step), and no policy export mid-measurement.
    """
    return dataclasses.replace(
        preset_hparams(s),
        samples_per_insert=None,
        initial_collect_steps=0,
        num_iterations=NEVER,
        policy_save_interval=NEVER,
    )


# --- timing helpers ------------------------------------------------------------------


def run_for(
    chunk: Callable[[], int],
    duration: float,
    lead_in: float = 0.0,
    finish: Optional[Callable[[], object]] = None,
) -> float:
    """Calls `chunk` (which returns the work it did) for `duration` s; returns work/s.

    The first `lead_in` seconds are not counted: they drain the prefetch
    buffers that filled while the piece sat idle, so every round measures the
    steady state. `finish` (e.g. a writer flush) runs inside the timed window.
    """
    lead_end = time.monotonic() + lead_in
    while time.monotonic() < lead_end:
        chunk()
    done = 0
    start = time.monotonic()
    deadline = start + duration
    while time.monotonic() < deadline:
        done += chunk()
    if finish is not None:
        finish()
    return done / (time.monotonic() - start)


def lead_in_for(duration: float) -> float:
    """Untimed seconds before each measurement: 10 %, at most 2 s."""
    return min(2.0, 0.1 * duration)


def median(values: Sequence[float]) -> float:
    """The median as a plain float."""
    return float(statistics.median(values))


# --- random experience, shared by both sides -------------------------------------------


def collect_random_steps(env_name: str, count: int, seed: int) -> List[RandomStep]:
    """`count` (time_step, action, next_time_step) triples from uniform random actions.

    The env auto-resets as under the stock PyDriver: the step after a LAST
    step is a boundary (LAST -> FIRST) whose action is ignored.
    """
    env = specs_lib.load_env(env_name, seed)
    policy = random_py_policy.RandomPyPolicy(env.time_step_spec(), env.action_spec(), seed=seed)
    steps: List[RandomStep] = []
    time_step = env.reset()
    while len(steps) < count:
        action = policy.action(time_step).action
        next_time_step = env.step(action)
        steps.append((time_step, action, next_time_step))
        time_step = next_time_step
    env.close()
    return steps


def to_stock_trajectory(step: RandomStep) -> trajectory.Trajectory:
    """What the stock PyDriver hands its observers for this step."""
    time_step, action, next_time_step = step
    return trajectory.from_transition(
        time_step, policy_step.PolicyStep(action, (), ()), next_time_step
    )


def to_our_row(step: RandomStep) -> np.ndarray:
    """The replay row ActorLoop writes for this step (it never steps from a LAST step)."""
    time_step, action, next_time_step = step
    return specs_lib.pack_transition(
        {
            specs_lib.OBSERVATION: time_step.observation,
            specs_lib.ACTION: action,
            specs_lib.REWARD: next_time_step.reward,
            specs_lib.DISCOUNT: next_time_step.discount,
            specs_lib.NEXT_OBSERVATION: next_time_step.observation,
        }
    )


def initial_policy_weights(specs: EnvSpecs, hparams: Hyperparams) -> List[np.ndarray]:
    """Freshly initialised actor-network weights, in the variable container's order."""
    network = agent_lib.make_actor_network(specs, hparams)
    network.create_variables()
    return [v.numpy() for v in network.variables]


def inserted_items(client: reverb.Client, table: str) -> int:
    """Items the server has accepted into `table` since it started."""
    info = client.server_info(timeout=10)[table]
    return int(info.rate_limiter_info.insert_stats.completed)


def write_rows(writer: replay.TransitionWriter, rows: Iterable[np.ndarray]) -> None:
    """Writes and throttles as ActorLoop does, then flushes."""
    for row in rows:
        writer.write_row(row)
        while not writer.throttle():
            pass
    writer.flush()


def stock_table(capacity: int) -> reverb.Table:
    """The tutorial's replay table (no signature, MinSize(1))."""
    return reverb.Table(
        STOCK_TABLE,
        max_size=capacity,
        sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(),
        rate_limiter=reverb.rate_limiters.MinSize(1),
    )


# --- shared set-up: servers, agents, filled tables ------------------------------------


@dataclasses.dataclass
class OurReplay:
    """Our tables (replay.make_tables) on a Reverb server, filled, weights pushed."""

    server: Union[reverb.Server, ServerProcess]  # both have stop()
    address: str
    client: reverb.Client


@dataclasses.dataclass
class StockReplay:
    """The tutorial's agent, table, ReverbReplayBuffer and Reverb server, filled."""

    agent: sac_agent.SacAgent
    train_step: tf.Variable
    server: Union[reverb.Server, ServerProcess]
    buffer: reverb_replay_buffer.ReverbReplayBuffer

    def observer(self) -> reverb_utils.ReverbAddTrajectoryObserver:
        return reverb_utils.ReverbAddTrajectoryObserver(
            self.buffer.py_client, STOCK_TABLE, sequence_length=2, stride_length=1
        )

    def dataset(self, batch_size: int) -> tf.data.Dataset:
        return self.buffer.as_dataset(sample_batch_size=batch_size, num_steps=2).prefetch(
            STOCK_PREFETCH
        )


class Bench:
    """Lazily built resources shared by the pieces; `close()` releases them."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.hparams = throughput_hparams(settings)
        self.extras: Dict[str, float] = {}
        self._tmp = tempfile.mkdtemp(prefix="sac_bench_")

    def tmpdir(self, name: str) -> str:
        path = os.path.join(self._tmp, name)
        os.makedirs(path, exist_ok=True)
        return path

    @functools.cached_property
    def specs(self) -> EnvSpecs:
        return specs_lib.specs_for(self.settings.env_name)

    @functools.cached_property
    def random_steps(self) -> List[RandomStep]:
        s = self.settings
        logging.info("Collecting %d random steps of %s.", s.fill_items, s.env_name)
        return collect_random_steps(s.env_name, s.fill_items, s.seed)

    @functools.cached_property
    def our_rows(self) -> List[np.ndarray]:
        return [to_our_row(x) for x in self.random_steps if not x[0].is_last()]

    @functools.cached_property
    def stock_trajectories(self) -> List[trajectory.Trajectory]:
        return [to_stock_trajectory(x) for x in self.random_steps]

    @functools.cached_property
    def our_replay(self) -> OurReplay:
        server, address = self._start_our_server()
        client = reverb.Client(address)
        writer = replay.TransitionWriter(client)
        write_rows(writer, self.our_rows)
        writer.close()
        weights = initial_policy_weights(self.specs, self.hparams)
        self.extras["variable_push_bytes"] = VariableContainer(client).push(weights, 1)
        return OurReplay(server, address, client)

    def _start_our_server(self) -> Tuple[Union[reverb.Server, ServerProcess], str]:
        if self.settings.server == "subprocess":
            process = our_server_process(self, "server", self.hparams.replay_buffer_capacity)
            process.connect()
            return process, process.address
        config = ServerConfig(self.settings.env_name, self.hparams, self.tmpdir("server"))
        server = reverb.Server(replay.make_tables(config, self.specs), port=None)
        return server, f"localhost:{server.port}"

    @functools.cached_property
    def stock_replay(self) -> StockReplay:
        train_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
        agent = agent_lib.make_agent(self.specs, self.hparams, train_step)  # the tutorial's
        server, where = self._start_stock_server()
        buffer = reverb_replay_buffer.ReverbReplayBuffer(
            agent.collect_data_spec, sequence_length=2, table_name=STOCK_TABLE, **where
        )
        stock = StockReplay(agent, train_step, server, buffer)
        observer = stock.observer()
        for traj in self.stock_trajectories:
            observer(traj)
        observer.flush()
        observer.close()
        return stock

    def _start_stock_server(self) -> Tuple[Union[reverb.Server, ServerProcess], Dict]:
        """The server and how ReverbReplayBuffer should reach it."""
        capacity = self.hparams.replay_buffer_capacity
        if self.settings.server == "subprocess":
            process = stock_server_process(self, "stock_server", capacity)
            process.connect()
            return process, {"server_address": process.address}
        server = reverb.Server([stock_table(capacity)], port=None)
        return server, {"local_server": server}

    @functools.cached_property
    def stock_learner(self) -> tfa_learner.Learner:
        stock = self.stock_replay
        batch_size = self.hparams.batch_size
        return tfa_learner.Learner(
            self.tmpdir("stock_learner"),
            stock.train_step,
            stock.agent,
            lambda: stock.dataset(batch_size),
            strategy=tf.distribute.get_strategy(),
        )

    @functools.cached_property
    def learner_driver(self) -> LearnerLoopDriver:
        return LearnerLoopDriver(self)

    def close(self) -> None:
        for name in ("our_replay", "stock_replay"):
            if name in self.__dict__:
                self.__dict__[name].server.stop()
        shutil.rmtree(self._tmp, ignore_errors=True)


class LearnerLoopDriver:
    """Runs LearnerLoop's own training for a given time, through its public API.

    `LearnerLoop.run()` only stops at num_iterations or a stop signal and then
    writes a checkpoint and three SavedModels, so it cannot be timed window by
    window. This driver calls run()'s first two parts: `start()` (first push,
    warm replay, the Reverb iterator) once, then `train(steps_per_call)` per
    chunk: one guarded tf.function call of steps_per_call updates, then that
    step's scheduled weight push / summaries, with run()'s sampling-timeout
    retry. The trace is paid once and every window is steady state. The
    constant-batch variant calls the SAC update alone, `SacLearner.step`, on an
    in-memory batch: compute without the data path.
    """

    def __init__(self, bench: Bench):
        our = bench.our_replay
        client_config = ClientConfig(our.address, our.address)
        config = LearnerConfig(
            bench.settings.env_name,
            bench.hparams,
            bench.tmpdir("learner"),
            client=client_config,
            steps_per_call=bench.settings.steps_per_call,
            checkpoint_interval=NEVER,
        )
        connection = Connection(client_config, "benchmark learner", lambda: False)
        connection.open()
        self._steps_per_call = config.steps_per_call
        self.loop = LearnerLoop(
            config, bench.specs, tf.distribute.get_strategy(), connection, Metrics(None)
        )
        if not self.loop.start():
            raise RuntimeError("The benchmark learner was stopped while starting.")
        self._const_iterator: Optional[Iterator] = None
        self._make_batch = lambda: next(
            iter(replay.make_dataset(our.address, bench.specs, bench.hparams.batch_size))
        )

    def step(self) -> int:
        """One training call on the Reverb iterator; returns train steps done."""
        return self.loop.train(self._steps_per_call)

    def const_batch_step(self) -> int:
        """The SAC update alone on one in-memory batch repeated forever."""
        learner = self.loop.learner
        if self._const_iterator is None:
            batch = self._make_batch()
            dataset = learner.strategy.distribute_datasets_from_function(
                lambda _: tf.data.Dataset.from_tensors(batch).repeat()
            )
            self._const_iterator = iter(dataset)
        learner.step(self._const_iterator, self._steps_per_call)
        return self._steps_per_call


# --- the pieces: each sets up, warms up, and returns its Measure -----------------------


def setup_raw_env(bench: Bench) -> Measure:
    """The py env alone: uniform random actions, no policy, no writing."""
    env = specs_lib.load_env(bench.settings.env_name, bench.settings.seed)
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

    return lambda d: run_for(chunk, d, lead_in_for(d))


def setup_stock_actor(bench: Bench) -> Measure:
    """tf_agents Actor + PyTFEagerPolicy(collect_policy) + ReverbAddTrajectoryObserver."""
    stock = bench.stock_replay
    env = specs_lib.load_env(bench.settings.env_name, bench.settings.seed)
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
    )
    envs = [specs_lib.load_env(s.env_name, s.seed + i) for i in range(s.num_envs)]
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
    # `_warm` is ActorLoop's switch from random to collect actions.
    if loop.stats.weight_updates < 1 or not getattr(loop, "_warm", True):
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

    return lambda d: run_for(chunk, d, lead_in_for(d))


def setup_stock_learner_multi(bench: Bench) -> Measure:
    """The stock Learner with `run(iterations=steps_per_call)`."""
    return setup_stock_learner(bench, bench.settings.steps_per_call)


def setup_learner(bench: Bench) -> Measure:
    """Our LearnerLoop: steps_per_call SAC updates per call over make_dataset()."""
    driver = bench.learner_driver
    for _ in range(2):
        driver.step()  # the first call traces
    return lambda d: run_for(driver.step, d, lead_in_for(d))


def setup_learner_const_batch(bench: Bench) -> Measure:
    """Our SAC update (SacLearner.step) on a constant in-memory batch (no Reverb)."""
    driver = bench.learner_driver
    for _ in range(2):
        driver.const_batch_step()
    return lambda d: run_for(driver.const_batch_step, d, lead_in_for(d))


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

    return lambda d: run_for(chunk, d, lead_in_for(d))


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


# --- server memory (subprocess) --------------------------------------------------------


def read_rss_mb(pid: int) -> float:
    """VmRSS of process `pid` in MiB, from /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"No VmRSS in /proc/{pid}/status")


_STOCK_SERVER_SCRIPT = """
import sys
import reverb
port, capacity, name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
table = reverb.Table(name, max_size=capacity, sampler=reverb.selectors.Uniform(),
                     remover=reverb.selectors.Fifo(),
                     rate_limiter=reverb.rate_limiters.MinSize(1))
reverb.Server([table], port=port).wait()
"""


class ServerProcess:
    """A Reverb server in a child process; stop() SIGKILLs it (no exit checkpoint)."""

    def __init__(self, argv: List[str], log_path: str, port: int):
        self._log = open(log_path, "w")
        self._log_path = log_path
        self.address = f"localhost:{port}"
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)

    def connect(self) -> reverb.Client:
        """A client once the server answers; its log in the error if it never does."""
        try:
            return replay.connect(self.address, SERVER_START_TIMEOUT_S, "benchmark")
        except ServerUnreachableError as e:
            with open(self._log_path) as f:
                tail = f.read()[-2000:]
            raise RuntimeError(f"Server did not start: {e}\n--- its log ---\n{tail}") from e

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # SIGKILL: skip the replay checkpoint a SIGTERM would write
        self.proc.wait()
        self._log.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def our_server_process(bench: Bench, name: str, capacity: int) -> ServerProcess:
    """`python -m sac_distributed.bin.reverb_server` with the benchmark's settings."""
    s, hp = bench.settings, bench.hparams
    port = portpicker.pick_unused_port()
    layers = ",".join(str(u) for u in hp.actor_fc_layer_params)
    critic = ",".join(str(u) for u in hp.critic_joint_fc_layer_params)
    argv = [
        sys.executable,
        "-m",
        "sac_distributed.bin.reverb_server",
        f"--root_dir={bench.tmpdir(name)}",
        f"--env_name={s.env_name}",
        f"--port={port}",
        "--samples_per_insert=0",
        "--initial_collect_steps=0",
        f"--batch_size={hp.batch_size}",
        f"--replay_buffer_capacity={capacity}",
        f"--transitions_per_item={hp.transitions_per_item}",
        f"--actor_fc_layer_params={layers}",
        f"--critic_joint_fc_layer_params={critic}",
        "--replay_checkpoint_interval=0",
        "--stats_interval=3600",
    ]
    return ServerProcess(argv, os.path.join(bench.tmpdir(name), "log.txt"), port)


def stock_server_process(bench: Bench, name: str, capacity: int) -> ServerProcess:
    """A bare Reverb server holding the tutorial's table."""
    port = portpicker.pick_unused_port()
    argv = [sys.executable, "-c", _STOCK_SERVER_SCRIPT, str(port), str(capacity), STOCK_TABLE]
    return ServerProcess(argv, os.path.join(bench.tmpdir(name), "log.txt"), port)


def measure_server_rss(bench: Bench) -> Dict[str, float]:
    """RSS of `python -m sac_distributed.bin.reverb_server` after --rss_items inserts."""
    items = bench.settings.rss_items
    k = bench.hparams.transitions_per_item
    capacity = max(bench.hparams.replay_buffer_capacity, -(-items // k) * k)
    with our_server_process(bench, "rss_server", capacity) as server:
        client = server.connect()
        writer = replay.TransitionWriter(client)
        rows = itertools.cycle(bench.our_rows)

        def write(count: int) -> None:
            write_rows(writer, itertools.islice(rows, -(-count // k) * k))

        return _fill_and_read_rss(server.proc.pid, client, replay.REPLAY_TABLE, write, items, k)


def measure_stock_server_rss(bench: Bench) -> Dict[str, float]:
    """The same for the tutorial's table (2-step items) in a bare Reverb server."""
    items = bench.settings.rss_items
    capacity = max(bench.hparams.replay_buffer_capacity, items)
    with stock_server_process(bench, "rss_stock_server", capacity) as server:
        client = server.connect()
        observer = reverb_utils.ReverbAddTrajectoryObserver(client, STOCK_TABLE, 2, 1)
        trajectories = itertools.cycle(bench.stock_trajectories)

        def write(count: int) -> None:
            for traj in itertools.islice(trajectories, count):
                observer(traj)
            observer.flush()

        return _fill_and_read_rss(server.proc.pid, client, STOCK_TABLE, write, items)


def _fill_and_read_rss(
    pid: int,
    client: reverb.Client,
    table: str,
    write: Callable[[int], None],
    items: int,
    transitions_per_item: int = 1,
) -> Dict[str, float]:
    """Fills `table` with `items` transitions; `size` counts transitions (items x K)."""
    time.sleep(1.0)  # let the freshly started server settle before the baseline
    before = read_rss_mb(pid)
    size = 0
    while size < items:
        write(min(10_000, items - size))
        size = client.server_info(timeout=10)[table].current_size * transitions_per_item
    time.sleep(1.0)
    after = read_rss_mb(pid)
    return {
        "rss_mb": after,
        "rss_before_mb": before,
        "bytes_per_transition": (after - before) * 2**20 / size,
        "items": float(size),
    }


# --- throughput mode -------------------------------------------------------------------


def run_throughput(s: Settings) -> Dict[str, object]:
    """Sets every selected piece up, then measures them in alternating rounds."""
    selected = s.only or all_pieces()
    bench = Bench(s)
    runs: Dict[str, List[float]] = {}
    one_shot: Dict[str, Dict[str, float]] = {}
    try:
        measures = {}
        for name in (n for n in PIECES if n in selected):
            logging.info("Setting up %s.", name)
            measures[name] = SETUPS[name](bench)
        for round_index in range(s.repeats):
            for name, measure in measures.items():
                time.sleep(s.settle_s)
                value = measure(s.duration)
                runs.setdefault(PIECES[name][0], []).append(value)
                logging.info("Round %d/%d %s: %.1f", round_index + 1, s.repeats, name, value)
        if "stock_server_rss" in selected:
            one_shot["stock_server"] = measure_stock_server_rss(bench)
        if "server_rss" in selected:
            one_shot["server"] = measure_server_rss(bench)
        if "variable_push_bytes" not in bench.extras:
            weights = initial_policy_weights(bench.specs, bench.hparams)
            bench.extras["variable_push_bytes"] = sum(w.nbytes for w in weights)
        payload = transition_payload_bytes(bench.specs)
    finally:
        bench.close()
    return summarize(s, bench.hparams, runs, one_shot, bench.extras, payload)


def transition_payload_bytes(specs: EnvSpecs) -> int:
    """Raw bytes of one (s, a, r, discount, s') transition, before any overhead."""
    obs = int(np.prod(specs.observation.shape)) * specs.observation.dtype.size
    act = int(np.prod(specs.action.shape)) * specs.action.dtype.size
    return 2 * obs + act + 2 * 4


def summarize(
    s: Settings,
    hp: Hyperparams,
    runs: Dict[str, List[float]],
    one_shot: Dict[str, Dict[str, float]],
    extras: Dict[str, float],
    payload_bytes: int,
) -> Dict[str, object]:
    """Medians of the rounds plus derived numbers, as the JSON report."""
    result: Dict[str, object] = {key: None for key in REQUIRED_KEYS}
    result.update({key: median(values) for key, values in runs.items()})
    for prefix, rss in (
        ("server", one_shot.get("server")),
        ("stock_server", one_shot.get("stock_server")),
    ):
        if rss:
            result[f"{prefix}_rss_mb"] = rss["rss_mb"]
            result[f"{prefix}_rss_before_mb"] = rss["rss_before_mb"]
            result[f"{prefix}_bytes_per_transition"] = rss["bytes_per_transition"]
    result["transition_payload_bytes"] = payload_bytes
    result["variable_push_bytes"] = extras.get("variable_push_bytes")
    result.update(derived_ratios(result))
    result["config"] = {
        "env_name": s.env_name,
        "actor_layers": list(hp.actor_fc_layer_params),
        "critic_layers": list(hp.critic_joint_fc_layer_params),
        "batch_size": hp.batch_size,
        "num_envs": s.num_envs,
        "steps_per_call": s.steps_per_call,
        "duration_s": s.duration,
        "repeats": s.repeats,
        "fill_items": s.fill_items,
        "rss_items": s.rss_items,
        "transitions_per_item": hp.transitions_per_item,
        "num_parallel_datasets": s.num_parallel_datasets,
        "max_in_flight": s.max_in_flight,
        "server": s.server,
        "cpus": os.cpu_count(),
    }
    result["runs"] = runs
    return result


def derived_ratios(r: Dict[str, object]) -> Dict[str, Optional[float]]:
    """Speed-ups of ours over stock, and the learner's data-wait share."""

    def ratio(a: str, b: str) -> Optional[float]:
        x, y = r.get(a), r.get(b)
        return float(x) / float(y) if x and y else None

    fed_over_const = ratio("learner_steps_per_s", "learner_const_batch_steps_per_s")
    return {
        "actor_speedup": ratio("actor_env_steps_per_s", "stock_actor_env_steps_per_s"),
        "actor_fraction_of_raw_env": ratio("actor_env_steps_per_s", "raw_env_steps_per_s"),
        "stock_actor_fraction_of_raw_env": ratio(
            "stock_actor_env_steps_per_s", "raw_env_steps_per_s"
        ),
        "learner_speedup": ratio("learner_steps_per_s", "stock_learner_steps_per_s"),
        # Share of a train step spent waiting for data: 1 - fed rate / compute-only rate.
        "data_path_fraction": None if fed_over_const is None else max(0.0, 1.0 - fed_over_const),
        "replay_insert_speedup": ratio("replay_insert_per_s", "stock_replay_insert_per_s"),
        "replay_sample_speedup": ratio("replay_sample_per_s", "stock_replay_sample_per_s"),
    }


def format_throughput_table(result: Dict[str, object]) -> str:
    """The human-readable report."""
    c = result["config"]
    lines = [
        f"sac_distributed vs stock TF-Agents on {c['env_name']}: actor {c['actor_layers']}, "
        f"critic {c['critic_layers']}, batch {c['batch_size']}, num_envs {c['num_envs']}, "
        f"{c['duration_s']:g} s x {c['repeats']} rounds, {c['server']} servers, "
        f"{c['cpus']} CPUs",
        f"{'measurement':<34}{'median':>12}{'min':>12}{'max':>12}  unit",
    ]
    runs = result["runs"]
    for key, unit in PIECES.values():
        if key in runs:
            v = runs[key]
            lines.append(f"{key:<34}{median(v):>12.1f}{min(v):>12.1f}{max(v):>12.1f}  {unit}")
    for key, unit in (
        ("stock_server_rss_mb", "MiB"),
        ("stock_server_bytes_per_transition", "bytes"),
        ("server_rss_mb", "MiB"),
        ("server_bytes_per_transition", "bytes"),
        ("transition_payload_bytes", "bytes"),
        ("variable_push_bytes", "bytes"),
        ("actor_speedup", "x"),
        ("actor_fraction_of_raw_env", ""),
        ("stock_actor_fraction_of_raw_env", ""),
        ("learner_speedup", "x"),
        ("data_path_fraction", ""),
        ("replay_insert_speedup", "x"),
        ("replay_sample_speedup", "x"),
    ):
        if result.get(key) is not None:
            lines.append(f"{key:<34}{result[key]:>12.3f}{'':>24}  {unit}")
    return "\n".join(lines)


# --- actor scaling mode -----------------------------------------------------------------

ACTOR_START_MARK = "switching from random to the collect policy"  # logged at an actor's first step
ACTOR_STOP_MARK = "stopping (max_env_steps reached)"


def run_actor_scaling(s: Settings) -> Dict[str, object]:
    """N `python -m sac_distributed.bin.actor` processes against one server subprocess.

    For each N in --actor_counts (alternating over --repeats rounds), a fresh
    `sac_distributed.bin.reverb_server` gets the policy weights, then N actors
    run --actor_steps env steps each with the NumPy collect policy
    (initial_collect_steps=0). The server's insert count is polled; `steady`
    is the insert rate (in transitions) while all N actors were stepping (from
    the last actor's first step to the first actor's stop, read from their
    logs), `overall` is all transitions / (last stop - first step).
    """
    bench = Bench(s)
    hp = bench.hparams
    runs: Dict[str, List[Dict[str, float]]] = {}
    try:
        for round_index in range(s.repeats):
            for n in s.actor_counts:
                logging.info("Round %d/%d: %d actor process(es).", round_index + 1, s.repeats, n)
                result = _run_actors(bench, n, f"scaling_{n}_{round_index}")
                logging.info("%d actors: %s", n, result)
                runs.setdefault(str(n), []).append(result)
    finally:
        bench.close()
    summary = {n: {key: median([r[key] for r in rs]) for key in rs[0]} for n, rs in runs.items()}
    return {
        "mode": "actor_scaling",
        "actor_scaling": summary,
        "config": {
            "env_name": s.env_name,
            "actor_layers": list(hp.actor_fc_layer_params),
            "num_envs": s.num_envs,
            "actor_steps": s.actor_steps,
            "transitions_per_item": hp.transitions_per_item,
            "repeats": s.repeats,
            "cpus": os.cpu_count(),
        },
        "runs": runs,
    }


def _run_actors(bench: Bench, n: int, name: str) -> Dict[str, float]:
    s, hp = bench.settings, bench.hparams
    k = hp.transitions_per_item
    layers = ",".join(str(u) for u in hp.actor_fc_layer_params)
    critic = ",".join(str(u) for u in hp.critic_joint_fc_layer_params)
    with our_server_process(bench, name, hp.replay_buffer_capacity) as server:
        client = server.connect()
        VariableContainer(client).push(initial_policy_weights(bench.specs, hp), 1)
        logs, procs = [], []
        for task in range(n):
            log_path = os.path.join(bench.tmpdir(name), f"actor_{task}.log")
            argv = [
                sys.executable,
                "-m",
                "sac_distributed.bin.actor",
                f"--root_dir={bench.tmpdir(name)}",
                f"--env_name={s.env_name}",
                f"--replay_buffer_server_address={server.address}",
                f"--variable_container_server_address={server.address}",
                f"--task={task}",
                f"--num_envs={s.num_envs}",
                f"--max_env_steps={s.actor_steps}",
                f"--seed={s.seed}",
                "--initial_collect_steps=0",
                "--samples_per_insert=0",
                f"--batch_size={hp.batch_size}",
                f"--transitions_per_item={k}",
                f"--actor_fc_layer_params={layers}",
                f"--critic_joint_fc_layer_params={critic}",
            ]
            log = open(log_path, "w")
            procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
            logs.append((log, log_path))
        samples: List[Tuple[float, int]] = []
        started: Dict[int, float] = {}
        stopped: Dict[int, float] = {}
        deadline = time.monotonic() + 600.0
        try:
            while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
                now = time.monotonic()
                samples.append((now, k * inserted_items(client, replay.REPLAY_TABLE)))
                for task, (_, path) in enumerate(logs):
                    if task in stopped:
                        continue
                    with open(path) as f:
                        text = f.read()
                    if task not in started and ACTOR_START_MARK in text:
                        started[task] = now
                    if ACTOR_STOP_MARK in text:
                        stopped[task] = now
                time.sleep(0.25)
            samples.append((time.monotonic(), k * inserted_items(client, replay.REPLAY_TABLE)))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
            for log, _ in logs:
                log.close()
        failed = [i for i, p in enumerate(procs) if p.returncode != 0]
        if failed or len(started) < n or len(stopped) < n:
            with open(logs[failed[0] if failed else 0][1]) as f:
                tail = f.read()[-3000:]
            raise RuntimeError(f"actor(s) {failed} failed or never started/stopped:\n{tail}")
    return {
        "steady_env_steps_per_s": _rate_between(
            samples, max(started.values()), min(stopped.values())
        ),
        "overall_env_steps_per_s": _rate_between(
            samples, min(started.values()), max(stopped.values())
        ),
        "transitions": float(samples[-1][1]),
    }


def _rate_between(samples: List[Tuple[float, int]], t0: float, t1: float) -> float:
    """Insert rate between the polls nearest to t0 and t1 (transitions/s)."""
    inside = [x for x in samples if t0 <= x[0] <= t1]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return float("nan")
    (a, x), (b, y) = inside[0], inside[-1]
    return (y - x) / (b - a)


def format_actor_scaling_table(result: Dict[str, object]) -> str:
    c = result["config"]
    lines = [
        f"Actor processes against one server on {c['env_name']} (actor {c['actor_layers']}, "
        f"num_envs {c['num_envs']}, K={c['transitions_per_item']}, {c['actor_steps']} steps "
        f"each, {c['repeats']} round(s), median, {c['cpus']} CPUs)",
        f"{'actors':>6}{'steady total':>16}{'per actor':>12}{'overall total':>16}  env steps/s",
    ]
    for n, r in result["actor_scaling"].items():
        steady = r["steady_env_steps_per_s"]
        lines.append(
            f"{n:>6}{steady:>16.0f}{steady / int(n):>12.0f}{r['overall_env_steps_per_s']:>16.0f}"
        )
    return "\n".join(lines)


# --- time-to-return mode ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Reached:
    """When (seconds since start) and where an eval first reached the target."""

    seconds: float
    train_step: int
    env_steps: int
    average_return: float


@dataclasses.dataclass
class StockTutorialLoop:
    """The TF-Agents SAC tutorial's pieces, after its random initial collect.

    `collect.run()` steps the env once with the collect policy into the
    tutorial's table; `learner.run(iterations=n)` trains n steps on it.
    """

    agent: sac_agent.SacAgent
    train_step: tf.Variable
    collect: tfa_actor.Actor
    learner: tfa_learner.Learner
    observer: reverb_utils.ReverbAddTrajectoryObserver
    server: reverb.Server
    tmp: str

    def close(self) -> None:
        self.observer.close()
        self.server.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def make_stock_tutorial_loop(
    collect_env: py_environment.PyEnvironment, env_name: str, hp: Hyperparams, seed: int
) -> StockTutorialLoop:
    """Builds the tutorial loop on `collect_env` and runs its random initial collect."""
    specs = specs_lib.env_specs(collect_env, env_name)
    train_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
    agent = agent_lib.make_agent(specs, hp, train_step)
    server = reverb.Server([stock_table(hp.replay_buffer_capacity)], port=None)
    buffer = reverb_replay_buffer.ReverbReplayBuffer(
        agent.collect_data_spec, sequence_length=2, table_name=STOCK_TABLE, local_server=server
    )
    observer = reverb_utils.ReverbAddTrajectoryObserver(buffer.py_client, STOCK_TABLE, 2, 1)
    random_policy = random_py_policy.RandomPyPolicy(
        collect_env.time_step_spec(), collect_env.action_spec(), seed=seed
    )
    tfa_actor.Actor(
        collect_env,
        random_policy,
        train_step,
        steps_per_run=hp.initial_collect_steps,
        observers=[observer],
    ).run()
    collect = tfa_actor.Actor(
        collect_env,
        py_tf_eager_policy.PyTFEagerPolicy(agent.collect_policy, use_tf_function=True),
        train_step,
        steps_per_run=1,
        observers=[observer],
    )
    tmp = tempfile.mkdtemp(prefix="sac_bench_stock_")
    learner = tfa_learner.Learner(
        tmp,
        train_step,
        agent,
        lambda: buffer.as_dataset(sample_batch_size=hp.batch_size, num_steps=2).prefetch(
            STOCK_PREFETCH
        ),
    )
    return StockTutorialLoop(agent, train_step, collect, learner, observer, server, tmp)


def stock_time_to_return(s: Settings, hp: Hyperparams) -> Optional[Reached]:
    """The TF-Agents SAC tutorial loop, in-process, until the target or the cap."""
    start = time.monotonic()
    deadline = start + 60.0 * s.max_minutes
    collect_env = specs_lib.load_env(s.env_name, s.seed)
    eval_env = specs_lib.load_env(s.env_name, s.seed + 10_000)
    loop = make_stock_tutorial_loop(collect_env, s.env_name, hp, s.seed)
    try:
        evaluate = _stock_evaluator(eval_env, loop.agent, loop.train_step, hp.num_eval_episodes)
        return _stock_train_until(s, hp, start, deadline, loop.collect, loop.learner, evaluate)
    finally:
        loop.close()


def _stock_evaluator(
    env: py_environment.PyEnvironment,
    agent: sac_agent.SacAgent,
    train_step: tf.Variable,
    episodes: int,
) -> Callable[[], float]:
    """The tutorial's eval Actor with the greedy policy; returns AverageReturn."""
    policy = py_tf_eager_policy.PyTFEagerPolicy(
        greedy_policy.GreedyPolicy(agent.policy), use_tf_function=True
    )
    eval_actor = tfa_actor.Actor(
        env,
        policy,
        train_step,
        episodes_per_run=episodes,
        metrics=tfa_actor.eval_metrics(episodes),
    )

    def evaluate() -> float:
        eval_actor.run()
        return float(eval_actor.metrics[0].result())  # AverageReturnMetric

    return evaluate


def _stock_train_until(
    s: Settings,
    hp: Hyperparams,
    start: float,
    deadline: float,
    collect: tfa_actor.Actor,
    learner: tfa_learner.Learner,
    evaluate: Callable[[], float],
) -> Optional[Reached]:
    """collect 1 step, train 1 step, eval every eval_interval (and at step 0)."""
    step = 0
    while True:
        if step % hp.eval_interval == 0:
            average = evaluate()
            logging.info("stock: train_step %d, eval AverageReturn %.1f", step, average)
            if average >= s.target_return:
                env_steps = hp.initial_collect_steps + step
                return Reached(time.monotonic() - start, step, env_steps, average)
        if time.monotonic() >= deadline:
            return None
        collect.run()
        learner.run(iterations=1)
        step = int(learner.train_step_numpy)


def launch_command(s: Settings, root_dir: str) -> List[str]:
    """`sac-launch` with the shared flags this benchmark controls."""
    exe = os.path.join(os.path.dirname(sys.executable), "sac-launch")
    if not os.path.exists(exe):
        exe = shutil.which("sac-launch") or ""
    if not exe:
        raise FileNotFoundError("sac-launch is not installed (pip install -e . provides it).")
    argv = [
        exe,
        f"--root_dir={root_dir}",
        f"--env_name={s.env_name}",
        f"--num_actors={s.num_actors}",
        f"--seed={s.seed}",
    ]
    if s.batch_size:
        argv.append(f"--batch_size={s.batch_size}")
    if s.layers:
        layers = ",".join(str(u) for u in s.layers)
        argv += [f"--actor_fc_layer_params={layers}", f"--critic_joint_fc_layer_params={layers}"]
    if s.num_envs > 1:
        argv.append(f"--num_envs={s.num_envs}")
    return argv + list(s.launch_flags)


def ours_time_to_return(s: Settings) -> Optional[Reached]:
    """Runs sac-launch and watches root_dir/eval/results.csv until the target or the cap."""
    root_dir = tempfile.mkdtemp(prefix="sac_bench_launch_")
    results = paths.results_path(root_dir)
    log_path = os.path.join(root_dir, "launch_output.txt")
    argv = launch_command(s, root_dir)
    logging.info("ours: %s", " ".join(argv))
    start_wall = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            reached = _watch_results(results, proc, start_wall, s)
        finally:
            _stop_process_group(proc)
    if reached is None and proc.returncode not in (0, -signal.SIGTERM, None):
        with open(log_path) as f:
            logging.warning(
                "sac-launch exited %s; last output:\n%s", proc.returncode, f.read()[-3000:]
            )
    shutil.rmtree(root_dir, ignore_errors=True)
    return reached


def _watch_results(
    path: str, proc: subprocess.Popen, start_wall: float, s: Settings
) -> Optional[Reached]:
    deadline = start_wall + 60.0 * s.max_minutes
    while time.time() < deadline:
        exited = proc.poll() is not None
        for point in _read_points(path):
            if point.average_return >= s.target_return:
                return Reached(
                    point.wall_time - start_wall,
                    point.train_step,
                    point.env_steps,
                    point.average_return,
                )
        if exited:
            logging.warning("sac-launch exited (code %s) before the target.", proc.returncode)
            return None
        time.sleep(1.0)
    return None


def _read_points(path: str) -> List[results.EvalPoint]:
    """The evaluations so far; none while the file is missing or a row half written."""
    try:
        return results.read_results(path)
    except ConfigError:
        return []


def _stop_process_group(proc: subprocess.Popen, grace_s: float = 60.0) -> None:
    """SIGTERM to the launcher (it stops its jobs), SIGKILL to its group if it hangs."""
    if proc.poll() is not None:
        return
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the session this benchmark started
        proc.wait()
    logging.info(
        "sac-launch stopped in %.1f s (exit code %s).", time.monotonic() - start, proc.returncode
    )


def run_time_to_return(s: Settings) -> Dict[str, object]:
    """Alternates stock and ours for --repeats rounds; median time (inf = not reached)."""
    hp = preset_hparams(s)
    runs: Dict[str, List[Optional[Reached]]] = {"stock": [], "ours": []}
    for round_index in range(s.repeats):
        for side, fn in (
            ("stock", lambda: stock_time_to_return(s, hp)),
            ("ours", lambda: ours_time_to_return(s)),
        ):
            logging.info(
                "Round %d/%d: %s time to return %.0f.",
                round_index + 1,
                s.repeats,
                side,
                s.target_return,
            )
            runs[side].append(fn())
            logging.info("%s: %s", side, runs[side][-1])
    return {
        "mode": "time_to_return",
        "stock_time_to_return_s": _median_time(runs["stock"]),
        "time_to_return_s": _median_time(runs["ours"]),
        "target_return": s.target_return,
        "max_minutes": s.max_minutes,
        "config": {
            "env_name": s.env_name,
            "layers": list(hp.actor_fc_layer_params),
            "batch_size": hp.batch_size,
            "num_actors": s.num_actors,
            "repeats": s.repeats,
        },
        "runs": {
            side: [dataclasses.asdict(r) if r else None for r in rs] for side, rs in runs.items()
        },
    }


def _median_time(reached: List[Optional[Reached]]) -> Optional[float]:
    seconds = [r.seconds if r else float("inf") for r in reached]
    value = median(seconds)
    return None if value == float("inf") else value


def format_time_to_return_table(result: Dict[str, object]) -> str:
    def show(v: Optional[float]) -> str:
        return "not reached" if v is None else f"{v:.1f} s"

    c = result["config"]
    lines = [
        f"Time to eval AverageReturn >= {result['target_return']:g} on {c['env_name']} "
        f"(cap {result['max_minutes']:g} min, {c['repeats']} round(s), median):",
        f"  stock tutorial loop (in-process): {show(result['stock_time_to_return_s'])}",
        f"  sac-launch, {c['num_actors']} actor(s): {show(result['time_to_return_s'])}",
    ]
    for side, rs in result["runs"].items():
        for i, r in enumerate(rs):
            detail = (
                "not reached"
                if r is None
                else (
                    f"{r['seconds']:.1f} s at train_step {r['train_step']}, env_steps "
                    f"{r['env_steps']}, return {r['average_return']:.1f}"
                )
            )
            lines.append(f"  {side} round {i + 1}: {detail}")
    return "\n".join(lines)


# --- entry point -------------------------------------------------------------------------


def reserve_stdout_for_report():
    """Sends fd 1 to stderr so C-level chatter (pybullet, TF) cannot follow the JSON.

    Returns a text stream on the original stdout for the report.
    """
    sys.stdout.flush()
    report = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    return report


def main(argv: Sequence[str]) -> int:
    settings = parse_settings(argv)
    report = reserve_stdout_for_report()
    logging.set_verbosity(logging.INFO)
    if settings.mode == "time_to_return":
        result = run_time_to_return(settings)
        table = format_time_to_return_table(result)
    elif settings.mode == "actor_scaling":
        result = run_actor_scaling(settings)
        table = format_actor_scaling_table(result)
    else:
        result = run_throughput(settings)
        table = format_throughput_table(result)
    report.write(table + "\n")
    report.write(json.dumps(result, default=float) + "\n")
    report.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
