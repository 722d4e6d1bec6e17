"""CrossQ: SAC with batch-renormalized networks and no target critics.

Bhatt, Palenicek et al., "CrossQ: Batch Normalization in Deep Reinforcement
Learning for Greater Sample Efficiency and Simplicity" (ICLR 2024). Against
SAC it changes four things, here and in networks.py (the layers):

  * the actor and both critics batch-renormalize their input and every hidden
    layer (Dense, ReLU, BatchRenorm), which keeps Q's features on one scale;
  * there are no target critics: the bootstrap reads the critic being trained;
  * (s, a) and (s', a' ~ pi(s')) go through each critic in ONE forward pass,
    concatenated along the batch, so both halves are normalized with the same
    batch statistics (two passes would normalize the replay's actions and the
    policy's with different statistics, and the bootstrap would read features
    on another scale than the prediction: that is why `target_update_tau=1` on
    SAC is not CrossQ);
  * Adam with beta1 = 0.5, and the actor (and temperature) updated every third
    critic step.

At inference (the policies the actors, the evaluator and the SavedModels run)
every BatchRenorm layer uses its running statistics, which makes the actor a
plain MLP: `fold_actor_weights` writes it as the (kernel, bias) pairs the NumPy
policy and the variable container already take. Nothing here knows of Reverb.

For ablation studies `Hyperparams.crossq_ablations` turns pieces back to
SAC's one at a time (config.settings_for): two critic passes, target
critics, no batch renormalization, Adam's beta1 0.9, no policy delay.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import tensorflow as tf

from sac_distributed.algorithm.common import td_errors_loss_fn, torch_default_init
from sac_distributed.algorithm.crossq.config import CrossQSettings, settings_for
from sac_distributed.algorithm.crossq.networks import (
    BatchRenormCriticNetwork,
    copy_of,
    make_batch_renorm_actor_network,
)
from sac_distributed.algorithm.learner import Losses
from sac_distributed.config import Hyperparams
from sac_distributed.envs.specs import EnvSpecs


class CrossQAgent(tf.Module):
    """The actor, twin critics, temperature and optimizers, and one CrossQ update.

    A tf.Module, so one `tf.train.Checkpoint(agent=...)` holds every weight,
    running statistic, optimizer slot and the temperature. Build it inside
    `strategy.scope()`; `train(experience)` runs inside a tf.function.
    """

    def __init__(
        self,
        specs: EnvSpecs,
        hparams: Hyperparams,
        train_step: tf.Variable,
        settings: Optional[CrossQSettings] = None,
    ):
        super().__init__(name="CrossQAgent")
        settings = settings_for(hparams) if settings is None else settings
        self.settings = settings
        self.train_step = train_step
        self.actor = make_batch_renorm_actor_network(specs, hparams, settings)
        self.critic_1 = BatchRenormCriticNetwork(
            specs, hparams.critic_joint_fc_layer_params, settings
        )
        self.critic_2 = BatchRenormCriticNetwork(
            specs, hparams.critic_joint_fc_layer_params, settings, name="CriticNetwork2"
        )
        for net in (self.actor, self.critic_1, self.critic_2):
            net.create_variables()
        if hparams.network_init == "torch":
            for net in (self.actor, self.critic_1, self.critic_2):
                torch_default_init(net)
        if settings.target_critics:  # an ablation: SAC's target critics, CrossQ's networks
            self.target_critics = [
                copy_of(critic, specs, hparams, settings)
                for critic in (self.critic_1, self.critic_2)
            ]
        self._target_tau = hparams.target_update_tau
        self._target_period = hparams.target_update_period
        self.log_alpha = tf.Variable(hparams.initial_log_alpha, name="log_alpha")
        self.target_entropy = hparams.target_entropy_for(int(specs.action.shape.num_elements()))
        self.gamma = hparams.gamma
        self.reward_scale = hparams.reward_scale_factor
        self._td_loss = td_errors_loss_fn(hparams.critic_loss)  # per row, as SacAgent's
        beta1, eps = settings.adam_beta1, hparams.adam_epsilon
        adam = tf.keras.optimizers.Adam
        self.critic_optimizer = adam(hparams.critic_learning_rate, beta_1=beta1, epsilon=eps)
        self.actor_optimizer = adam(hparams.actor_learning_rate, beta_1=beta1, epsilon=eps)
        self.alpha_optimizer = adam(hparams.alpha_learning_rate, epsilon=eps)  # as sbx: 0.9
        # Slots now, not inside the traced tf.cond of the delayed actor update.
        self.critic_optimizer.build(self.critic_variables)
        self.actor_optimizer.build(self.actor.trainable_variables)
        self.alpha_optimizer.build([self.log_alpha])
        self._last_actor_loss = tf.Variable(0.0, trainable=False, name="last_actor_loss")
        self._last_alpha_loss = tf.Variable(0.0, trainable=False, name="last_alpha_loss")

    @property
    def critic_variables(self) -> List[tf.Variable]:
        return self.critic_1.trainable_variables + self.critic_2.trainable_variables

    def sample(self, observations, training: bool) -> Tuple[tf.Tensor, tf.Tensor]:
        """Actions a ~ pi(.|s) and their log-probabilities."""
        distribution, _ = self.actor(observations, training=training)
        actions = distribution.sample()
        return actions, distribution.log_prob(actions)

    def critic_loss(self, experience) -> tf.Tensor:
        """Both critics' TD loss, with (s, a) and (s', a') in one training-mode pass.

        0.5 * (mean loss of critic 1 + of critic 2), as SacAgent's; the target
        min(Q1, Q2)(s', a') - alpha log pi(a'|s') comes from the second half of
        the same pass, without gradient (the batch statistics still tie them).
        """
        time_steps, policy_steps, next_time_steps = experience
        next_actions, next_log_pi = self.sample(next_time_steps.observation, training=False)
        current = (time_steps.observation, tf.cast(policy_steps.action, tf.float32))
        (q1, q2), (next_q1, next_q2) = self._critic_values(
            current, (next_time_steps.observation, next_actions)
        )
        soft_value = tf.minimum(next_q1, next_q2) - tf.exp(self.log_alpha) * next_log_pi
        targets = tf.stop_gradient(
            self.reward_scale * next_time_steps.reward
            + self.gamma * next_time_steps.discount * soft_value
        )
        per_row = self._td_loss(targets, q1) + self._td_loss(targets, q2)
        return 0.5 * tf.reduce_mean(per_row)

    def _critic_values(self, current, following):
        """Both critics' Q on (s, a) in training mode, and the Q the bootstrap reads
        on (s', a'): from the same joint pass (CrossQ), from a second training-mode
        pass that leaves the running statistics alone (ablation separate_passes),
        or from the target critics in inference mode (ablation target_critics)."""
        critics = (self.critic_1, self.critic_2)
        if self.settings.target_critics:
            q = [critic(current, training=True)[0] for critic in critics]
            following_q = [target(following, training=False)[0] for target in self.target_critics]
            return q, following_q
        if not self.settings.joint_pass:
            q = [critic(current, training=True)[0] for critic in critics]
            following_q = [
                critic(following, training=True, update_statistics=False)[0] for critic in critics
            ]
            return q, following_q
        joint = tuple(tf.concat([x, y], axis=0) for x, y in zip(current, following))
        halves = [tf.split(critic(joint, training=True)[0], 2) for critic in critics]
        return [h[0] for h in halves], [h[1] for h in halves]

    def _update_target_critics(self) -> None:
        """target = (1 - tau) target + tau critic, every variable (running statistics
        too), on every target_update_period-th train step."""
        due = tf.cast(tf.equal(self.train_step % self._target_period, 0), tf.float32)
        tau = due * self._target_tau
        for target, critic in zip(self.target_critics, (self.critic_1, self.critic_2)):
            for t, c in zip(target.variables, critic.variables):
                if t.dtype.is_floating:
                    t.assign((1.0 - tau) * t + tau * c)
                else:
                    t.assign(c)

    def actor_loss(self, observations) -> Tuple[tf.Tensor, tf.Tensor]:
        """SAC's actor loss with the critics in inference mode; also log pi."""
        actions, log_pi = self.sample(observations, training=True)
        q1, _ = self.critic_1((observations, actions), training=False)
        q2, _ = self.critic_2((observations, actions), training=False)
        loss = tf.reduce_mean(tf.exp(self.log_alpha) * log_pi - tf.minimum(q1, q2))
        return loss, log_pi

    def train(self, experience) -> Losses:
        """One CrossQ update: the critics always, the actor and temperature on
        every policy_delay-th train step (counting from 0); train_step + 1."""
        variables = self.critic_variables
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(variables)
            critic_loss = self.critic_loss(experience)
        tf.debugging.check_numerics(critic_loss, "Critic loss is inf or nan.")
        self.critic_optimizer.apply_gradients(zip(tape.gradient(critic_loss, variables), variables))
        if self.settings.target_critics:
            self._update_target_critics()
        due = tf.equal(self.train_step % self.settings.policy_delay, 0)
        observations = experience.time_step.observation
        actor_loss, alpha_loss = tf.cond(
            due,
            lambda: self._update_actor_and_alpha(observations),
            lambda: (self._last_actor_loss.read_value(), self._last_alpha_loss.read_value()),
        )
        self.train_step.assign_add(1)
        return Losses(critic_loss + actor_loss + alpha_loss, critic_loss, actor_loss, alpha_loss)

    def _update_actor_and_alpha(self, observations) -> Tuple[tf.Tensor, tf.Tensor]:
        variables = self.actor.trainable_variables
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(variables)
            actor_loss, log_pi = self.actor_loss(observations)
        tf.debugging.check_numerics(actor_loss, "Actor loss is inf or nan.")
        self.actor_optimizer.apply_gradients(zip(tape.gradient(actor_loss, variables), variables))
        # TF-Agents' temperature loss, on the log pi the actor step just sampled.
        entropy_gap = tf.stop_gradient(log_pi + self.target_entropy)
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(self.log_alpha)
            alpha_loss = -tf.reduce_mean(self.log_alpha * entropy_gap)
        tf.debugging.check_numerics(alpha_loss, "Alpha loss is inf or nan.")
        gradient = tape.gradient(alpha_loss, self.log_alpha)
        self.alpha_optimizer.apply_gradients([(gradient, self.log_alpha)])
        self._last_actor_loss.assign(actor_loss)
        self._last_alpha_loss.assign(alpha_loss)
        return actor_loss, alpha_loss
