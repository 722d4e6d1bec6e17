"""SAC's networks: the policy MLP with its tanh-squashed Gaussian head, the critic
(TF-Agents' CriticNetwork, or one with layer normalization), the observation
normalizer's factory and the Polyak-averaged policy.

Nothing here knows about Reverb, processes or flags: the same factories serve
the learner binary, the in-process tests and the notebook.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf
from tf_agents.agents.ddpg import critic_network
from tf_agents.networks import actor_distribution_network, network
from tf_agents.policies import actor_policy
from tf_agents.utils import common

from sac_distributed.algorithm.common import actor_projection
from sac_distributed.algorithm.sac.normalization import ObservationNormalizer
from sac_distributed.config import Hyperparams
from sac_distributed.envs.specs import EnvSpecs


def make_actor_network(specs: EnvSpecs, hparams: Hyperparams) -> network.Network:
    """The policy MLP with a tanh-squashed Gaussian head (common.actor_projection),
    as in the tutorial."""
    return actor_distribution_network.ActorDistributionNetwork(
        specs.observation,
        specs.action,
        fc_layer_params=hparams.actor_fc_layer_params,
        continuous_projection_net=actor_projection(hparams),
    )


class LayerNormCriticNetwork(network.Network):
    """Q(s, a) on the concatenated observation and action, each hidden layer
    Dense, LayerNormalization, ReLU; a linear output. Otherwise as TF-Agents'
    CriticNetwork with joint layers only (Glorot-uniform kernels, zero biases)."""

    def __init__(self, input_tensor_spec, joint_fc_layer_params, name: str = "CriticNetwork"):
        super().__init__(input_tensor_spec=input_tensor_spec, state_spec=(), name=name)
        if not joint_fc_layer_params:
            raise ValueError("A layer-normalized critic needs at least one hidden layer.")
        self._hidden = [
            (
                tf.keras.layers.Dense(units, kernel_initializer="glorot_uniform"),
                tf.keras.layers.LayerNormalization(),
            )
            for units in joint_fc_layer_params
        ]
        self._value = tf.keras.layers.Dense(1, kernel_initializer="glorot_uniform")

    def call(self, inputs, step_type=(), network_state=(), training=False):
        observations, actions = inputs
        joint = tf.concat(
            [
                tf.cast(tf.nest.flatten(observations)[0], tf.float32),
                tf.cast(tf.nest.flatten(actions)[0], tf.float32),
            ],
            axis=1,
        )
        for dense, norm in self._hidden:
            joint = tf.nn.relu(norm(dense(joint), training=training))
        return tf.reshape(self._value(joint), [-1]), network_state


def make_critic_network(specs: EnvSpecs, hparams: Hyperparams) -> network.Network:
    """Q(s, a) on the concatenated observation and action, as in the tutorial
    (with critic_layer_norm: LayerNormCriticNetwork)."""
    if hparams.critic_layer_norm:
        return LayerNormCriticNetwork(
            (specs.observation, specs.action), hparams.critic_joint_fc_layer_params
        )
    return critic_network.CriticNetwork(
        (specs.observation, specs.action),
        observation_fc_layer_params=None,
        action_fc_layer_params=None,
        joint_fc_layer_params=hparams.critic_joint_fc_layer_params,
        kernel_initializer="glorot_uniform",
        last_kernel_initializer="glorot_uniform",
    )


def make_normalizer(specs: EnvSpecs, hparams: Hyperparams) -> Optional[ObservationNormalizer]:
    """The running observation statistics, or None without normalize_observations."""
    if not hparams.normalize_observations:
        return None
    return ObservationNormalizer(specs.observation)


class PolicyAverager:
    """A Polyak average of the actor's weights and the policy that acts with it.

    `network` is a copy of the actor network; `update()` moves it by `tau`
    towards the actor (call it once per train step, inside the train function;
    under a distribution strategy it updates in cross-replica context, as
    SacAgent's target update does). It starts equal to the actor.
    """

    def __init__(
        self,
        actor: network.Network,
        specs: EnvSpecs,
        tau: float,
        normalizer: Optional[ObservationNormalizer] = None,
    ):
        if not 0.0 < tau < 1.0:
            raise ValueError(f"tau must be in (0, 1), got {tau}.")
        self.network = actor.copy(name="AveragedActorNetwork")
        self.network.create_variables()
        source, target = actor.variables, self.network.variables
        if [v.shape for v in source] != [v.shape for v in target]:
            raise ValueError("The averaged actor's variables do not match the actor's.")
        common.soft_variables_update(source, target, tau=1.0)
        self._update = common.Periodically(
            lambda: common.soft_variables_update(source, target, tau=tau), 1, "average_policy"
        )
        self.policy = actor_policy.ActorPolicy(
            specs.time_step,
            specs.action,
            actor_network=self.network,
            training=False,
            observation_normalizer=normalizer,
        )

    def update(self):
        return self._update()
