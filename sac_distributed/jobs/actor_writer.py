"""The actor's replay writing: one writer to the current replay shard, n-step rows,
moves between shards, and the bookkeeping of what each writer wrote.

`ActorWriter` owns the `replay.TransitionWriter` of the shard the actor writes
to (its home shard, task % S, or while that is down the next live one): it
opens a writer on every move, and books each closed writer's counts into the
actor's `ActorStats` exactly once, per shard. With n_step > 1 it turns the
actor's one-step rows into n-step rows (one accumulator per env).
"""

from __future__ import annotations

from typing import List, Optional, Union

import numpy as np
from absl import logging

from sac_distributed import replay
from sac_distributed.config import Hyperparams
from sac_distributed.jobs.actor_stats import ActorStats
from sac_distributed.jobs.shard_failover import ShardFailover
from sac_distributed.replay.connection import TRANSIENT_ERRORS, Connection, first_line
from sac_distributed.replay.frames import FrameLayout, FrameWriter
from sac_distributed.replay.layout import RowLayout
from sac_distributed.replay.nstep import NStepAccumulator

RETURN_HOME_FLUSH_MS = 5_000  # how long a returning actor waits for its last inserts there


class ActorWriter:
    """Writes an actor's rows to its current replay shard and books what landed.

    Args:
      connection: the actor's connection (one client per replay shard).
      hparams: the run's hyperparameters (K, n_step, gamma).
      layout: the replay rows' layout (a FrameLayout: pixel transitions, frames once).
      num_envs: environments the actor steps (one n-step accumulator each).
      task: the actor's index; its home shard is task % num_shards.
      failover: finds the next live shard and probes home.
      stats: the actor's counters, into which each closed writer is booked.
    """

    def __init__(
        self,
        connection: Connection,
        hparams: Hyperparams,
        layout: Union[RowLayout, FrameLayout],
        num_envs: int,
        task: int,
        failover: ShardFailover,
        stats: ActorStats,
    ):
        self._connection = connection
        self._layout = layout
        self._num_envs = num_envs
        self._transitions_per_item = hparams.transitions_per_item
        self._gamma = hparams.gamma
        self._task = task
        self._failover = failover
        self._stats = stats
        self.home = task % connection.num_shards
        self.shard = self.home
        # New items' priority: the learner's published max with prioritized replay.
        self._priority = replay.INITIAL_PRIORITY
        self._n_step: Optional[List[NStepAccumulator]] = (
            [NStepAccumulator(layout, hparams.n_step, hparams.gamma) for _ in range(num_envs)]
            if hparams.n_step > 1 and not isinstance(layout, FrameLayout)
            else None  # FrameWriter folds a camera's n-step returns itself
        )
        self.open()

    def open(self) -> None:
        """A new writer to the current shard (it checks the shard's table stores the same K)."""
        client = self._connection.shards[self.shard]
        if isinstance(self._layout, FrameLayout):
            self.writer = FrameWriter(
                client,
                self._layout,
                self._transitions_per_item,
                num_streams=self._num_envs,
                priority=self._priority,
                gamma=self._gamma,
            )
        else:
            self.writer = replay.TransitionWriter(
                client, self._transitions_per_item, priority=self._priority
            )
        self._booked = False

    @property
    def closed(self) -> bool:
        """Whether the current writer was closed (and booked) without a new one opened."""
        return self._booked

    def close(self, timeout_ms: int) -> None:
        """Closes the writer and books what it wrote (and dropped) into the stats, once."""
        if self._booked:
            return
        self._booked = True
        self.writer.close(timeout_ms=timeout_ms)
        stats = self._stats
        written = self.writer.transitions_written
        stats.transitions_written += written
        per_shard = stats.transitions_written_per_shard
        per_shard[self.shard] = per_shard.get(self.shard, 0) + written
        stats.transitions_unconfirmed += self.writer.transitions_unconfirmed
        stats.transitions_dropped += self.writer.transitions_incomplete

    def release(self) -> None:
        """After a lost server: closes the writer and drops it, with its client."""
        self.close(timeout_ms=0)
        self.writer = None

    def set_priority(self, priority: float) -> None:
        """With prioritized replay: new items enter at the learner's published max."""
        self._priority = self.writer.priority = priority

    # --- rows --------------------------------------------------------------------

    def write_rows(self, rows: np.ndarray, mask: Optional[np.ndarray] = None) -> None:
        """One-step rows of every env (those with `mask` True) into the replay."""
        if self._n_step is None:
            self.writer.write_rows(rows, mask)
            return
        for i, row in enumerate(rows):
            if mask is None or mask[i]:
                self.write_row(i, row)

    def write_row(self, env_index: int, row: np.ndarray) -> None:
        """A one-step row of env `env_index`, or with n_step > 1 the n-step row it completes."""
        if self._n_step is None:
            self.writer.write_row(row)
            return
        completed = self._n_step[env_index].add(row)
        if completed is not None:
            self.writer.write_row(completed)

    def write_step(self, env_index: int, observation, action, reward, discount, next_obs) -> None:
        """A pixel transition of env `env_index` (FrameWriter stores its new frame)."""
        self.writer.write_step(env_index, observation, action, reward, discount, next_obs)

    def end_episode(self, env_index: int) -> None:
        """With n_step > 1: the episode's last steps, over fewer than n steps. With
        frames: the env's next transition starts a new stack."""
        if isinstance(self.writer, FrameWriter):
            self.writer.end_episode(env_index)
        if self._n_step is not None:
            for row in self._n_step[env_index].end_episode():
                self.writer.write_row(row)

    # --- shards ------------------------------------------------------------------

    def leave_shard(self, error: Exception) -> bool:
        """Writes to the next live shard in ring order; False if none answers.

        A shard that answers the ping but not the new writer's table check (a
        busy or just-restored server) counts as lost too, and the next is tried.
        """
        self.close(timeout_ms=0)  # the shard is gone: pending items are lost
        lost = self.shard
        for _ in range(self._connection.num_shards):
            shard = self._failover.next_live_shard(lost, error)
            if shard is None:
                return False
            try:
                self._move_to(shard)
                return True
            except TRANSIENT_ERRORS as open_error:
                self._log_open_failed(shard, open_error)
                lost, error = shard, open_error
        return False

    def maybe_return_home(self) -> None:
        """While away from the home shard: every shard probe interval, back if it answers.

        If the home shard answers the probe but not the new writer's table check,
        the actor stays on the shard it was on and probes again an interval later.
        """
        if not self._failover.home_answers_again(self.home, self.shard):
            return
        away = self.shard
        self.close(timeout_ms=RETURN_HOME_FLUSH_MS)
        try:
            self._move_to(self.home)
        except TRANSIENT_ERRORS as error:
            self._log_open_failed(self.home, error)
            self.shard = away
            self.open()  # an error here is the away shard's: the actor loop handles it

    def _log_open_failed(self, shard: int, error: Exception) -> None:
        logging.warning(
            "Actor %d: replay shard %d answered a ping but not the new writer's table "
            "check (%s); not writing to it for now.",
            self._task,
            shard,
            first_line(error),
        )

    def reopen_home(self) -> None:
        """After a full reconnect: a new writer to the home shard (said and counted as
        a move when the actor was away from it)."""
        away = self.shard
        self.shard = self.home
        self.open()
        if away != self.home:
            self._moved()

    def _move_to(self, shard: int) -> None:
        self.shard = shard
        self.open()
        self._moved()

    def _moved(self) -> None:
        logging.info(
            "Actor %d: writing to replay shard %d (home shard %d).",
            self._task,
            self.shard,
            self.home,
        )
        self._stats.shard_moves += 1

    def log_counts(self) -> None:
        """Says in words what the counts mean, so none reads as a loss that wasn't."""
        stats = self._stats
        text = f"{stats.transitions_written} transitions confirmed by the server"
        if stats.transitions_unconfirmed:
            text += (
                f", {stats.transitions_unconfirmed} sent but unconfirmed when the actor "
                "stopped (the server may hold them; its insert count is the authority)"
            )
        if stats.transitions_dropped:
            text += (
                f", {stats.transitions_dropped} never sent (the rows of an incomplete last "
                f"item of {self._transitions_per_item})"
            )
        logging.info("Actor %d: %s.", self._task, text)
