"""What both learners (SacLearner, CrossQLearner) share: what they return, how their
traced update is called and its losses checked, and `LearnerBase`, their methods for
train_step, checkpoints, exports and the variables acting needs."""

from __future__ import annotations

from typing import Callable, Dict, Iterator, List, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from sac_distributed.algorithm.checkpoints import LearnerCheckpoints, PolicyExporter
from sac_distributed.algorithm.policy import ObservationNormalization
from sac_distributed.algorithm.traced import TracedFunctions
from sac_distributed.errors import NonFiniteLossError


class Losses(NamedTuple):
    """The losses of one SAC update (summed over replicas)."""

    total: float
    critic: float
    actor: float
    alpha: float


class Diagnostics(NamedTuple):
    """How the policy and critics look on one batch."""

    entropy: float  # -E[log pi(a|s)], a ~ pi
    q_value: float  # mean Q1(s, a ~ pi)
    alpha: float  # the temperature


class PriorityUpdate(NamedTuple):
    """New priorities of the replay items one `step_prioritized` call trained on.

    One entry per item and step, in step order (an item sampled twice appears
    twice; the later priority is the newer one).
    """

    keys: np.ndarray  # uint64: the items' Reverb keys
    shards: np.ndarray  # int32: the shard each item came from
    priorities: np.ndarray  # float64: mean |TD error| over the item's rows, + epsilon


class LearnerVariables(NamedTuple):
    """What acting needs from the learner: the policy and the inputs it expects."""

    policy_weights: List[np.ndarray]  # the actor network's, in `policy_variables` order
    train_step: int
    normalization: ObservationNormalization


# Builds the learner's error for a NaN or inf loss from a detail of where it showed.
NonFinite = Callable[[str], NonFiniteLossError]


def call_update(fn, iterator: Iterator, num_steps: int, non_finite: NonFinite):
    """`fn(iterator, num_steps)`, turning the update's numerics check into our error."""
    try:
        return fn(iterator, tf.constant(num_steps))
    except tf.errors.InvalidArgumentError as error:
        # The updates check losses with tf.debugging.check_numerics.
        if "inf or nan" not in error.message:
            raise
        raise non_finite(_numerics_line(error.message)) from None


def _numerics_line(message: str) -> str:
    """The line of a failed numerics check that names the loss ("Critic loss is inf or
    nan. : Tensor had NaN values"); TensorFlow's first line is only "Graph execution error:"."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    named = [line for line in lines if "inf or nan" in line]
    return (named or lines or [message])[0]


def checked_losses(outputs, non_finite: NonFinite) -> Losses:
    """The update's (total, critic, actor, alpha) outputs as Losses; raises on NaN or inf."""
    losses = Losses(*(float(x) for x in outputs))
    if not all(np.isfinite(losses)):
        raise non_finite(f"total, critic, actor, alpha losses = {list(losses)}")
    return losses


def non_finite_error(algorithm: str, train_step: int, kept: str, detail: str) -> NonFiniteLossError:
    """The error for a NaN or inf loss: where it showed and which checkpoint is kept."""
    return NonFiniteLossError(
        f"{algorithm} loss became NaN or inf at train_step {train_step} ({detail}). "
        f"Nothing from this step was saved; the last good checkpoint ({kept}) is kept. "
        "Lower the learning rates or reward_scale_factor, or check the environment's "
        "rewards; in the first steps on large observations (Humanoid-v5's reach thousands) "
        "the actor's std overflows: add --clip_policy_log_std or --normalize_observations. "
        "Then restart to resume from it."
    )


class LearnerBase:
    """The methods both learners share once built: a subclass sets `train_step`,
    `_checkpoints` (LearnerCheckpoints), `_exporter` (PolicyExporter) and `_functions`
    (TracedFunctions), and defines `policy_weights()` and `observation_normalization()`.
    """

    ALGORITHM = "SAC"  # names the learner in its errors
    train_step: tf.Variable
    _checkpoints: LearnerCheckpoints
    _exporter: PolicyExporter
    _functions: TracedFunctions

    @property
    def train_step_numpy(self) -> int:
        return int(self.train_step.numpy())

    @property
    def latest_checkpoint(self) -> Optional[str]:
        return self._checkpoints.latest

    def policy_weights(self) -> List[np.ndarray]:
        raise NotImplementedError

    def observation_normalization(self) -> ObservationNormalization:
        raise NotImplementedError

    def variables(self) -> LearnerVariables:
        """The policy weights, train_step and observation statistics, as NumPy values."""
        return LearnerVariables(
            self.policy_weights(), self.train_step_numpy, self.observation_normalization()
        )

    def save_checkpoint(self) -> bool:
        """Writes ckpt-<train_step>; on failure keeps the previous one as the latest."""
        return self._checkpoints.save()

    def export_policies(self) -> None:
        """Writes full SavedModels of all three policies, replacing the old ones."""
        self._exporter.export()

    # --- the traced functions, for a reconnect (traced.py) ----------------------------

    def retrace(self) -> bool:
        """New functions in place of the current ones, which a call abandoned on a lost
        server may still be running: the spares where traced ahead (True), else
        functions that trace on their first call."""
        return self._functions.swap()

    def trace_spares(self, iterator: Iterator) -> int:
        """Traces ahead what `retrace` will put in place; how many functions it traced."""
        return self._functions.trace_spares(iterator)

    @property
    def spares_ready(self) -> bool:
        return self._functions.spares_ready

    def tracing_counts(self) -> Dict[str, int]:
        return self._functions.tracing_counts()

    def _non_finite(self, detail: str) -> NonFiniteLossError:
        kept = self.latest_checkpoint or "none yet"
        return non_finite_error(self.ALGORITHM, self.train_step_numpy, kept, detail)
