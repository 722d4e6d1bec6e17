"""SAC from pixels: DrQ's update (Kostrikov et al. 2020, with one augmented copy
per batch as DrQ-v2 and RAD use) and its `Learner`.

One update, top to bottom:
  1. s and s' are shifted at random by up to 4 pixels (`random_shift`);
  2. the critic target r + gamma * discount * (min of the target Q heads on the
     target encoder's features of s', at a' ~ pi(s') - alpha log pi(a'|s'));
  3. the critic loss (both Q heads on the encoder's features of s) trains the
     encoder and both heads with one optimizer;
  4. the actor loss alpha log pi(a|s) - min Q(s, a), a ~ pi(s), on the features
     of s with their gradient stopped, trains the actor's MLP and head alone;
  5. the temperature loss -log alpha (log pi + target entropy), SB3's and DrQ's;
  6. the target encoder and Q heads move towards the online ones by
     target_update_tau every target_update_period steps.

Actors act with the encoder and actor MLP in NumPy (pixel_policy.py), exports are
TF-Agents SavedModels of an ActorPolicy over `PixelActorNetwork`, which take the
env's uint8 observation. The learner job drives this learner as any other
(algorithm/learner.py).
"""

from __future__ import annotations

import functools
from typing import Iterator, List, Optional

import numpy as np
import tensorflow as tf
from tf_agents.policies import actor_policy
from tf_agents.utils import common

from sac_distributed.algorithm.checkpoint_checks import check_written_by
from sac_distributed.algorithm.checkpoints import (
    DEFAULT_CHECKPOINTS_TO_KEEP,
    LearnerCheckpoints,
    PolicyExporter,
    make_policy_savers,
)
from sac_distributed.algorithm.common import td_errors_loss_fn
from sac_distributed.algorithm.learner import (
    Diagnostics,
    LearnerBase,
    Losses,
    call_update,
    checked_losses,
)
from sac_distributed.algorithm.policy import ObservationNormalization
from sac_distributed.algorithm.sac.config import CHECKPOINT_KEY
from sac_distributed.algorithm.sac.pixel_networks import (
    PixelActorNetwork,
    PixelEncoder,
    QHead,
    cpu_flags,
    random_shift,
    warn_if_bfloat16_is_emulated,
)
from sac_distributed.algorithm.traced import TracedFunctions
from sac_distributed.config import Hyperparams
from sac_distributed.envs.specs import EnvSpecs


class PixelSacAgent(tf.Module):
    """The encoder, actor, twin Q heads, their targets, the temperature and optimizers."""

    def __init__(self, specs: EnvSpecs, hparams: Hyperparams, train_step: tf.Variable):
        super().__init__(name="PixelSacAgent")
        self._hparams = hparams
        self.train_step = train_step
        cameras = specs.camera_channel_indices()
        dtype = hparams.conv_dtype
        warn_if_bfloat16_is_emulated(
            dtype, cpu_flags(), len(tf.config.list_physical_devices("GPU"))
        )
        self.encoder = PixelEncoder(cameras, conv_dtype=dtype)
        self.target_encoder = PixelEncoder(cameras, name="TargetPixelEncoder", conv_dtype=dtype)
        self.actor = PixelActorNetwork(specs.observation, specs.action, self.encoder, hparams)
        layers = hparams.critic_joint_fc_layer_params
        self.q_heads = [QHead(layers, "Q1"), QHead(layers, "Q2")]
        self.target_q_heads = [QHead(layers, "TargetQ1"), QHead(layers, "TargetQ2")]
        self.log_alpha = tf.Variable(hparams.initial_log_alpha, dtype=tf.float32, name="log_alpha")
        self._action_spec = specs.action
        self.target_entropy = hparams.target_entropy_for(specs.action.shape.num_elements())
        self._loss_fn = td_errors_loss_fn(hparams.critic_loss)
        adam = functools.partial(tf.keras.optimizers.Adam, epsilon=hparams.adam_epsilon)
        self.critic_optimizer = adam(hparams.critic_learning_rate)
        self.actor_optimizer = adam(hparams.actor_learning_rate)
        self.alpha_optimizer = adam(hparams.alpha_learning_rate)
        self._build(specs)
        self._update_targets(1.0)
        # Adam's moments exist before a checkpoint is restored, so they restore too.
        self.critic_optimizer.build(self.critic_variables)
        self.actor_optimizer.build(self.actor.head_variables)
        self.alpha_optimizer.build([self.log_alpha])

    def _build(self, specs: EnvSpecs) -> None:
        observation = tf.nest.map_structure(
            lambda spec: tf.zeros([1, *spec.shape.as_list()], spec.dtype), specs.observation
        )
        action = tf.zeros([1, *specs.action.shape.as_list()], specs.action.dtype)
        for encoder in (self.encoder, self.target_encoder):
            features = encoder(observation)
        for head in (*self.q_heads, *self.target_q_heads):
            head(features, action)
        self.actor(observation)

    @property
    def critic_variables(self) -> List[tf.Variable]:
        """What the critic loss trains: the encoder and both Q heads."""
        heads = [v for head in self.q_heads for v in head.trainable_variables]
        return list(self.encoder.trainable_variables) + heads

    def _target_pairs(self):
        online = self.encoder.variables + [v for h in self.q_heads for v in h.variables]
        target = self.target_encoder.variables + [
            v for h in self.target_q_heads for v in h.variables
        ]
        return zip(online, target)

    def _update_targets(self, tau: float) -> None:
        for source, target in self._target_pairs():
            target.assign(tau * source + (1.0 - tau) * target)

    def _sample(self, features: tf.Tensor):
        distribution = self.actor.distribution(features, training=True)
        actions = distribution.sample()
        log_pi = common.log_probability(distribution, actions, self._action_spec)
        return actions, log_pi

    def _critic_target(self, experience, next_observation: tf.Tensor) -> tf.Tensor:
        hp = self._hparams
        next_actions, next_log_pi = self._sample(tf.stop_gradient(self.encoder(next_observation)))
        target_features = self.target_encoder(next_observation)
        next_q = tf.minimum(*(h(target_features, next_actions) for h in self.target_q_heads))
        soft = next_q - tf.exp(self.log_alpha) * next_log_pi
        next_step = experience.next_time_step
        return tf.stop_gradient(
            hp.reward_scale_factor * next_step.reward + hp.gamma * next_step.discount * soft
        )

    def train(self, experience) -> tuple:
        """One update on a batch of Transitions; (total, critic, actor, alpha) losses."""
        observation = random_shift(experience.time_step.observation)
        next_observation = random_shift(experience.next_time_step.observation)
        actions = experience.action_step.action
        targets = self._critic_target(experience, next_observation)
        critic_variables = self.critic_variables
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(critic_variables)
            features = self.encoder(observation)
            q1, q2 = (head(features, actions) for head in self.q_heads)
            critic_loss = tf.reduce_mean(self._loss_fn(targets, q1) + self._loss_fn(targets, q2))
        tf.debugging.check_numerics(critic_loss, "Critic loss is inf or nan.")
        gradients = tape.gradient(critic_loss, critic_variables)
        self.critic_optimizer.apply_gradients(zip(gradients, critic_variables))
        actor_loss, log_pi = self._actor_step(tf.stop_gradient(features))
        alpha_loss = self._alpha_step(log_pi)
        self.train_step.assign_add(1)
        period = self._hparams.target_update_period
        if_due = tf.equal(self.train_step % period, 0)
        tau = tf.where(if_due, self._hparams.target_update_tau, 0.0)
        self._update_targets(tau)
        return critic_loss + actor_loss + alpha_loss, critic_loss, actor_loss, alpha_loss

    def _actor_step(self, features: tf.Tensor):
        variables = self.actor.head_variables
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(variables)
            actions, log_pi = self._sample(features)
            q = tf.minimum(*(head(features, actions) for head in self.q_heads))
            actor_loss = tf.reduce_mean(tf.exp(self.log_alpha) * log_pi - q)
        tf.debugging.check_numerics(actor_loss, "Actor loss is inf or nan.")
        self.actor_optimizer.apply_gradients(zip(tape.gradient(actor_loss, variables), variables))
        return actor_loss, log_pi

    def _alpha_step(self, log_pi: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            alpha_loss = -tf.reduce_mean(
                self.log_alpha * tf.stop_gradient(log_pi + self.target_entropy)
            )
        gradient = tape.gradient(alpha_loss, [self.log_alpha])
        self.alpha_optimizer.apply_gradients(zip(gradient, [self.log_alpha]))
        return alpha_loss

    def diagnostics(self, experience):
        """-E[log pi(a|s)] and mean Q1(s, a ~ pi) on a batch (no augmentation)."""
        features = self.encoder(experience.time_step.observation)
        actions, log_pi = self._sample(features)
        return -tf.reduce_mean(log_pi), tf.reduce_mean(self.q_heads[0](features, actions))

    def acting_variables(self) -> List[tf.Variable]:
        """The NumPy policy's weights: the encoder's, then the actor MLP's and head's."""
        return self.encoder.acting_weights() + self.actor.head_variables


class PixelSacLearner(LearnerBase):
    """`PixelSacAgent`, its train_step, checkpoints and exports (see the module doc)."""

    def __init__(
        self,
        specs: EnvSpecs,
        hparams: Hyperparams,
        strategy: tf.distribute.Strategy,
        root_dir: str,
        seed: Optional[int] = None,
        max_checkpoints_to_keep: int = DEFAULT_CHECKPOINTS_TO_KEEP,
    ):
        self._specs = specs
        self.strategy = strategy
        if seed is not None:
            tf.keras.utils.set_random_seed(seed)
        with strategy.scope():
            self.train_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
            self.agent = PixelSacAgent(specs, hparams, self.train_step)
            self.policy = actor_policy.ActorPolicy(
                specs.time_step, specs.action, actor_network=self.agent.actor, training=False
            )
            savers = make_policy_savers(self.policy, self.train_step, specs.env_action)
        checkpoint = tf.train.Checkpoint(**{CHECKPOINT_KEY: self.agent}, train_step=self.train_step)
        self._checkpoints = LearnerCheckpoints(
            checkpoint, self.train_step, root_dir, max_checkpoints_to_keep
        )
        checks = (functools.partial(check_written_by, algorithm=hparams.algorithm),)
        self._checkpoints.restore(checks=checks)
        self._exporter = PolicyExporter(savers, self.train_step, root_dir)
        self._functions = TracedFunctions(
            {"train": (self._train_steps, True), "diagnostics": (self._diagnostics, False)}
        )

    @property
    def alpha(self) -> float:
        return float(tf.exp(self.agent.log_alpha))

    def step(self, iterator: Iterator, num_steps: int = 1) -> Losses:
        """`num_steps` pixel SAC updates on batches from `iterator`; the last losses."""
        outputs = call_update(self._functions["train"], iterator, num_steps, self._non_finite)
        return checked_losses(outputs, self._non_finite)

    def _train_steps(self, iterator, num_steps: tf.Tensor):
        def body(i, _losses):
            per_replica = self.strategy.run(self.agent.train, args=(next(iterator),))
            total = tf.distribute.ReduceOp.SUM
            return i + 1, tuple(self.strategy.reduce(total, x, axis=None) for x in per_replica)

        zero = tf.constant(0.0)
        start = (tf.constant(0, num_steps.dtype), (zero, zero, zero, zero))
        _, losses = tf.while_loop(lambda i, _: i < num_steps, body, start)
        return losses

    def diagnostics(self, iterator: Iterator) -> Diagnostics:
        entropy, q_value = (float(x) for x in self._functions["diagnostics"](iterator))
        return Diagnostics(entropy, q_value, self.alpha)

    def _diagnostics(self, iterator):
        entropy, q_value = self.strategy.run(self.agent.diagnostics, args=(next(iterator),))
        mean = tf.distribute.ReduceOp.MEAN
        return (
            self.strategy.reduce(mean, entropy, axis=None),
            self.strategy.reduce(mean, q_value, axis=None),
        )

    def policy_weights(self) -> List[np.ndarray]:
        return [v.numpy() for v in self.agent.acting_variables()]

    def observation_normalization(self) -> ObservationNormalization:
        """The identity: the encoder scales pixels to [0, 1] itself."""
        return ObservationNormalization.identity(self._specs.image.shape)
