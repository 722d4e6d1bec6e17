"""The CrossQ learner: the `Learner` interface around `update.CrossQAgent`.

`learner_loop.LearnerLoop` drives every learner the same way (`step`,
`diagnostics`, `variables`, `save_checkpoint`, `export_policies`, `retrace`),
so replay, actors, the evaluator, shards and launchers do not know which
update runs. What differs is inside: CrossQ's update (update.py), a
checkpoint that also holds every running statistic, and acting weights that
are the actor in inference mode folded into plain (kernel, bias) pairs, the
layout the variable container and the NumPy policy already take.
"""

from __future__ import annotations

import functools
from typing import Iterator, List, Optional

import numpy as np
import tensorflow as tf
from tf_agents.policies import actor_policy

from sac_distributed.algorithm.checkpoint_checks import check_written_by
from sac_distributed.algorithm.checkpoints import (
    DEFAULT_CHECKPOINTS_TO_KEEP,
    LearnerCheckpoints,
    PolicyExporter,
    make_policy_savers,
)
from sac_distributed.algorithm.crossq.config import CHECKPOINT_KEY, NAME, CrossQSettings
from sac_distributed.algorithm.crossq.networks import fold_actor_weights
from sac_distributed.algorithm.crossq.update import CrossQAgent
from sac_distributed.algorithm.learner import (
    Diagnostics,
    LearnerBase,
    Losses,
    call_update,
    checked_losses,
)
from sac_distributed.algorithm.policy import ObservationNormalization
from sac_distributed.algorithm.traced import TracedFunctions
from sac_distributed.config import Hyperparams
from sac_distributed.envs.specs import EnvSpecs


class CrossQLearner(LearnerBase):
    """CrossQAgent, its train_step, checkpoints and exports.

    Construction builds everything under `strategy.scope()` and restores the
    newest readable checkpoint in root_dir (falling back past damaged ones);
    it raises CheckpointError when checkpoints exist and none can be used, or
    when they were written by the SAC learner.
    """

    ALGORITHM = "CrossQ"

    def __init__(
        self,
        specs: EnvSpecs,
        hparams: Hyperparams,
        strategy: tf.distribute.Strategy,
        root_dir: str,
        seed: Optional[int] = None,
        max_checkpoints_to_keep: int = DEFAULT_CHECKPOINTS_TO_KEEP,
        settings: Optional[CrossQSettings] = None,
    ):
        if hparams.algorithm != NAME:
            raise ValueError(f"CrossQLearner runs algorithm=crossq, got {hparams.algorithm!r}.")
        self._specs = specs
        self.strategy = strategy
        if seed is not None:
            tf.keras.utils.set_random_seed(seed)  # the same initial weights every run
        with strategy.scope():
            self.train_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
            self.agent = CrossQAgent(specs, hparams, self.train_step, settings)
            # The acting policy runs every BatchRenorm on its running statistics.
            self.policy = actor_policy.ActorPolicy(
                specs.time_step, specs.action, actor_network=self.agent.actor, training=False
            )
            savers = make_policy_savers(self.policy, self.train_step, specs.env_action)
        checkpoint = tf.train.Checkpoint(**{CHECKPOINT_KEY: self.agent}, train_step=self.train_step)
        self._checkpoints = LearnerCheckpoints(
            checkpoint, self.train_step, root_dir, max_checkpoints_to_keep
        )
        self._checkpoints.restore(checks=(functools.partial(check_written_by, algorithm=NAME),))
        self._exporter = PolicyExporter(savers, self.train_step, root_dir)
        self._functions = TracedFunctions(
            {"train": (self._train_steps, True), "diagnostics": (self._diagnostics, False)}
        )

    @property
    def alpha(self) -> float:
        return float(tf.exp(self.agent.log_alpha))

    # --- the update --------------------------------------------------------------

    def step(self, iterator: Iterator, num_steps: int = 1) -> Losses:
        """Runs `num_steps` CrossQ updates on batches from `iterator`; the last losses.

        Raises NonFiniteLossError on a NaN or inf loss, and the iterator's own
        errors, as SacLearner.step.
        """
        outputs = call_update(self._functions["train"], iterator, num_steps, self._non_finite)
        return checked_losses(outputs, self._non_finite)

    def _train_steps(self, iterator, num_steps: tf.Tensor):
        """A tf.while_loop of CrossQ updates (one replica: --strategy=default)."""

        def body(i, _losses):
            losses = self.strategy.run(self.agent.train, args=(next(iterator),))
            return i + 1, tuple(losses)

        zero = tf.constant(0.0)
        start = (tf.constant(0, num_steps.dtype), (zero, zero, zero, zero))
        _, losses = tf.while_loop(lambda i, _: i < num_steps, body, start)
        return losses

    def diagnostics(self, iterator: Iterator) -> Diagnostics:
        """Entropy and mean Q (inference mode) on one batch, and the temperature."""
        entropy, q_value = (float(x) for x in self._functions["diagnostics"](iterator))
        return Diagnostics(entropy, q_value, self.alpha)

    def _diagnostics(self, iterator):
        def replica_fn(experience):
            observations = experience.time_step.observation
            actions, log_pi = self.agent.sample(observations, training=False)
            q_values, _ = self.agent.critic_1((observations, actions), training=False)
            return -tf.reduce_mean(log_pi), tf.reduce_mean(q_values)

        return self.strategy.run(replica_fn, args=(next(iterator),))

    # --- what acting needs ---------------------------------------------------------

    def policy_weights(self) -> List[np.ndarray]:
        """The actor in inference mode as (kernel, bias) pairs (networks.fold_actor_weights)."""
        return fold_actor_weights(self.agent.actor)

    def observation_normalization(self) -> ObservationNormalization:
        """Always the identity: the actor's input BatchRenorm is folded into its weights."""
        return ObservationNormalization.identity(self._specs.observation.shape)
