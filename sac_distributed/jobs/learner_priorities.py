"""Prioritized replay on the learner's side: which update a training call runs, and
where its new priorities go.

With prioritized replay each call runs the learner's `step_prioritized` and
hands the items' new priorities to a `replay.priorities.PriorityUpdater`
(which sends them off the training path); the running maximum priority is
published with the weights, and resumed from there after a restart. Without
it, each call runs the plain `step`.
"""

from __future__ import annotations

from typing import Callable, Iterator, Optional, Sequence

from absl import logging

from sac_distributed.algorithm.learner import Learner, Losses
from sac_distributed.errors import ConfigError
from sac_distributed.replay import priorities
from sac_distributed.replay.variables import VariableContainer

# Runs `fn(*args)` guarded by the learner's watchdog; the name says whether it has traced.
GuardedCall = Callable[..., object]


class LearnerPriorities:
    """The learner's training call and, with prioritized replay, its priority updates.

    Args:
      prioritized: whether the run uses prioritized replay.
      replay_addresses: the replay shards' addresses, in shard order.
      learner: the learner it trains; refused for a prioritized run unless it
        supports prioritized replay.
    """

    def __init__(self, prioritized: bool, replay_addresses: Sequence[str], learner: Learner):
        if prioritized and not learner.supports_prioritized_replay:
            raise ConfigError(
                f"The {type(learner).__name__} has no prioritized update (its "
                "supports_prioritized_replay is False): run without --prioritized_replay."
            )
        self._prioritized = prioritized
        self._addresses = tuple(replay_addresses)
        self._updater: Optional[priorities.PriorityUpdater] = None

    def start(self, container: VariableContainer) -> None:
        """With prioritized replay: the updater, its running max resumed from the
        published one (a restarted learner keeps inserting at the same level)."""
        if not self._prioritized or self._updater is not None:
            return
        published = container.pull_max_priority()
        self._updater = priorities.PriorityUpdater(
            self._addresses, initial_max_priority=priorities.initial_max_priority(published)
        )

    def train(self, call: GuardedCall, learner: Learner, iterator: Iterator, steps: int) -> Losses:
        """`steps` updates through `call`; with prioritized replay submits the new priorities."""
        if self._updater is None:
            return call("train", learner.step, iterator, steps)
        losses, update = call("train", learner.step_prioritized, iterator, steps)
        self._updater.submit(*update)
        return losses

    def publish(self, container: VariableContainer) -> None:
        """Publishes the running maximum priority (new items enter at it)."""
        if self._updater is not None:
            container.push_max_priority(self._updater.max_priority)

    def close(self) -> None:
        """Sends what is pending (bounded) and logs the updater's counts."""
        if self._updater is None:
            return
        not_sent = self._updater.close()
        logging.info(
            "Priority updates: %d sent, %d dropped (shard down), %d not sent at exit.",
            self._updater.sent,
            self._updater.dropped,
            not_sent,
        )
