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
the learner uses too).
"""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Callable, Deque, Dict, List, Optional

import numpy as np
from absl import logging
from tf_agents.environments import py_environment
from tf_agents.trajectories.time_step import StepType

from sac_distributed import replay
from sac_distributed.algorithm import specs as specs_lib
from sac_distributed.algorithm.policy import NumpyActorPolicy, limit_blas_threads
from sac_distributed.config import ActorConfig
from sac_distributed.jobs.shard_failover import Loss, ShardFailover
from sac_distributed.replay.connection import TRANSIENT_ERRORS, Connection, ShardLostError
from sac_distributed.replay.nstep import NStepAccumulator
from sac_distributed.replay.variables import VariableContainer
from sac_distributed.results import TRAINING_RETURN_WINDOW, EpisodeLog
from sac_distributed.runtime import Metrics

_WARMUP_CHECK_EVERY = 100  # actor steps between replay-size checks while warming up
_SUMMARY_CHECK_EVERY = 64  # actor steps between clock reads for the throughput summary
_DRAIN_TIMEOUT_S = 30.0  # how long a stopping actor waits for its last inserts
_PROGRESS_LOG_S = 10.0  # seconds between initial-collect progress lines
_RETURN_HOME_FLUSH_MS = 5_000  # how long a returning actor waits for its last inserts there


@dataclasses.dataclass
class ActorStats:
    """Counters an actor reports when it stops."""

    env_steps: int = 0
    transitions_written: int = 0  # confirmed by the server
    # Sent, but not acknowledged when the writer closed (at exit, or when the
    # server went away): the server may hold them; its insert count decides.
    transitions_unconfirmed: int = 0
    transitions_dropped: int = 0  # never sent: rows of an incomplete last item
    reconnects: int = 0
    # Transitions confirmed by each replay shard (keys: shard index).
    transitions_written_per_shard: Dict[int, int] = dataclasses.field(default_factory=dict)
    shard_moves: int = 0  # times the actor changed replay shards (away and back)
    episodes: int = 0
    dropped_non_finite: int = 0
    weight_updates: int = 0
    last_policy_lag: int = 0
    stop_reason: str = ""


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
        self._episode_log = episode_log
        self._envs = envs
        self._connection = connection
        self._home = config.task % connection.num_shards
        # New items' priority: the learner's published max with prioritized replay.
        self._insert_priority = replay.INITIAL_PRIORITY
        self._shard = self._home
        self._failover = ShardFailover(connection, config.client.shard_probe_interval_s)
        self.stats = ActorStats()
        self._open_writer()
        self._open_container()
        self._metrics = metrics
        self._should_stop = should_stop
        action_spec = envs[0].action_spec()
        hp = config.hparams
        self._policy = NumpyActorPolicy(
            action_spec.minimum,
            action_spec.maximum,
            action_spec.shape,
            seed=config.task_seed,
            log_std_range=hp.policy_log_std_range,
        )
        self._layout = replay.row_layout(specs_lib.env_specs(envs[0]))
        self._n_step: Optional[List[NStepAccumulator]] = (
            [NStepAccumulator(self._layout, hp.n_step, hp.gamma) for _ in envs]
            if hp.n_step > 1
            else None
        )
        # A batch-1 policy call must not wake OpenBLAS threads (see limit_blas_threads).
        limit_blas_threads(1)
        self._policy_train_step: Optional[int] = None
        self._learner_done = False
        self._warm = False
        self._returns: Deque[float] = collections.deque(maxlen=TRAINING_RETURN_WINDOW)
        self._lengths: Deque[int] = collections.deque(maxlen=TRAINING_RETURN_WINDOW)

    def run(self) -> ActorStats:
        """Runs until the learner is done, max_env_steps, or a stop signal."""
        observations = self._flat_observations([env.reset().observation for env in self._envs])
        episode_return = np.zeros(len(self._envs))
        episode_length = np.zeros(len(self._envs), dtype=np.int64)
        step = 0
        last_summary = (time.monotonic(), 0)
        update_interval = self._config.variable_update_interval
        while not self._stop_reason():
            try:
                if step % update_interval == 0:
                    self._refresh_weights()
                if not self._warm and step % _WARMUP_CHECK_EVERY == 0:
                    self._check_warm()
                observations = self._step(observations, episode_return, episode_length)
                step += 1
                if not self._writer.throttle():
                    self._wait_for_replay_capacity()
            except TRANSIENT_ERRORS as error:
                self._on_server_error(error)
            if step % _SUMMARY_CHECK_EVERY == 0:
                last_summary = self._maybe_summarize(last_summary)
                self._maybe_return_home()
        # Once the learner is done the rate limiter admits nothing more: don't wait.
        if not self._learner_done:
            self._drain()
        self._close_writer(timeout_ms=0)
        self._container.close()
        self._metrics.flush()
        logging.info(
            "Actor %d stopping (%s): %s", self._config.task, self.stats.stop_reason, self.stats
        )
        self._log_counts()
        return self.stats

    def _log_counts(self) -> None:
        """Says in words what the counts mean, so none reads as a loss that wasn't."""
        stats = self.stats
        text = f"{stats.transitions_written} transitions confirmed by the server"
        if stats.transitions_unconfirmed:
            text += (
                f", {stats.transitions_unconfirmed} sent but unconfirmed when the actor "
                "stopped (the server may hold them; its insert count is the authority)"
            )
        if stats.transitions_dropped:
            text += (
                f", {stats.transitions_dropped} never sent (the rows of an incomplete last "
                f"item of {self._writer.transitions_per_item})"
            )
        logging.info("Actor %d: %s.", self._config.task, text)

    def _open_writer(self) -> None:
        # Checks that the shard's table stores the same transitions_per_item.
        self._writer = replay.TransitionWriter(
            self._connection.shards[self._shard],
            self._config.hparams.transitions_per_item,
            priority=self._insert_priority,
        )
        self._writer_booked = False

    def _open_container(self) -> None:
        self._container = VariableContainer(self._connection.variables)

    # --- lost servers ----------------------------------------------------------------

    def _on_server_error(self, error: Exception) -> None:
        """After a Reverb error: move to another replay shard, reconnect the
        variable container alone, or (one server, or nothing left) reconnect all."""
        loss = self._failover.diagnose(self._shard)
        if loss is Loss.SHARD and self._leave_shard(error):
            if not self._connection.variables_answer():
                self._reconnect_variables(error)
            return
        if loss is Loss.VARIABLES:
            self._reconnect_variables(error)
            return
        self._close_writer(timeout_ms=0)  # the server is gone: pending items are lost
        self._container.close()
        self._connection.recover(error)
        self._shard = self._home
        self._open_writer()
        self._open_container()
        self.stats.reconnects += 1

    def _reconnect_variables(self, error: Exception) -> None:
        self._container.close()
        self._connection.recover_variables(error)
        self._open_container()
        self.stats.reconnects += 1

    def _leave_shard(self, error: Exception) -> bool:
        """Writes to the next live shard in ring order; False if none answers."""
        self._close_writer(timeout_ms=0)  # the shard is gone: pending items are lost
        shard = self._failover.next_live_shard(self._shard, error)
        if shard is None:
            return False
        self._move_to(shard)
        return True

    def _move_to(self, shard: int) -> None:
        logging.info(
            "Actor %d: writing to replay shard %d (home shard %d).",
            self._config.task,
            shard,
            self._home,
        )
        self._shard = shard
        self._open_writer()
        self.stats.shard_moves += 1

    def _maybe_return_home(self) -> None:
        """While away from the home shard: every shard probe interval, back if it answers."""
        if not self._failover.home_answers_again(self._home, self._shard):
            return
        self._close_writer(timeout_ms=_RETURN_HOME_FLUSH_MS)
        self._move_to(self._home)

    def _drain(self) -> None:
        """Waits until the server confirms every written transition, within limits.

        While a learner samples, a ratio rate limiter admits the last inserts
        gradually; waiting for them keeps the count of what landed exact. Once
        the learner is done nothing more can land, so waiting stops there.
        """
        deadline = time.monotonic() + _DRAIN_TIMEOUT_S
        while not self._writer.flush(timeout_ms=1_000):
            if time.monotonic() > deadline:
                return
            try:
                self._refresh_weights()
            except TRANSIENT_ERRORS:
                return  # the server is gone: what is pending is lost
            if self._learner_done:
                return

    def _close_writer(self, timeout_ms: int) -> None:
        """Closes the writer and books what it wrote (and dropped) into the stats, once."""
        if self._writer_booked:
            return
        self._writer_booked = True
        self._writer.close(timeout_ms=timeout_ms)
        written = self._writer.transitions_written
        self.stats.transitions_written += written
        per_shard = self.stats.transitions_written_per_shard
        per_shard[self._shard] = per_shard.get(self._shard, 0) + written
        self.stats.transitions_unconfirmed += self._writer.transitions_unconfirmed
        self.stats.transitions_dropped += self._writer.transitions_incomplete

    def _wait_for_replay_capacity(self) -> None:
        """After a throttle() timeout: waits while the rate limiter holds inserts back,
        pulling weights and watching for stops in between."""
        while True:
            self._refresh_weights()
            if self._stop_reason() or self._writer.throttle():
                return
            # The variable container may live elsewhere and answer: ask the shard itself.
            if self._failover.shard_lost(self._shard):
                raise ShardLostError(
                    f"replay shard {self._shard} at "
                    f"{self._connection.replay_addresses[self._shard]} does not answer"
                )

    def _stop_reason(self) -> str:
        if self._should_stop():
            self.stats.stop_reason = "stop signal"
        elif self._learner_done:
            self.stats.stop_reason = "learner finished"
        elif self._config.max_env_steps and self.stats.env_steps >= self._config.max_env_steps:
            self.stats.stop_reason = "max_env_steps reached"
        return self.stats.stop_reason

    def _flat_observations(self, observations: List[np.ndarray]) -> np.ndarray:
        """Observations [num_envs, obs_size] float32 (a copy), as the policy and rows take them."""
        return np.stack(
            [np.asarray(o, np.float32).reshape(self._layout.observation_size) for o in observations]
        )

    def _step(self, observations: np.ndarray, episode_return, episode_length) -> np.ndarray:
        """Steps every env once and writes its transition; returns the next observations.

        `observations` are flat float32 [num_envs, obs_size]; the next ones are
        the tail of the rows just written (next_observation), so they cost no copy.
        """
        if self._warm and self._policy.has_weights:
            actions = self._policy.action(observations)
        else:
            actions = self._policy.random_action(len(observations))
        if len(self._envs) == 1:
            return self._step_one(observations, actions, episode_return, episode_length)
        steps = [env.step(actions[i]) for i, env in enumerate(self._envs)]
        self.stats.env_steps += len(steps)
        rewards = np.array([t.reward for t in steps], np.float32)
        rows = self._layout.pack(
            observations,
            actions,
            rewards,
            np.array([t.discount for t in steps], np.float32),
            np.stack([t.observation for t in steps]),
        )
        # One reduction per row: a sum is finite iff every element is (barring
        # float32 overflow of values near 1e38, which are as broken as inf).
        finite = np.isfinite(rows.sum(axis=1))
        episode_length += 1
        if finite.all():
            episode_return += rewards
            self._write_rows(rows)
            ended = [i for i, t in enumerate(steps) if t.step_type == StepType.LAST]
        else:
            episode_return[finite] += rewards[finite]
            self._write_rows(rows, finite)
            self._count_non_finite([t.reward for t in steps], finite)
            ended = [
                i for i, t in enumerate(steps) if t.step_type == StepType.LAST or not finite[i]
            ]
        next_observations = self._layout.next_observations(rows)
        if ended:
            next_observations = next_observations.copy()  # rows stay as written
            for i in ended:
                self._end_episode(i, episode_return, episode_length)
                next_observations[i] = self._flat_observations([self._envs[i].reset().observation])
        return next_observations

    def _step_one(self, observations, actions, episode_return, episode_length) -> np.ndarray:
        """`_step` for one env, without the per-env lists and stacking."""
        step = self._envs[0].step(actions[0])
        self.stats.env_steps += 1
        row = replay.pack_row(
            observations[0], actions[0], step.reward, step.discount, step.observation
        )
        finite = np.isfinite(np.add.reduce(row))
        episode_length += 1
        if finite:
            episode_return += self._layout.reward(row)
            self._write_row(0, row)
        else:
            self._count_non_finite([step.reward], np.zeros(1, bool))
        if step.step_type == StepType.LAST or not finite:
            self._end_episode(0, episode_return, episode_length)
            return self._flat_observations([self._envs[0].reset().observation])
        return self._layout.next_observations(row[np.newaxis])

    def _write_rows(self, rows: np.ndarray, mask: Optional[np.ndarray] = None) -> None:
        """One-step rows of every env (those with `mask` True) into the replay."""
        if self._n_step is None:
            self._writer.write_rows(rows, mask)
            return
        for i, row in enumerate(rows):
            if mask is None or mask[i]:
                self._write_row(i, row)

    def _write_row(self, env_index: int, row: np.ndarray) -> None:
        """A one-step row of env `env_index`, or with n_step > 1 the n-step row it completes."""
        if self._n_step is None:
            self._writer.write_row(row)
            return
        completed = self._n_step[env_index].add(row)
        if completed is not None:
            self._writer.write_row(completed)

    def _count_non_finite(self, rewards, finite: np.ndarray) -> None:
        for i in np.flatnonzero(~finite):
            if self.stats.dropped_non_finite == 0:
                logging.warning(
                    "Actor %d: %s returned a non-finite observation or reward (reward=%s) "
                    "at env step %d; dropping such steps and resetting that env. Counted in "
                    "actor/dropped_non_finite_steps.",
                    self._config.task,
                    self._config.env_name,
                    rewards[i],
                    self.stats.env_steps,
                )
            self.stats.dropped_non_finite += 1

    def _end_episode(self, i: int, episode_return, episode_length) -> None:
        if self._n_step is not None:  # the episode's last steps, over fewer than n steps
            for row in self._n_step[i].end_episode():
                self._writer.write_row(row)
        self._returns.append(float(episode_return[i]))
        self._lengths.append(int(episode_length[i]))
        self.stats.episodes += 1
        if self._episode_log is not None:
            self._episode_log.append(
                self.stats.env_steps, float(episode_return[i]), int(episode_length[i])
            )
        episode_return[i] = 0.0
        episode_length[i] = 0
        self._metrics.scalars(
            {
                "actor/AverageReturn": np.mean(self._returns),
                "actor/AverageEpisodeLength": np.mean(self._lengths),
            },
            self.stats.env_steps,
        )

    def _check_warm(self) -> None:
        items = replay.stored_items(self._connection.live_clients())
        size = items * self._writer.transitions_per_item
        needed = self._config.hparams.initial_collect_steps
        if size < needed:
            logging.log_every_n_seconds(
                logging.INFO,
                "Actor %d: initial collect with random actions, replay holds %d / %d "
                "transitions (%.0f%%).",
                _PROGRESS_LOG_S,
                self._config.task,
                size,
                needed,
                100.0 * size / needed,
            )
            return
        logging.info(
            "Actor %d: replay holds %d transitions; switching from random to the collect policy.",
            self._config.task,
            size,
        )
        self._warm = True

    def _refresh_weights(self) -> None:
        snapshot = self._container.pull()
        self._connection.made_progress()
        if snapshot is None:
            return
        self._learner_done = snapshot.finished(self._config.hparams.num_iterations)
        if snapshot.max_priority is not None:  # prioritized replay: new items enter at the max
            self._insert_priority = self._writer.priority = snapshot.max_priority
        if snapshot.train_step == self._policy_train_step:
            return
        if self._policy_train_step is not None:
            self.stats.last_policy_lag = snapshot.train_step - self._policy_train_step
        self._policy.set_weights(snapshot.policy_weights, snapshot.normalization)
        self._policy_train_step = snapshot.train_step
        self.stats.weight_updates += 1

    def _maybe_summarize(self, last):
        t0, steps0 = last
        elapsed = time.monotonic() - t0
        if elapsed < self._config.summary_interval_s:
            return last
        rate = (self.stats.env_steps - steps0) / elapsed
        self._metrics.scalars(
            {
                "actor/env_steps_per_sec": rate,
                "actor/policy_lag": self.stats.last_policy_lag,
                "actor/dropped_non_finite_steps": self.stats.dropped_non_finite,
            },
            self.stats.env_steps,
        )
        logging.info(
            "Actor %d: %d env steps (%.0f/s), %d episodes, last returns %s",
            self._config.task,
            self.stats.env_steps,
            rate,
            self.stats.episodes,
            np.round(list(self._returns)[-3:], 1).tolist(),
        )
        return (time.monotonic(), self.stats.env_steps)
