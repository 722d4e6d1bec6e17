"""The actor's warm-up: uniform random actions until the replay holds
`initial_collect_steps` transitions, counted across all actors and replay shards."""

from __future__ import annotations

from absl import logging

from sac_distributed import replay
from sac_distributed.replay.connection import Connection

CHECK_EVERY = 100  # actor steps between replay-size checks while warming up
PROGRESS_LOG_S = 10.0  # seconds between initial-collect progress lines


class WarmUp:
    """Says when an actor switches from random actions to the collect policy.

    Args:
      connection: the actor's connection (the live shards are counted).
      initial_collect_steps: transitions the replay must hold.
      transitions_per_item: K, to count items in transitions.
      task: the actor's index, for the log lines.
    """

    def __init__(
        self,
        connection: Connection,
        initial_collect_steps: int,
        transitions_per_item: int,
        task: int,
    ):
        self._connection = connection
        self._needed = initial_collect_steps
        self._transitions_per_item = transitions_per_item
        self._task = task
        self.warm = False

    def check(self, step: int) -> None:
        """Every CHECK_EVERY actor steps until warm: reads the replay's size."""
        if self.warm or step % CHECK_EVERY:
            return
        items = replay.stored_items(self._connection.live_clients())
        size = items * self._transitions_per_item
        if size < self._needed:
            logging.log_every_n_seconds(
                logging.INFO,
                "Actor %d: initial collect with random actions, replay holds %d / %d "
                "transitions (%.0f%%).",
                PROGRESS_LOG_S,
                self._task,
                size,
                self._needed,
                100.0 * size / self._needed,
            )
            return
        logging.info(
            "Actor %d: replay holds %d transitions; switching from random to the collect policy.",
            self._task,
            size,
        )
        self.warm = True
