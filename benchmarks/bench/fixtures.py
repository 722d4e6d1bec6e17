"""What the throughput pieces share: servers, agents, learners, built once and lazily.

`Bench` builds each resource the first time a piece asks for it (a run
with `--only=raw_env` starts no server), fills the replay tables with the
same random experience on both sides, and releases everything in `close()`.
Ours is reached only through the library's public API: `LearnerLoop.start()`
and `train(n)`, `SacLearner.step`, `ActorLoop.run()`, `TransitionWriter` and
`make_dataset`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import tempfile
from typing import Dict, Iterator, List, Optional, Tuple, Union

import numpy as np
import reverb
import tensorflow as tf
from absl import logging
from tf_agents.agents.sac import sac_agent
from tf_agents.replay_buffers import reverb_replay_buffer, reverb_utils
from tf_agents.train import learner as tfa_learner
from tf_agents.trajectories import trajectory

from benchmarks.bench import experience, stock
from benchmarks.bench.servers import ServerProcess, our_server_process, stock_server_process
from benchmarks.bench.settings import NEVER, Settings, throughput_hparams
from sac_distributed import replay
from sac_distributed.config import ClientConfig, LearnerConfig, ServerConfig
from sac_distributed.envs import loader as env_loader
from sac_distributed.envs.specs import EnvSpecs
from sac_distributed.jobs.learner_loop import LearnerLoop
from sac_distributed.replay.connection import Connection
from sac_distributed.replay.variables import VariableContainer
from sac_distributed.runtime import Metrics

Server = Union[reverb.Server, ServerProcess]  # both have stop()


@dataclasses.dataclass
class OurReplay:
    """Our tables (replay.make_tables) on a Reverb server, filled, weights pushed."""

    server: Server
    address: str
    client: reverb.Client


@dataclasses.dataclass
class StockReplay:
    """The tutorial's agent, table, ReverbReplayBuffer and Reverb server, filled."""

    agent: sac_agent.SacAgent
    train_step: tf.Variable
    server: Server
    buffer: reverb_replay_buffer.ReverbReplayBuffer

    def observer(self) -> reverb_utils.ReverbAddTrajectoryObserver:
        return stock.stock_observer(self.buffer.py_client)

    def dataset(self, batch_size: int) -> tf.data.Dataset:
        return stock.stock_dataset(self.buffer, batch_size)


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
        return env_loader.specs_for(self.settings.env_name)

    @functools.cached_property
    def random_steps(self) -> List[experience.RandomStep]:
        s = self.settings
        logging.info("Collecting %d random steps of %s.", s.fill_items, s.env_name)
        return experience.collect_random_steps(s.env_name, s.fill_items, s.seed)

    @functools.cached_property
    def our_rows(self) -> List[np.ndarray]:
        return [experience.to_our_row(x) for x in self.random_steps if not x[0].is_last()]

    @functools.cached_property
    def stock_trajectories(self) -> List[trajectory.Trajectory]:
        return [experience.to_stock_trajectory(x) for x in self.random_steps]

    @functools.cached_property
    def our_replay(self) -> OurReplay:
        server, address = self._start_our_server()
        client = reverb.Client(address)
        writer = replay.TransitionWriter(client)
        experience.write_rows(writer, self.our_rows)
        writer.close()
        weights = experience.initial_policy_weights(self.specs, self.hparams)
        self.extras["variable_push_bytes"] = VariableContainer(client).push(weights, 1)
        return OurReplay(server, address, client)

    def _start_our_server(self) -> Tuple[Server, str]:
        s = self.settings
        if s.server == "subprocess":
            capacity = self.hparams.replay_buffer_capacity
            process = our_server_process(self.tmpdir("server"), s.env_name, self.hparams, capacity)
            process.connect()
            return process, process.address
        config = ServerConfig(s.env_name, self.hparams, self.tmpdir("server"))
        server = reverb.Server(replay.make_tables(config, self.specs), port=None)
        return server, f"localhost:{server.port}"

    @functools.cached_property
    def stock_replay(self) -> StockReplay:
        agent, train_step = stock.make_stock_agent(self.specs, self.hparams)
        server, where = self._start_stock_server()
        stock_replay = StockReplay(agent, train_step, server, stock.stock_buffer(agent, **where))
        observer = stock_replay.observer()
        for traj in self.stock_trajectories:
            observer(traj)
        observer.flush()
        observer.close()
        return stock_replay

    def _start_stock_server(self) -> Tuple[Server, Dict]:
        """The server and how ReverbReplayBuffer should reach it."""
        capacity = self.hparams.replay_buffer_capacity
        if self.settings.server == "subprocess":
            process = stock_server_process(self.tmpdir("stock_server"), capacity)
            process.connect()
            return process, {"server_address": process.address}
        server = reverb.Server([stock.stock_table(capacity)], port=None)
        return server, {"local_server": server}

    @functools.cached_property
    def stock_learner(self) -> tfa_learner.Learner:
        stock_replay = self.stock_replay
        batch_size = self.hparams.batch_size
        return tfa_learner.Learner(
            self.tmpdir("stock_learner"),
            stock_replay.train_step,
            stock_replay.agent,
            lambda: stock_replay.dataset(batch_size),
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

    def __init__(
        self, bench: Bench, client_config: Optional[ClientConfig] = None, name: str = "learner"
    ):
        """`client_config`: the servers to train from (default: the bench's own replay,
        which the constant-batch variant also samples its batch from)."""
        if client_config is None:
            our = bench.our_replay
            client_config = ClientConfig(our.address, our.address)
        config = LearnerConfig(
            bench.settings.env_name,
            bench.hparams,
            bench.tmpdir(name),
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
        address = client_config.replay_addresses[0]
        self._make_batch = lambda: next(
            iter(replay.make_dataset(address, bench.specs, bench.hparams.batch_size))
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
