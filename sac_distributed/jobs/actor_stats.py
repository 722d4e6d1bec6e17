"""What an actor counts and reports: `ActorStats` (its counters at the stop) and
`ActorSummaries` (episode returns and throughput, to TensorBoard and the log)."""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Deque, Dict, Optional, Sequence, Tuple

import numpy as np
from absl import logging

from sac_distributed.results import TRAINING_RETURN_WINDOW, EpisodeLog
from sac_distributed.runtime import Metrics


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


class ActorSummaries:
    """The actor's `actor/*` scalars and log lines.

    Args:
      metrics: the job's one metrics writer.
      stats: the actor's counters (env steps, episodes, policy lag, ...).
      task: the actor's index, for the log lines.
      summary_interval_s: seconds between throughput summaries.
      episode_log: where each finished episode is appended (episodes.csv), if anywhere.
    """

    def __init__(
        self,
        metrics: Metrics,
        stats: ActorStats,
        task: int,
        summary_interval_s: float,
        episode_log: Optional[EpisodeLog] = None,
    ):
        self._metrics = metrics
        self._stats = stats
        self._task = task
        self._interval_s = summary_interval_s
        self._episode_log = episode_log
        self._returns: Deque[float] = collections.deque(maxlen=TRAINING_RETURN_WINDOW)
        self._lengths: Deque[int] = collections.deque(maxlen=TRAINING_RETURN_WINDOW)
        self._last: Tuple[float, int] = (time.monotonic(), 0)

    def episode(self, episode_return: float, episode_length: int) -> None:
        """Records a finished episode: the log file and the running averages."""
        stats = self._stats
        self._returns.append(episode_return)
        self._lengths.append(episode_length)
        stats.episodes += 1
        if self._episode_log is not None:
            self._episode_log.append(stats.env_steps, episode_return, episode_length)
        self._metrics.scalars(
            {
                "actor/AverageReturn": np.mean(self._returns),
                "actor/AverageEpisodeLength": np.mean(self._lengths),
            },
            stats.env_steps,
        )

    def non_finite(self, rewards: Sequence[float], finite: np.ndarray, env_name: str) -> None:
        """Counts the dropped steps (`finite` False); the first one is logged."""
        for i in np.flatnonzero(~finite):
            if self._stats.dropped_non_finite == 0:
                logging.warning(
                    "Actor %d: %s returned a non-finite observation or reward (reward=%s) "
                    "at env step %d; dropping such steps and resetting that env. Counted in "
                    "actor/dropped_non_finite_steps.",
                    self._task,
                    env_name,
                    rewards[i],
                    self._stats.env_steps,
                )
            self._stats.dropped_non_finite += 1

    def maybe_write(self) -> None:
        """Every summary interval: env steps per second, policy lag, dropped steps."""
        t0, steps0 = self._last
        elapsed = time.monotonic() - t0
        if elapsed < self._interval_s:
            return
        stats = self._stats
        rate = (stats.env_steps - steps0) / elapsed
        self._metrics.scalars(
            {
                "actor/env_steps_per_sec": rate,
                "actor/policy_lag": stats.last_policy_lag,
                "actor/dropped_non_finite_steps": stats.dropped_non_finite,
            },
            stats.env_steps,
        )
        logging.info(
            "Actor %d: %d env steps (%.0f/s), %d episodes, last returns %s",
            self._task,
            stats.env_steps,
            rate,
            stats.episodes,
            np.round(list(self._returns)[-3:], 1).tolist(),
        )
        self._last = (time.monotonic(), stats.env_steps)
