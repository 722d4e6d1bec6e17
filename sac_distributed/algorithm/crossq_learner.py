"""The CrossQ learner: `SacLearner`'s interface around `crossq.CrossQAgent`.

`learner_loop.LearnerLoop` drives either learner the same way (`step`,
`diagnostics`, `variables`, `save_checkpoint`, `export_policies`, `retrace`),
so replay, actors, the evaluator, shards and launchers do not know which
update runs. What differs is inside: CrossQ's update (crossq.py), a
checkpoint that also holds every running statistic, and acting weights that
are the actor in inference mode folded into plain (kernel, bias) pairs, the
layout the variable container and the NumPy policy already take.
"""

from __future__ import annotations

from typing import Iterator, List, Optional

import numpy as np
import tensorflow as tf
from absl import logging
from tf_agents.policies import actor_policy, greedy_policy, policy_saver

from sac_distributed import paths
from sac_distributed.algorithm import crossq
from sac_distributed.algorithm import sac_learner as sac
from sac_distributed.algorithm.agent import EnvSpecs
from sac_distributed.algorithm.policy import ObservationNormalization
from sac_distributed.config import Hyperparams
from sac_distributed.errors import CheckpointError, NonFiniteLossError

# The checkpoint's name for the CrossQ agent; SacLearner's is "agent".
CHECKPOINT_KEY = "crossq"


class CrossQLearner:
    """CrossQAgent, its train_step, checkpoints and exports.

    Construction builds everything under `strategy.scope()` and restores the
    newest readable checkpoint in root_dir (falling back past damaged ones);
    it raises CheckpointError when checkpoints exist and none can be used, or
    when they were written by the SAC learner.
    """

    def __init__(
        self,
        specs: EnvSpecs,
        hparams: Hyperparams,
        strategy: tf.distribute.Strategy,
        root_dir: str,
        seed: Optional[int] = None,
        max_checkpoints_to_keep: int = sac.DEFAULT_CHECKPOINTS_TO_KEEP,
        settings: crossq.CrossQSettings = crossq.DEFAULT_SETTINGS,
    ):
        if hparams.algorithm != "crossq":
            raise ValueError(f"CrossQLearner runs algorithm=crossq, got {hparams.algorithm!r}.")
        self._specs = specs
        self._root_dir = root_dir
        self.strategy = strategy
        if seed is not None:
            tf.keras.utils.set_random_seed(seed)  # the same initial weights every run
        with strategy.scope():
            self.train_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
            self.agent = crossq.CrossQAgent(specs, hparams, self.train_step, settings)
            # The acting policy runs every BatchRenorm on its running statistics.
            self.policy = actor_policy.ActorPolicy(
                specs.time_step, specs.action, actor_network=self.agent.actor, training=False
            )
            acting = policy_saver.PolicySaver(
                self.policy, batch_size=None, train_step=self.train_step
            )
            greedy = greedy_policy.GreedyPolicy(self.policy)
            self._savers = {
                "policy": acting,
                "collect_policy": acting,
                "greedy_policy": policy_saver.PolicySaver(
                    greedy, batch_size=None, train_step=self.train_step
                ),
            }
        assert tuple(self._savers) == paths.POLICY_NAMES
        checkpoint = tf.train.Checkpoint(**{CHECKPOINT_KEY: self.agent}, train_step=self.train_step)
        self._checkpoints = tf.train.CheckpointManager(
            checkpoint,
            paths.checkpoint_dir(root_dir),
            max_to_keep=max_checkpoints_to_keep,
            checkpoint_name=paths.CHECKPOINT_PREFIX,
        )
        self._restore()
        self._last_exported_step = -1
        self.retrace()

    @property
    def train_step_numpy(self) -> int:
        return int(self.train_step.numpy())

    @property
    def alpha(self) -> float:
        return float(tf.exp(self.agent.log_alpha))

    @property
    def latest_checkpoint(self) -> Optional[str]:
        return self._checkpoints.latest_checkpoint

    # --- the update --------------------------------------------------------------

    def retrace(self) -> None:
        """Drops the traced functions; the next call traces new ones."""
        self._train_fn = sac._function(self._train_steps)  # noqa: SLF001  (no autograph)
        self._diagnostics_fn = sac._function(self._diagnostics)  # noqa: SLF001

    def step(self, iterator: Iterator, num_steps: int = 1) -> sac.Losses:
        """Runs `num_steps` CrossQ updates on batches from `iterator`; the last losses.

        Raises NonFiniteLossError on a NaN or inf loss, and the iterator's own
        errors, as SacLearner.step.
        """
        try:
            outputs = self._train_fn(iterator, tf.constant(num_steps))
        except tf.errors.InvalidArgumentError as error:
            if "inf or nan" not in error.message:
                raise
            raise self._non_finite(error.message.splitlines()[0]) from None
        losses = sac.Losses(*(float(x) for x in outputs))
        if not all(np.isfinite(losses)):
            raise self._non_finite(f"total, critic, actor, alpha losses = {list(losses)}")
        return losses

    def _train_steps(self, iterator, num_steps: tf.Tensor):
        """A tf.while_loop of CrossQ updates (one replica: --strategy=default)."""

        def body(i, _losses):
            losses = self.strategy.run(self.agent.train, args=(next(iterator),))
            return i + 1, tuple(losses)

        zero = tf.constant(0.0)
        start = (tf.constant(0, num_steps.dtype), (zero, zero, zero, zero))
        _, losses = tf.while_loop(lambda i, _: i < num_steps, body, start)
        return losses

    def diagnostics(self, iterator: Iterator) -> sac.Diagnostics:
        """Entropy and mean Q (inference mode) on one batch, and the temperature."""
        entropy, q_value = (float(x) for x in self._diagnostics_fn(iterator))
        return sac.Diagnostics(entropy, q_value, self.alpha)

    def _diagnostics(self, iterator):
        def replica_fn(experience):
            observations = experience.time_step.observation
            actions, log_pi = self.agent.sample(observations, training=False)
            q_values, _ = self.agent.critic_1((observations, actions), training=False)
            return -tf.reduce_mean(log_pi), tf.reduce_mean(q_values)

        return self.strategy.run(replica_fn, args=(next(iterator),))

    def _non_finite(self, detail: str) -> NonFiniteLossError:
        kept = self.latest_checkpoint or "none yet"
        return NonFiniteLossError(
            f"CrossQ loss became NaN or inf at train_step {self.train_step_numpy} ({detail}). "
            f"Nothing from this step was saved; the last good checkpoint ({kept}) is kept. "
            "Lower the learning rates or reward_scale_factor, or check the environment's "
            "rewards, then restart to resume from it."
        )

    # --- what acting needs ---------------------------------------------------------

    def policy_weights(self) -> List[np.ndarray]:
        """The actor in inference mode as (kernel, bias) pairs (crossq.fold_actor_weights)."""
        return crossq.fold_actor_weights(self.agent.actor)

    def observation_normalization(self) -> ObservationNormalization:
        """Always the identity: the actor's input BatchRenorm is folded into its weights."""
        return ObservationNormalization.identity(self._specs.observation.shape)

    def variables(self) -> sac.LearnerVariables:
        return sac.LearnerVariables(
            self.policy_weights(), self.train_step_numpy, self.observation_normalization()
        )

    # --- checkpoints and exports: SacLearner's, which read only the attributes
    # set above (_checkpoints, _savers, _root_dir, _last_exported_step) ---------

    save_checkpoint = sac.SacLearner.save_checkpoint
    _checkpoint_path = sac.SacLearner._checkpoint_path  # noqa: SLF001
    export_policies = sac.SacLearner.export_policies

    def _restore(self) -> None:
        """Restores the newest readable checkpoint, falling back past damaged ones."""
        candidates = sac._checkpoints_newest_first(self._checkpoints)  # noqa: SLF001
        if not candidates:
            logging.info("No checkpoint in %s: starting from scratch.", self._checkpoints.directory)
            return
        failures = []
        for path in candidates:
            _check_written_by_crossq(path)
            try:
                self._checkpoints.checkpoint.restore(path).assert_existing_objects_matched()
            except Exception as error:  # any unreadable file; an older one restores in full
                reason = str(error).splitlines()[0][:300]
                if sac._SHAPE_MISMATCH in reason:  # noqa: SLF001
                    raise sac._other_networks_error(path, reason) from None  # noqa: SLF001
                failures.append(f"{path}: {type(error).__name__}: {reason}")
                logging.warning(
                    "Checkpoint %s is unreadable (%s); trying an older one.", path, reason
                )
                continue
            logging.info("Restored %s (train_step=%d).", path, self.train_step_numpy)
            return
        raise CheckpointError(
            f"None of the checkpoints in {self._checkpoints.directory} could be read:\n  "
            + "\n  ".join(failures)
            + "\nMove the directory aside to start from scratch, or restore it from a backup."
        )


def _check_written_by_crossq(path: str) -> None:
    """Refuses a SAC learner's checkpoint (restoring would read as damage)."""
    try:
        names = [name for name, _ in tf.train.list_variables(path)]
    except Exception:  # an unreadable index: _restore reports it, then falls back
        return
    if any(n.startswith(f"{CHECKPOINT_KEY}/") for n in names):
        return
    if any(n.startswith("agent/") for n in names):
        raise CheckpointError(
            f"The checkpoint {path} was written by the SAC learner, and this learner runs "
            "--algorithm=crossq. Pass --algorithm=sac to resume it, or use a new root_dir."
        )
