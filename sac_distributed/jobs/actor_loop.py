"""The actor: steps environments with the collect policy and writes transitions.

One actor steps `num_envs` environments together and makes one batched
policy call per step. It uses uniform random actions until the replay table
holds `initial_collect_steps` transitions (counted across all actors and
replay shards), then the learner's latest weights, pulled every
`variable_update_interval` steps.

With several replay shards the actor writes to its home shard (task % S).
While that shard is down it writes to the next live one in ring order and
probes home every `shard_probe_interval_s` (ClientConfig), going back when it answers; the
variable container keeps its own client throughout (`shard_failover.py`, which
the learner uses too). The env steps are actor_steps.py's, the writing and its
bookkeeping actor_writer.py's, the warm-up actor_warmup.py's, the counters and
summaries actor_stats.py's.
"""

from __future__ import annotations

import time
from typing import Callable, List, Optional

import numpy as np
from absl import logging
from tf_agents.environments import py_environment

from sac_distributed import replay
from sac_distributed.algorithm.pixel_policy import make_acting_policy
from sac_distributed.algorithm.policy import batch_size, limit_blas_threads
from sac_distributed.config import ActorConfig
from sac_distributed.envs import loader as env_loader
from sac_distributed.jobs.actor_stats import ActorStats, ActorSummaries
from sac_distributed.jobs.actor_steps import EnvSteps
from sac_distributed.jobs.actor_warmup import WarmUp
from sac_distributed.jobs.actor_writer import ActorWriter
from sac_distributed.jobs.shard_failover import Loss, ShardFailover
from sac_distributed.replay.connection import TRANSIENT_ERRORS, Connection, ShardLostError
from sac_distributed.replay.variables import VariableContainer
from sac_distributed.results import EpisodeLog
from sac_distributed.runtime import Metrics

__all__ = ["ActorLoop", "ActorStats"]

_SUMMARY_CHECK_EVERY = 64  # actor steps between clock reads for the throughput summary
_DRAIN_TIMEOUT_S = 30.0  # how long a stopping actor waits for its last inserts


class ActorLoop:
    """Collects experience from `envs` into the replay table until told to stop."""

    def __init__(
        self,
        config: ActorConfig,
        envs: List[py_environment.PyEnvironment],
        connection: Connection,
        metrics: Metrics,
        should_stop: Callable[[], bool],
        episode_log: Optional[EpisodeLog] = None,
    ):
        self._config = config
        self._connection = connection
        hp = config.hparams
        self.stats = ActorStats()
        specs = env_loader.env_specs(envs[0])
        # pixel transitions: each frame stored once
        layout = (
            replay.frame_layout(specs, hp.n_step) if specs.is_image else replay.row_layout(specs)
        )
        self._failover = ShardFailover(connection, config.client.shard_probe_interval_s)
        self._out = ActorWriter(
            connection, hp, layout, len(envs), config.task, self._failover, self.stats
        )
        self._open_container()
        self._metrics = metrics
        self._summaries = ActorSummaries(
            metrics, self.stats, config.task, config.summary_interval_s, episode_log
        )
        self._steps = EnvSteps(
            envs, layout, self._out, self.stats, self._summaries, config.env_name
        )
        self._warmup = WarmUp(
            connection, hp.initial_collect_steps, hp.transitions_per_item, config.task
        )
        self._should_stop = should_stop
        self._policy = make_acting_policy(specs, hp, seed=config.task_seed)
        # A batch-1 policy call must not wake OpenBLAS threads (see limit_blas_threads).
        limit_blas_threads(1)
        self._policy_train_step: Optional[int] = None
        self._learner_done = False

    @property
    def warm(self) -> bool:
        """Whether the actor acts with the collect policy (False: random warm-up actions)."""
        return self._warmup.warm

    def run(self) -> ActorStats:
        """Runs until the learner is done, max_env_steps, or a stop signal."""
        observations = self._steps.reset()
        step = 0
        update_interval = self._config.variable_update_interval
        while not self._stop_reason():
            try:
                if step % update_interval == 0:
                    self._refresh_weights()
                self._warmup.check(step)
                observations = self._step(observations)
                step += 1
                if not self._out.writer.throttle():
                    self._wait_for_replay_capacity()
                if step % _SUMMARY_CHECK_EVERY == 0:
                    self._out.maybe_return_home()
            except TRANSIENT_ERRORS as error:
                self._on_server_error(error)
            if step % _SUMMARY_CHECK_EVERY == 0:
                self._summaries.maybe_write()
        # Once the learner is done the rate limiter admits nothing more: don't wait.
        if not self._learner_done:
            self._drain()
        self._out.close(timeout_ms=0)
        self._container.close()
        self._metrics.flush()
        logging.info(
            "Actor %d stopping (%s): %s", self._config.task, self.stats.stop_reason, self.stats
        )
        self._out.log_counts()
        return self.stats

    def _open_container(self) -> None:
        self._container = VariableContainer(self._connection.variables)

    # --- lost servers ----------------------------------------------------------------

    def _on_server_error(self, error: Exception) -> None:
        """After a Reverb error: move to another replay shard, reconnect the
        variable container alone, or (one server, or nothing left) reconnect all."""
        loss = self._failover.diagnose(self._out.shard)
        if loss is Loss.SHARD and self._out.leave_shard(error):
            if not self._connection.variables_answer():
                self._reconnect_variables(error)
            return
        if loss is Loss.VARIABLES:
            self._reconnect_variables(error)
            if self._out.closed:  # a failed move left no writer open on a live shard
                self._out.open()
            return
        self._out.release()  # the server is gone: pending items are lost
        self._container.close()
        self._container = None  # its client goes before the new ones come (connection.py)
        self._connection.recover(error)
        self._out.reopen_home()
        self._open_container()
        self.stats.reconnects += 1

    def _reconnect_variables(self, error: Exception) -> None:
        self._container.close()
        self._container = None
        self._connection.recover_variables(error)
        self._open_container()
        self.stats.reconnects += 1

    def _drain(self) -> None:
        """Waits until the server confirms every written transition, within limits.

        While a learner samples, a ratio rate limiter admits the last inserts
        gradually; waiting for them keeps the count of what landed exact. Once
        the learner is done nothing more can land, so waiting stops there.
        """
        deadline = time.monotonic() + _DRAIN_TIMEOUT_S
        while not self._out.writer.flush(timeout_ms=1_000):
            if time.monotonic() > deadline:
                return
            try:
                self._refresh_weights()
            except TRANSIENT_ERRORS:
                return  # the server is gone: what is pending is lost
            if self._learner_done:
                return

    def _wait_for_replay_capacity(self) -> None:
        """After a throttle() timeout: waits while the rate limiter holds inserts back,
        pulling weights and watching for stops in between."""
        while True:
            self._refresh_weights()
            if self._stop_reason() or self._out.writer.throttle():
                return
            # The variable container may live elsewhere and answer: ask the shard itself.
            if self._failover.shard_lost(self._out.shard):
                raise ShardLostError(
                    f"replay shard {self._out.shard} at "
                    f"{self._connection.replay_addresses[self._out.shard]} does not answer"
                )

    def _stop_reason(self) -> str:
        if self._should_stop():
            self.stats.stop_reason = "stop signal"
        elif self._learner_done:
            self.stats.stop_reason = "learner finished"
        elif self._config.max_env_steps and self.stats.env_steps >= self._config.max_env_steps:
            self.stats.stop_reason = "max_env_steps reached"
        return self.stats.stop_reason

    def _step(self, observations: np.ndarray) -> np.ndarray:
        """Picks every env's action (random during warm-up) and steps them once."""
        if self._warmup.warm and self._policy.has_weights:
            actions = self._policy.action(observations)
        else:
            actions = self._policy.random_action(batch_size(observations))
        return self._steps.step(observations, actions)

    def _refresh_weights(self) -> None:
        snapshot = self._container.pull()
        self._connection.made_progress()
        if snapshot is None:
            return
        self._learner_done = snapshot.learner_done
        if snapshot.max_priority is not None:  # prioritized replay: new items enter at the max
            self._out.set_priority(snapshot.max_priority)
        if snapshot.train_step == self._policy_train_step:
            return
        if self._policy_train_step is not None:
            self.stats.last_policy_lag = snapshot.train_step - self._policy_train_step
        self._policy.set_weights(snapshot.policy_weights, snapshot.normalization)
        self._policy_train_step = snapshot.train_step
        self.stats.weight_updates += 1
