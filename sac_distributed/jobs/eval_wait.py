"""With `wait_for_eval`: the learner's pause at every eval_interval until the
evaluator has written that step's row to root_dir/eval/results.csv."""

from __future__ import annotations

import time
from typing import Callable

from absl import logging

from sac_distributed import paths
from sac_distributed.results import last_evaluated_step

# How long the learner waits for one evaluation before it trains on without
# waiting for any more (the evaluator is gone or writes elsewhere).
EVAL_WAIT_TIMEOUT_S = 600.0


class EvaluationWait:
    """Waits for the evaluator's row of a train step; gives up for good after one timeout.

    Actors wait meanwhile too (the rate limiter holds their inserts), so the
    row's env_steps is where training stopped.

    Args:
      root_dir: the run's root directory (its eval/results.csv is read).
      publish: pushes the current weights, so that the evaluator can score them.
      should_stop: True ends a wait early.
    """

    def __init__(
        self, root_dir: str, publish: Callable[[], object], should_stop: Callable[[], bool]
    ):
        self._results_path = paths.results_path(root_dir)
        self._publish = publish
        self._should_stop = should_stop
        self.waiting = True  # False once a wait timed out

    def __call__(self, step: int) -> None:
        """Publishes, then waits for the evaluator's row of `step` (if still waiting)."""
        if not self.waiting:
            return
        self._publish()
        started = time.monotonic()
        while not self._should_stop():
            evaluated = last_evaluated_step(self._results_path)
            if evaluated is not None and evaluated >= step:
                logging.info(
                    "train_step %d evaluated; waited %.1f s.", step, time.monotonic() - started
                )
                return
            if time.monotonic() - started > EVAL_WAIT_TIMEOUT_S:
                logging.warning(
                    "No evaluation of train_step %d in %s after %.0f s: training on without "
                    "waiting for evaluations (is the evaluator running, on this root_dir?).",
                    step,
                    self._results_path,
                    EVAL_WAIT_TIMEOUT_S,
                )
                self.waiting = False
                return
            time.sleep(0.05)
