"""The Reverb server job: replay + variable container, stats and replay checkpoints.

The server builds both table signatures from the environment and the network
config, so it needs no learner and no exported policy to start. With
--num_replay_shards=S it is shard --replay_shard of S: its replay table holds
1/S of the capacity (`replay.shard_capacity_items`), and it keeps its replay
checkpoints and summaries in the shard's own directories (`paths`), so S
servers share one root_dir. Clients use the variable table only on the server
they name as variable container (launchers pass shard 0).
"""

from __future__ import annotations

import os
import time
from typing import Callable, Optional

import portpicker
import reverb
from absl import logging

from sac_distributed import paths
from sac_distributed.config import ServerConfig
from sac_distributed.envs import loader as env_loader
from sac_distributed.envs import observations
from sac_distributed.errors import PortInUseError, RunOwnedError
from sac_distributed.jobs import file_lock, ownership
from sac_distributed.replay import (
    REPLAY_TABLE,
    TransitionCounts,
    make_tables,
    transition_counts,
    validate_server_config,
)
from sac_distributed.replay.replay_checkpoints import ReplayCheckpoints, restore_server
from sac_distributed.replay.variables import VariableContainer
from sac_distributed.runtime import Metrics, port_in_use


def make_server(config: ServerConfig, port: Optional[int] = None) -> reverb.Server:
    """A started Reverb server, restored from root_dir's replay checkpoint if any.

    Raises PortInUseError when something already listens on the port: gRPC
    binds with SO_REUSEPORT, so a second server would otherwise start beside
    the first and share its connections.
    """
    validate_server_config(config)
    port = port if port is not None else (config.port or portpicker.pick_unused_port())
    check_port_free(port)
    specs = env_loader.job_env_specs(config)
    if specs.is_image:
        observations.check_camera_options(config.hparams, config.env_name)
    checkpoints = _replay_checkpoints(config)

    def build(checkpointer) -> reverb.Server:
        tables = make_tables(config, specs) + ownership.make_tables()
        return reverb.Server(tables=tables, port=port, checkpointer=checkpointer)

    server = restore_server(checkpoints, build, config.replay_start_empty)
    clear_restored_done_flag(server)
    return server


def clear_restored_done_flag(server: reverb.Server) -> None:
    """Clears a done flag that a replay checkpoint brought back.

    The flag says the learner of the run the checkpoint was taken in finished.
    Clients of this server must wait for this run's learner instead: a finished
    run extended to more iterations hung when its actors and evaluator took the
    old flag for this run's end and stopped at once. The learner sets the flag
    again when it finishes (at once, for a run already at its num_iterations).
    """
    container = VariableContainer(server.localhost_client())
    snapshot = container.pull()
    if snapshot is None or not snapshot.learner_done:
        return
    container.push(
        snapshot.policy_weights,
        snapshot.train_step,
        learner_done=False,
        normalization=snapshot.normalization,
    )
    container.close()
    logging.info(
        "The restored variable container said the learner had finished (train_step %d); "
        "cleared until this run's learner finishes.",
        snapshot.train_step,
    )


def _replay_checkpoints(config: ServerConfig) -> ReplayCheckpoints:
    return ReplayCheckpoints(
        config.root_dir, config.replay_checkpoints_to_keep, shard=config.replay_shard
    )


class ShardLock:
    """An exclusive flock on the shard's server.lock while a server serves it.

    Two servers for the same shard of one root_dir would write replay
    checkpoints into the same directory and tidy away each other's; servers
    for different shards use different directories and locks, so they coexist.
    The kernel drops the lock when its process dies.
    """

    def __init__(self, config: ServerConfig):
        self._path = paths.server_lock_path(config.root_dir, config.replay_shard)
        self._shard = config.replay_shard
        self._file = None

    def __enter__(self) -> ShardLock:
        self._file = file_lock.try_lock(self._path, f"pid {os.getpid()}")
        if self._file is None:
            holder = file_lock.holder_of(self._path, "unknown")
            raise RunOwnedError(
                f"Another sac-reverb-server ({holder}) already serves replay shard "
                f"{self._shard} of this root_dir ({self._path} is locked). Stop it first, "
                "or start this one with another --replay_shard or --root_dir."
            )
        return self

    def __exit__(self, *exc) -> None:
        if self._file is not None:
            self._file.close()  # closing releases the flock
            self._file = None


def check_port_free(port: int) -> None:
    """Raises PortInUseError, naming what holds `port`, if anything listens on it."""
    if port_in_use(port):
        raise PortInUseError(_port_in_use_message(port))


def _port_in_use_message(port: int) -> str:
    try:
        tables = sorted(reverb.Client(f"localhost:{port}").server_info(timeout=3))
    except (reverb.errors.DeadlineExceededError, RuntimeError):
        holder = "another program (not a Reverb server)"
    else:
        holder = f"another Reverb server (tables {', '.join(tables)})"
    return (
        f"Port {port} is already in use by {holder}. Stop it first, or start this server "
        "with another --port (0 picks a free one)."
    )


class ServerLoop:
    """Logs table sizes and rates, checkpoints the replay, stops on request."""

    def __init__(self, config: ServerConfig, server: reverb.Server, metrics: Metrics):
        self._config = config
        self._server = server
        self._client = server.localhost_client()
        self._metrics = metrics
        self._arbiter = ownership.LeaseArbiter(self._client)
        self._checkpoints = _replay_checkpoints(config)

    def run(self, should_stop: Callable[[], bool], wait: Callable[[float], bool]) -> None:
        last_stats = last_ckpt = time.monotonic()
        prev = self._counts()
        start = time.monotonic()
        interval = self._config.replay_checkpoint_interval_s
        while not should_stop():
            wait(min(1.0, self._config.stats_interval_s))
            self._tick_arbiter()
            now = time.monotonic()
            if now - last_stats >= self._config.stats_interval_s:
                prev = self._log_stats(prev, now - last_stats, int(now - start))
                last_stats = now
            if interval and now - last_ckpt >= interval:
                self.checkpoint()
                last_ckpt = now
        self.checkpoint()
        self._metrics.flush()

    def _tick_arbiter(self) -> None:
        try:
            self._arbiter.tick()
        except (reverb.errors.DeadlineExceededError, RuntimeError) as error:  # a busy machine
            logging.warning("Learner lease bookkeeping skipped a beat: %s", error)

    def _counts(self) -> TransitionCounts:
        return transition_counts(self._client.server_info()[REPLAY_TABLE])

    def _log_stats(self, prev: TransitionCounts, elapsed: float, step: int) -> TransitionCounts:
        counts = self._counts()
        size, inserts = counts.stored, counts.inserted
        insert_rate = (inserts - prev.inserted) / elapsed
        sample_rate = (counts.sampled - prev.sampled) / elapsed
        logging.info(
            "%s: %d transitions (%d inserted, %.0f inserted/s, %.0f sampled/s)",
            REPLAY_TABLE,
            size,
            inserts,
            insert_rate,
            sample_rate,
        )
        self._metrics.scalars(
            {
                "server/replay_size": size,
                "server/inserts_per_sec": insert_rate,
                "server/samples_per_sec": sample_rate,
            },
            step,
        )
        return counts

    def checkpoint(self) -> str:
        """Writes a replay checkpoint; the previous ones stay until it is complete."""
        start = time.monotonic()
        path = self._checkpoints.adopt(self._client.checkpoint())
        logging.info("Replay checkpoint written to %s (%.1f s).", path, time.monotonic() - start)
        return path
