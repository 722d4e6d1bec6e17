"""CrossQ's networks: batch renormalization, the actor and critic built on it, and
the actor folded into plain (kernel, bias) pairs for acting.

Their constants are config.CrossQSettings; update.py holds the update that
trains these.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
import tensorflow as tf
from tf_agents.networks import network
from tf_agents.networks import utils as network_utils
from tf_agents.utils import nest_utils

from sac_distributed.algorithm.common import actor_projection
from sac_distributed.algorithm.crossq.config import DEFAULT_SETTINGS, CrossQSettings
from sac_distributed.config import Hyperparams
from sac_distributed.envs.specs import EnvSpecs


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
        self._dim = dim
        if not self._settings.batch_renorm:  # ablated: the identity, with no weights
            super().build(input_shape)
            return
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
        if not self._settings.batch_renorm:
            return tf.ones([self._dim]), tf.zeros([self._dim])
        a = self.scale * tf.math.rsqrt(self.moving_variance + self._settings.renorm_epsilon)
        return a, self.offset - self.moving_mean * a

    def call(
        self, x: tf.Tensor, training: bool = False, update_statistics: bool = True
    ) -> tf.Tensor:
        """`update_statistics=False`: a training-mode pass that leaves the running
        statistics and the warm-up count as they were (the second of two passes)."""
        if not self._settings.batch_renorm:
            return x
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
        if not update_statistics:
            return x * a + b
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

    def call(self, inputs, step_type=(), network_state=(), training=False, update_statistics=True):
        observations, actions = inputs
        joint = tf.concat(
            [
                tf.reshape(tf.cast(observations, tf.float32), [-1, self._sizes[0]]),
                tf.reshape(tf.cast(actions, tf.float32), [-1, self._sizes[1]]),
            ],
            axis=1,
        )
        joint = self.input_norm(joint, training=training, update_statistics=update_statistics)
        for dense, norm in self.hidden:
            joint = norm(dense(joint), training=training, update_statistics=update_statistics)
        return tf.reshape(self.value(joint), [-1]), network_state


def make_batch_renorm_actor_network(
    specs: EnvSpecs, hparams: Hyperparams, settings: CrossQSettings = DEFAULT_SETTINGS
) -> BatchRenormActorNetwork:
    """CrossQ's actor with the same head (log-std clip, squash epsilon) as SAC's."""
    projection = actor_projection(hparams)
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


def copy_of(
    critic: BatchRenormCriticNetwork,
    specs: EnvSpecs,
    hparams: Hyperparams,
    settings: CrossQSettings,
) -> BatchRenormCriticNetwork:
    """A critic of the same shape holding `critic`'s values (running statistics too)."""
    copy = BatchRenormCriticNetwork(
        specs, hparams.critic_joint_fc_layer_params, settings, name="Target" + critic.name
    )
    copy.create_variables()
    for target, source in zip(copy.variables, critic.variables):
        target.assign(source)
    return copy
