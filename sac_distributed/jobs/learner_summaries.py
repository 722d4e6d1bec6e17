"""The learner's summaries: losses, diagnostics and speed, to TensorBoard and the log.

`LearnerSummaries` keeps the window since the last summary (for steps/s) and
writes one set of `learner/*` scalars and one log line per call; the log line
ends with the run's progress (`progress`), which sac-launch shows.
"""

from __future__ import annotations

import time
from typing import Dict, Optional

from absl import logging

from sac_distributed.algorithm.learner import Diagnostics, Losses
from sac_distributed.runtime import Metrics


class LearnerSummaries:
    """Writes the learner's scalars and log line every summary interval.

    Args:
      metrics: the job's one metrics writer.
      num_iterations: the run's length in train steps (for the progress text).
      step: the train_step training starts (or resumes) at.
    """

    def __init__(self, metrics: Metrics, num_iterations: int, step: int):
        self._metrics = metrics
        self._num_iterations = num_iterations
        self._resumed: Optional[float] = None
        self.restart(step)

    def resumed(self, step: int, how: str, iterator_s: float, publish_s: float) -> None:
        """The loop resumed after a reconnect at `step`: logs how (`how`: the update's
        traces), the seconds a new iterator and publishing the weights took; `trained`
        then times the first call."""
        logging.info(
            "Learner resumed at train_step %d after reconnecting (%s; new iterator %.1f s, "
            "weights published %.1f s).",
            step,
            how,
            iterator_s,
            publish_s,
        )
        self._resumed = time.monotonic()

    def trained(self, step: int) -> None:
        """After each training call; the first one after `resumed` is logged with its
        seconds (a new iterator's first batches, and tracing unless spares were ready)."""
        if self._resumed is not None:
            seconds, self._resumed = time.monotonic() - self._resumed, None
            logging.info(
                "Learner trained again up to train_step %d, %.1f s after resuming.", step, seconds
            )

    def restart(self, step: int) -> None:
        """Starts the run's and the window's clocks at `step` (training begins)."""
        self._start = self._window = (time.monotonic(), step)

    def write(self, step: int, losses: Optional[Losses], diagnostics: Diagnostics) -> None:
        """One summary at `step`: the losses of the last call, `diagnostics` and steps/s
        since the last summary."""
        t0, s0 = self._window
        now = time.monotonic()
        rate = (step - s0) / max(now - t0, 1e-9)
        self._metrics.scalars(_scalars(losses, diagnostics, rate), step)
        logging.info(
            "train_step %d: %s; %s",
            step,
            _summary_line(losses, diagnostics, rate),
            progress(step, self._num_iterations, rate),
        )
        self._window = (now, step)

    def overall_rate(self, step: int) -> float:
        """Train steps per second since `restart`."""
        t0, s0 = self._start
        return (step - s0) / max(time.monotonic() - t0, 1e-9)


def _scalars(losses: Losses, diagnostics: Diagnostics, rate: float) -> Dict[str, float]:
    return {
        "learner/entropy": diagnostics.entropy,
        "learner/q_value": diagnostics.q_value,
        "learner/loss": losses.total,
        "learner/critic_loss": losses.critic,
        "learner/actor_loss": losses.actor,
        "learner/alpha_loss": losses.alpha,
        "learner/alpha": diagnostics.alpha,
        "learner/steps_per_sec": rate,
    }


def _summary_line(losses: Losses, diagnostics: Diagnostics, rate: float) -> str:
    return (
        f"loss {losses.total:.3f} (critic {losses.critic:.3f}, actor {losses.actor:.3f}), "
        f"alpha {diagnostics.alpha:.4f}, entropy {diagnostics.entropy:.3f}, {rate:.1f} steps/s"
    )


def progress(done: int, total: int, rate: float) -> str:
    """'1000/8000 (12%), about 50 s left' at `rate` per second."""
    text = f"{done}/{total} ({100.0 * done / max(total, 1):.0f}%)"
    if done < total and rate > 0:
        text += f", about {format_duration((total - done) / rate)} left"
    return text


def format_duration(seconds: float) -> str:
    """3725 -> '1 h 2 min', 95 -> '1 min 35 s', 7.2 -> '7 s'."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{secs} s"
