"""The `Learner` interface every algorithm offers the learner job, and what learners share.

`Learner` is what `jobs.learner_loop` and prioritized replay's part of it
(`jobs.learner_priorities`) call, declared as a Protocol: an algorithm's learner
(`sac.learner.SacLearner`, `crossq.learner.CrossQLearner`, or a new one behind
a registry entry, registry.py) offers these methods and nothing about the job
needs to know which update runs. `LearnerBase` implements the part that is the
same for every learner once it is built (train_step, checkpoints, exports,
traced-function spares); `call_update` and `checked_losses` run a traced
update and turn its numerics failures into our error.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Protocol, Tuple

import numpy as np
import tensorflow as tf

from sac_distributed.algorithm.checkpoints import LearnerCheckpoints, PolicyExporter
from sac_distributed.algorithm.policy import ObservationNormalization
from sac_distributed.algorithm.traced import TracedFunctions
from sac_distributed.errors import NonFiniteLossError


class Losses(NamedTuple):
    """The losses of one update (summed over replicas): Python floats once a learner
    returns them, tensors inside a traced update. `actor` and `alpha` are the last
    actor update's where an algorithm updates the actor less often than the critics."""

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


class Learner(Protocol):
    """What the learner job calls on an algorithm's learner.

    A learner is built by its registry entry's factory (registry.py) with the
    env's specs, the run's Hyperparams, a tf.distribute strategy and root_dir,
    and has restored root_dir's newest usable checkpoint by then.
    """

    # Whether `step_prioritized` works; the loop refuses a prioritized run otherwise.
    supports_prioritized_replay: bool

    @property
    def train_step_numpy(self) -> int:
        """Updates done so far (restored from the checkpoint)."""

    @property
    def alpha(self) -> float:
        """The entropy temperature learned so far."""

    @property
    def latest_checkpoint(self) -> Optional[str]:
        """The newest checkpoint on disk, None before the first."""

    def step(self, iterator: Iterator, num_steps: int = 1) -> Losses:
        """`num_steps` updates on batches from `iterator` in one traced call; the last
        step's losses. Raises NonFiniteLossError on a NaN or inf loss."""

    def step_prioritized(
        self, iterator: Iterator, num_steps: int = 1
    ) -> Tuple[Losses, PriorityUpdate]:
        """`step` on prioritized batches, (Transition, info) pairs: also each item's
        new priority (see SacLearner.step_prioritized for the fields)."""

    def diagnostics(self, iterator: Iterator) -> Diagnostics:
        """Policy entropy and mean Q on one batch, and the temperature."""

    def variables(self) -> LearnerVariables:
        """What actors and the evaluator act with, as NumPy values."""

    def save_checkpoint(self) -> bool:
        """Writes ckpt-<train_step>; False (and the previous one kept) on failure."""

    def export_policies(self) -> None:
        """Writes SavedModels of the policies under root_dir/policies."""

    def retrace(self) -> bool:
        """New traced functions after a reconnect; True when spares were ready."""

    def trace_spares(self, iterator: Iterator) -> int:
        """Traces ahead what `retrace` puts in place; how many functions it traced."""

    @property
    def spares_ready(self) -> bool:
        """Every traced function in use has a spare."""

    def tracing_counts(self) -> Dict[str, int]:
        """How often each current traced function traced."""


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
    """The `Learner` methods that are the same for every learner once built: a subclass
    sets `train_step`, `_checkpoints` (LearnerCheckpoints), `_exporter` (PolicyExporter)
    and `_functions` (TracedFunctions), and defines `step`, `diagnostics`, `alpha`,
    `policy_weights()` and `observation_normalization()` (and `step_prioritized`, with
    `supports_prioritized_replay = True`, where its update can weight and rank items).
    """

    ALGORITHM = "SAC"  # names the learner in its errors
    supports_prioritized_replay = False
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

    def step_prioritized(
        self, iterator: Iterator, num_steps: int = 1
    ) -> Tuple[Losses, PriorityUpdate]:
        raise NotImplementedError(f"The {self.ALGORITHM} learner has no prioritized update.")

    def policy_weights(self) -> List[np.ndarray]:
        """The acting weights as (kernel, bias) pairs (policy.acting_weight_shapes)."""
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
