"""The tiny algorithm's learner, built on the shared pieces of sac_distributed.algorithm:
LearnerBase, the checkpoints and exports, the traced functions and the actor's head."""

import functools

import numpy as np
import tensorflow as tf
from tf_agents.agents.ddpg import critic_network
from tf_agents.agents.sac import sac_agent
from tf_agents.networks import actor_distribution_network

from sac_distributed.algorithm.checkpoint_checks import check_written_by
from sac_distributed.algorithm.checkpoints import (
    DEFAULT_CHECKPOINTS_TO_KEEP,
    LearnerCheckpoints,
    PolicyExporter,
    make_policy_savers,
)
from sac_distributed.algorithm.common import actor_projection
from sac_distributed.algorithm.learner import Diagnostics, LearnerBase, call_update, checked_losses
from sac_distributed.algorithm.policy import ObservationNormalization
from sac_distributed.algorithm.traced import TracedFunctions
from tiny_algorithm.config import CHECKPOINT_KEY, NAME


class TinyLearner(LearnerBase):
    """A SacAgent with TF-Agents' own networks, one `agent.train` per step."""

    ALGORITHM = "TinySAC"

    def __init__(
        self,
        specs,
        hparams,
        strategy,
        root_dir,
        seed=None,
        max_checkpoints_to_keep=DEFAULT_CHECKPOINTS_TO_KEEP,
    ):
        self._specs = specs
        self.strategy = strategy
        if seed is not None:
            tf.keras.utils.set_random_seed(seed)
        with strategy.scope():
            self.train_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
            self.actor = actor_distribution_network.ActorDistributionNetwork(
                specs.observation,
                specs.action,
                fc_layer_params=hparams.actor_fc_layer_params,
                continuous_projection_net=actor_projection(hparams),
            )
            self.critic = critic_network.CriticNetwork(
                (specs.observation, specs.action),
                joint_fc_layer_params=hparams.critic_joint_fc_layer_params,
            )
            adam = tf.keras.optimizers.Adam
            self.agent = sac_agent.SacAgent(
                specs.time_step,
                specs.action,
                actor_network=self.actor,
                critic_network=self.critic,
                actor_optimizer=adam(hparams.actor_learning_rate),
                critic_optimizer=adam(hparams.critic_learning_rate),
                alpha_optimizer=adam(hparams.alpha_learning_rate),
                gamma=hparams.gamma,
                train_step_counter=self.train_step,
            )
            self.agent.initialize()
            savers = make_policy_savers(self.agent.policy, self.train_step)
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
        return float(tf.exp(self.agent._log_alpha))  # noqa: SLF001  (SacAgent has no getter)

    def step(self, iterator, num_steps=1):
        outputs = call_update(self._functions["train"], iterator, num_steps, self._non_finite)
        return checked_losses(outputs, self._non_finite)

    def _train_steps(self, iterator, num_steps):
        def body(i, _losses):
            info = self.strategy.run(self.agent.train, args=(next(iterator),))
            extra = info.extra
            return i + 1, (info.loss, extra.critic_loss, extra.actor_loss, extra.alpha_loss)

        zero = tf.constant(0.0)
        start = (tf.constant(0, num_steps.dtype), (zero, zero, zero, zero))
        _, losses = tf.while_loop(lambda i, _: i < num_steps, body, start)
        return losses

    def diagnostics(self, iterator):
        entropy, q_value = (float(x) for x in self._functions["diagnostics"](iterator))
        return Diagnostics(entropy, q_value, self.alpha)

    def _diagnostics(self, iterator):
        def replica_fn(experience):
            time_steps = experience.time_step
            distribution, _ = self.actor(time_steps.observation, time_steps.step_type)
            actions = distribution.sample()
            log_pi = distribution.log_prob(actions)
            q_values, _ = self.critic((time_steps.observation, actions), time_steps.step_type)
            return -tf.reduce_mean(log_pi), tf.reduce_mean(q_values)

        return self.strategy.run(replica_fn, args=(next(iterator),))

    def policy_weights(self):
        return [np.asarray(v.numpy()) for v in self.actor.variables]

    def observation_normalization(self):
        return ObservationNormalization.identity(self._specs.observation.shape)
