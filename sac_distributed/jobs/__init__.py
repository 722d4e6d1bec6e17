"""Wires each job from its config: connect, check signatures, run the loop.

These functions are what the binaries call, and what tests and the notebook
call in-process; each returns when its loop ends and cleans up after itself.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, List, TypeVar

from absl import logging

from sac_distributed import paths, replay
from sac_distributed.algorithm.pixel_policy import check_image_size
from sac_distributed.algorithm.strategy import make_strategy
from sac_distributed.config import ActorConfig, EvaluatorConfig, LearnerConfig, ServerConfig
from sac_distributed.envs import loader as env_loader
from sac_distributed.envs import observations
from sac_distributed.envs import sources as env_sources
from sac_distributed.jobs import ownership
from sac_distributed.jobs.actor_loop import ActorLoop, ActorStats
from sac_distributed.jobs.actor_slot import ActorSlot
from sac_distributed.jobs.evaluation import EvalLoop, EvalResult
from sac_distributed.jobs.learner_loop import LearnerLoop, LearnerResult
from sac_distributed.jobs.server import ServerLoop, ShardLock, make_server
from sac_distributed.replay.connection import TRANSIENT_ERRORS, Connection
from sac_distributed.results import EpisodeLog
from sac_distributed.run_info import check_same_run
from sac_distributed.runtime import Metrics, write_json

StopFn = Callable[[], bool]
T = TypeVar("T")


def run_server(config: ServerConfig, should_stop: StopFn, wait: Callable[[float], bool]) -> None:
    """Serves until `should_stop`; checkpoints the replay on the way out."""
    check_same_run(config.root_dir, config.env_name, config.hparams, config.env_kwargs)
    with ShardLock(config):
        server = make_server(config)
        logging.info(
            "Reverb server for %s listening on port %d (tables %s, %s, %s; replay shard %d of %d).",
            config.env_name,
            server.port,
            replay.REPLAY_TABLE,
            replay.VARIABLE_TABLE,
            replay.MAX_PRIORITY_TABLE,
            config.replay_shard,
            config.num_replay_shards,
        )
        metrics = Metrics(paths.server_summary_dir(config.root_dir, config.replay_shard))
        try:
            ServerLoop(config, server, metrics).run(should_stop, wait)
        finally:
            metrics.close()
            server.stop()


def _connect(client_config, should_stop: StopFn, who: str) -> Connection:
    connection = Connection(client_config, who, should_stop)
    connection.open()
    return connection


def _check_server_tables(connection: Connection, specs, hparams, who: str) -> None:
    """Every replay shard's and the variable container's tables, against this job's;
    a server lost meanwhile (a job started while it restarts) is waited for again."""
    _with_reconnects(
        connection,
        lambda: replay.check_server_tables(
            connection.shards,
            connection.variables,
            specs,
            hparams,
            who,
            replay_addresses=connection.replay_addresses,
        ),
    )


def _with_reconnects(connection: Connection, call: Callable[[], T]) -> T:
    """`call()` before a job's loop runs; after a lost server, reconnects and calls again
    (`Connection.recover` gives up after a few recoveries without progress)."""
    while True:
        try:
            result = call()
        except TRANSIENT_ERRORS as error:
            connection.recover(error)
            continue
        connection.made_progress()
        return result


def run_actor(config: ActorConfig, should_stop: StopFn) -> ActorStats:
    """Collects into the replay table until the learner is done or a stop.

    Refuses to start while another actor runs as its task index (actor_slot.py).
    """
    check_same_run(config.root_dir, config.env_name, config.hparams, config.env_kwargs)
    with ActorSlot.take(config.root_dir, config.task, config.claim_task) as slot:
        return _collect(dataclasses.replace(config, task=slot.task, claim_task=False), should_stop)


def _collect(config: ActorConfig, should_stop: StopFn) -> ActorStats:
    seed = config.task_seed
    envs = [
        env_loader.load_job_env(config, None if seed is None else seed + i)
        for i in range(config.num_envs)
    ]
    specs = env_loader.env_specs(envs[0], config.env_name)
    _check_camera(specs, config)
    who = f"actor {config.task}"
    connection = _connect(config.client, should_stop, who)
    _check_server_tables(connection, specs, config.hparams, who)
    metrics = Metrics(paths.actor_summary_dir(config.root_dir, config.task))
    episode_log = EpisodeLog(paths.episodes_path(config.root_dir, config.task))
    try:
        return ActorLoop(config, envs, connection, metrics, should_stop, episode_log).run()
    finally:
        episode_log.close()
        metrics.close()
        for env in envs:
            env.close()


def run_learner(config: LearnerConfig, should_stop: StopFn) -> LearnerResult:
    """Trains to num_iterations (or a stop), checkpointing and exporting on the way.

    Refuses to start while another learner owns the run (ownership.py).
    """
    specs = env_loader.job_env_specs(config)
    _check_camera(specs, config)
    me = ownership.Claim.mine()
    check_same_run(config.root_dir, config.env_name, config.hparams, config.env_kwargs)
    lock = ownership.RootDirLock(config.root_dir, me)
    lock.acquire()
    try:
        if lock.previous is not None:  # a dead learner's lease can be taken over at once
            me = dataclasses.replace(me, previous_token=lock.previous.token)
        connection = _connect(config.client, should_stop, "learner")
        _check_server_tables(connection, specs, config.hparams, "learner")
        lease = _acquire_lease(config, connection, me, should_stop)
        if lease is False:
            return LearnerResult(0, 0.0, float("nan"), "stop signal")
        try:
            return _train(config, specs, connection, should_stop, lease)
        finally:
            if lease is not None:
                lease.release()
    finally:
        lock.release()


def _acquire_lease(config: LearnerConfig, connection: Connection, me, should_stop: StopFn):
    """The server's lease on the run; None if the server grants none; False if stopped."""
    if not _with_reconnects(connection, lambda: ownership.has_lease_tables(connection.variables)):
        logging.info("The Reverb server grants no lease; only root_dir's lock guards this run.")
        return None
    lease = ownership.Lease(config.client.variable_container_server_address, me)
    return lease if lease.acquire(should_stop) else False


def _train(config, specs, connection, should_stop, lease) -> LearnerResult:
    strategy = make_strategy(config.strategy, config.tpu)
    logging.info(
        "Learner strategy: %s with %d replica(s).", config.strategy, strategy.num_replicas_in_sync
    )
    metrics = Metrics(paths.train_dir(config.root_dir))
    try:
        check_owner = lease.check if lease is not None else None
        loop = LearnerLoop(
            config, specs, strategy, connection, metrics, should_stop, check_owner=check_owner
        )
        # What a later reader (sac-evaluate, the notebook) needs to rebuild the
        # setting; written once this learner owns the run and its checkpoint loaded.
        run_info = {"env_name": config.env_name, "hparams": dataclasses.asdict(config.hparams)}
        run_info.update(env_sources.run_info_fields(config.env_name, config.env_kwargs))
        write_json(paths.run_info_path(config.root_dir), run_info)
        return loop.run()
    finally:
        metrics.close()


def run_evaluator(config: EvaluatorConfig, should_stop: StopFn) -> List[EvalResult]:
    """Evaluates the greedy policy every eval_interval until the learner is done."""
    check_same_run(config.root_dir, config.env_name, config.hparams, config.env_kwargs)
    env = env_loader.load_job_env(config, config.seed)
    specs = env_loader.env_specs(env, config.env_name)
    _check_camera(specs, config)
    connection = _connect(config.client, should_stop, "evaluator")
    _check_server_tables(connection, specs, config.hparams, "evaluator")
    metrics = Metrics(paths.eval_dir(config.root_dir))
    try:
        return EvalLoop(config, env, connection, metrics, should_stop).run()
    finally:
        metrics.close()
        env.close()


def _check_camera(specs, config) -> None:
    """Refuses the options a camera run does not follow (each job, as the launcher)."""
    if specs.is_image:
        observations.check_camera_options(config.hparams, config.env_name)
        check_image_size(specs.frame_shape, config.env_name)
