"""CrossQ: SAC with batch-renormalized networks and no target critics.

Bhatt, Palenicek et al., "CrossQ: Batch Normalization in Deep Reinforcement
Learning for Greater Sample Efficiency and Simplicity" (ICLR 2024). Against
SAC it changes four things, all here:

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
"""

from __future__ import annotations

import dataclasses
from typing import List, NamedTuple, Sequence, Tuple

import numpy as np
import tensorflow as tf
from tf_agents.agents.sac import sac_agent
from tf_agents.networks import network
from tf_agents.networks import utils as network_utils
from tf_agents.utils import nest_utils

from sac_distributed.algorithm import squash
from sac_distributed.algorithm.agent import EnvSpecs, td_errors_loss_fn, torch_default_init
from sac_distributed.config import Hyperparams


@dataclasses.dataclass(frozen=True)
class CrossQSettings:
    """CrossQ's own constants, as its authors (and sbx) train it."""

    adam_beta1: float = 0.5  # Adam's first-moment decay for actor and critics
    policy_delay: int = 3  # critic steps per actor and temperature step
    renorm_momentum: float = 0.99  # running statistics: m = 0.99 m + 0.01 batch
    renorm_epsilon: float = 1e-3  # added to variances
    # Train-mode calls of a layer during which it is plain batch norm (r = 1,
    # d = 0): the running statistics must settle before they correct batches.
    renorm_warmup_steps: int = 100_000
    r_max: float = 3.0  # batch std / running std is clipped to [1/r_max, r_max]
    d_max: float = 5.0  # (batch mean - running mean) / running std to +-d_max


DEFAULT_SETTINGS = CrossQSettings()


class BatchRenorm(tf.keras.layers.Layer):
    """Batch renormalization (Ioffe 2017) over the batch axis of [B, features].

    Training mode normalizes with the batch's own mean and std, corrected
    towards the running statistics by r = std_B / std_run and d = (mean_B -
    mean_run) / std_run (both clipped and without gradient), after a warm-up
    of plain batch norm; then it moves the running statistics towards the
    batch's. Inference mode uses the running statistics alone: an affine map.
    """

    def __init__(self, settings: CrossQSettings = DEFAULT_SETTINGS, **kwargs):
        super().__init__(**kwargs)
        self._settings = settings

    def build(self, input_shape) -> None:
        dim = int(input_shape[-1])
        self.scale = self.add_weight("scale", [dim], initializer="ones")
        self.offset = self.add_weight("offset", [dim], initializer="zeros")
        self.moving_mean = self.add_weight(
            "moving_mean", [dim], initializer="zeros", trainable=False
        )
        self.moving_variance = self.add_weight(
            "moving_variance", [dim], initializer="ones", trainable=False
        )
        self.steps = self.add_weight("steps", [], tf.int64, initializer="zeros", trainable=False)
        super().build(input_shape)

    def inference_affine(self) -> Tuple[tf.Tensor, tf.Tensor]:
        """(a, b) with inference output x * a + b."""
        a = self.scale * tf.math.rsqrt(self.moving_variance + self._settings.renorm_epsilon)
        return a, self.offset - self.moving_mean * a

    def call(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        if not training:
            a, b = self.inference_affine()
            return x * a + b
        s = self._settings
        mean, variance = tf.nn.moments(x, axes=[0])
        std = tf.sqrt(variance + s.renorm_epsilon)
        moving_std = tf.sqrt(self.moving_variance + s.renorm_epsilon)
        warmed_up = tf.cast(self.steps >= s.renorm_warmup_steps, x.dtype)
        r = tf.stop_gradient(tf.clip_by_value(std / moving_std, 1.0 / s.r_max, s.r_max))
        d = tf.stop_gradient(
            tf.clip_by_value((mean - self.moving_mean) / moving_std, -s.d_max, s.d_max)
        )
        r = warmed_up * r + (1.0 - warmed_up)
        d = warmed_up * d
        # ((x - mean) / std * r + d) * scale + offset, as x * a + b: the per-feature
        # vectors carry the arithmetic, so the [B, features] tensor sees two ops
        # (on 2 cores elementwise passes over it cost more than a 256-wide matmul).
        a = self.scale * r / std
        b = self.offset + self.scale * (d - mean * r / std)
        # After r and d have read the old statistics (tf.function keeps program order).
        keep = s.renorm_momentum
        self.moving_mean.assign(keep * self.moving_mean + (1 - keep) * tf.stop_gradient(mean))
        self.moving_variance.assign(
            keep * self.moving_variance + (1 - keep) * tf.stop_gradient(variance)
        )
        self.steps.assign_add(1)
        return x * a + b


def _hidden_layers(sizes: Sequence[int], settings: CrossQSettings) -> List[tuple]:
    return [
        (
            tf.keras.layers.Dense(units, activation="relu", kernel_initializer="glorot_uniform"),
            BatchRenorm(settings),
        )
        for units in sizes
    ]


class BatchRenormActorNetwork(network.DistributionNetwork):
    """The policy: BatchRenorm on the observation, then (Dense, ReLU, BatchRenorm)
    per hidden layer, then TF-Agents' tanh-squashed Gaussian head."""

    def __init__(
        self,
        specs: EnvSpecs,
        fc_layer_params: Sequence[int],
        projection_ctor,
        settings: CrossQSettings = DEFAULT_SETTINGS,
        name: str = "ActorNetwork",
    ):
        projection = projection_ctor(specs.action)
        super().__init__(
            input_tensor_spec=specs.observation,
            state_spec=(),
            output_spec=projection.output_spec,
            name=name,
        )
        self._observation_size = int(specs.observation.shape.num_elements())
        self.input_norm = BatchRenorm(settings, name="input_norm")
        self.hidden = _hidden_layers(fc_layer_params, settings)
        self.projection = projection

    def call(self, observations, step_type=(), network_state=(), training=False, mask=None):
        outer_rank = nest_utils.get_outer_rank(observations, self.input_tensor_spec)
        batch_squash = network_utils.BatchSquash(outer_rank)
        x = tf.reshape(batch_squash.flatten(observations), [-1, self._observation_size])
        x = self.input_norm(tf.cast(x, tf.float32), training=training)
        for dense, norm in self.hidden:
            x = norm(dense(x), training=training)
        distribution, _ = self.projection(
            batch_squash.unflatten(x), outer_rank, training=training, mask=mask
        )
        return distribution, network_state

    def projection_dense(self) -> tf.keras.layers.Dense:
        """The head's one Dense layer (mean and pre-transform std of every action)."""
        return self.projection._projection_layer  # noqa: SLF001  (TF-Agents names it so)


class BatchRenormCriticNetwork(network.Network):
    """Q(s, a): BatchRenorm on the concatenated observation and action, then
    (Dense, ReLU, BatchRenorm) per hidden layer, then a linear output."""

    def __init__(
        self,
        specs: EnvSpecs,
        joint_fc_layer_params: Sequence[int],
        settings: CrossQSettings = DEFAULT_SETTINGS,
        name: str = "CriticNetwork",
    ):
        super().__init__(
            input_tensor_spec=(specs.observation, specs.action), state_spec=(), name=name
        )
        self._sizes = (
            int(specs.observation.shape.num_elements()),
            int(specs.action.shape.num_elements()),
        )
        self.input_norm = BatchRenorm(settings, name="input_norm")
        self.hidden = _hidden_layers(joint_fc_layer_params, settings)
        self.value = tf.keras.layers.Dense(1, kernel_initializer="glorot_uniform")

    def call(self, inputs, step_type=(), network_state=(), training=False):
        observations, actions = inputs
        joint = tf.concat(
            [
                tf.reshape(tf.cast(observations, tf.float32), [-1, self._sizes[0]]),
                tf.reshape(tf.cast(actions, tf.float32), [-1, self._sizes[1]]),
            ],
            axis=1,
        )
        joint = self.input_norm(joint, training=training)
        for dense, norm in self.hidden:
            joint = norm(dense(joint), training=training)
        return tf.reshape(self.value(joint), [-1]), network_state


def make_actor_network(
    specs: EnvSpecs, hparams: Hyperparams, settings: CrossQSettings = DEFAULT_SETTINGS
) -> BatchRenormActorNetwork:
    """CrossQ's actor with the same head (log-std clip, squash epsilon) as SAC's."""
    std_transform = sac_agent.std_clip_transform if hparams.clip_policy_log_std else tf.exp
    projection = squash.projection_network(hparams.squash_log_prob_epsilon, std_transform)
    return BatchRenormActorNetwork(specs, hparams.actor_fc_layer_params, projection, settings)


def fold_actor_weights(actor: BatchRenormActorNetwork) -> List[np.ndarray]:
    """The actor in inference mode as plain (kernel, bias) pairs, hidden layers first.

    Each BatchRenorm at inference is x * a + b; it sits right before a Dense
    layer (the input's before the first, each hidden one's before the next or
    the head), so W (x * a + b) + c = (a[:, None] * W) x + (b W + c). The pairs
    compute what the network computes with training=False, in the layout of
    SAC's actor (the NumPy policy's and the variable container's), in float64
    and then rounded to float32 once.
    """
    dense_layers = [dense for dense, _ in actor.hidden] + [actor.projection_dense()]
    norms = [actor.input_norm] + [norm for _, norm in actor.hidden]
    weights: List[np.ndarray] = []
    for norm, dense in zip(norms, dense_layers):
        a, b = (t.numpy().astype(np.float64) for t in norm.inference_affine())
        kernel = dense.kernel.numpy().astype(np.float64)
        bias = dense.bias.numpy().astype(np.float64)
        weights += [
            (a[:, None] * kernel).astype(np.float32),
            (b @ kernel + bias).astype(np.float32),
        ]
    return weights


class Losses(NamedTuple):
    total: tf.Tensor
    critic: tf.Tensor
    actor: tf.Tensor  # the last actor update's (every policy_delay steps)
    alpha: tf.Tensor


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
        settings: CrossQSettings = DEFAULT_SETTINGS,
    ):
        super().__init__(name="CrossQAgent")
        self.settings = settings
        self.train_step = train_step
        self.actor = make_actor_network(specs, hparams, settings)
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
        self.log_alpha = tf.Variable(0.0, name="log_alpha")  # alpha starts at 1, as SacAgent's
        action_dims = int(specs.action.shape.num_elements())
        # TF-Agents' default, -dim(A)/2, unless the hyperparameters name one (as SAC's).
        self.target_entropy = (
            -action_dims / 2.0 if hparams.target_entropy is None else float(hparams.target_entropy)
        )
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
        joint = (
            tf.concat([time_steps.observation, next_time_steps.observation], axis=0),
            tf.concat([tf.cast(policy_steps.action, tf.float32), next_actions], axis=0),
        )
        q1, next_q1 = tf.split(self.critic_1(joint, training=True)[0], 2)
        q2, next_q2 = tf.split(self.critic_2(joint, training=True)[0], 2)
        soft_value = tf.minimum(next_q1, next_q2) - tf.exp(self.log_alpha) * next_log_pi
        targets = tf.stop_gradient(
            self.reward_scale * next_time_steps.reward
            + self.gamma * next_time_steps.discount * soft_value
        )
        per_row = self._td_loss(targets, q1) + self._td_loss(targets, q2)
        return 0.5 * tf.reduce_mean(per_row)

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
