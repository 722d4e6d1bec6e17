"""SAC networks, the TF-Agents SacAgent factory and distribution strategies.

Nothing here knows about Reverb, processes or flags: the same factories serve
the learner binary, the in-process tests and the notebook.
"""

from __future__ import annotations

import functools
import math
from typing import Dict, List, Optional, Tuple

import tensorflow as tf
from tf_agents.agents.ddpg import critic_network
from tf_agents.agents.sac import sac_agent
from tf_agents.networks import actor_distribution_network, network
from tf_agents.policies import actor_policy
from tf_agents.utils import common

from sac_distributed.algorithm import squash
from sac_distributed.algorithm.normalization import NormalizedCriticNetwork, ObservationNormalizer
from sac_distributed.config import Hyperparams
from sac_distributed.envs.specs import EnvSpecs


def make_actor_network(specs: EnvSpecs, hparams: Hyperparams) -> network.Network:
    """The policy MLP with a tanh-squashed Gaussian head, as in the tutorial.

    With clip_policy_log_std the head's log std goes through TF-Agents' own
    std_clip_transform (clip to [-20, 2], then exp) instead of a bare exp; with
    squash_log_prob_epsilon > 0 its log-probability caps the tanh term (squash.py).
    """
    std_transform = sac_agent.std_clip_transform if hparams.clip_policy_log_std else tf.exp
    return actor_distribution_network.ActorDistributionNetwork(
        specs.observation,
        specs.action,
        fc_layer_params=hparams.actor_fc_layer_params,
        continuous_projection_net=squash.projection_network(
            hparams.squash_log_prob_epsilon, std_transform
        ),
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


def make_optimizer(learning_rate: float, hparams: Hyperparams) -> tf.keras.optimizers.Optimizer:
    """Adam at `learning_rate`, decayed as hparams.learning_rate_schedule says.

    The schedule reads the optimizer's own step count, which advances once
    per train step and is saved and restored with the agent's checkpoint.
    """
    if hparams.learning_rate_schedule == "linear":
        learning_rate = tf.keras.optimizers.schedules.PolynomialDecay(
            learning_rate, decay_steps=hparams.num_iterations, end_learning_rate=0.0, power=1.0
        )
    return tf.keras.optimizers.Adam(learning_rate, epsilon=hparams.adam_epsilon)


def td_errors_loss_fn(critic_loss: str):
    """The per-row loss of a critic's prediction against its TD target, named by
    Hyperparams.critic_loss."""
    if critic_loss == "huber":
        return common.element_wise_huber_loss  # delta 1
    return tf.math.squared_difference


def make_agent(
    specs: EnvSpecs,
    hparams: Hyperparams,
    train_step: Optional[tf.Variable] = None,
    normalizer: Optional[ObservationNormalizer] = None,
) -> sac_agent.SacAgent:
    """A tf_agents SacAgent: twin critics, target networks, learned temperature.

    With a `normalizer`, the policies and all four critics see normalized
    observations; the caller updates its statistics (see normalization.py).
    Call inside `strategy.scope()` when training under a distribution strategy.
    """
    actor = make_actor_network(specs, hparams)
    critic = make_critic_network(specs, hparams)
    policy_ctor = actor_policy.ActorPolicy
    if normalizer is not None:
        critic = NormalizedCriticNetwork(critic, normalizer.normalize)
        policy_ctor = functools.partial(actor_policy.ActorPolicy, observation_normalizer=normalizer)
    critic_2 = critic.copy(name="CriticNetwork2")  # what SacAgent would make; kept to re-init
    agent = sac_agent.SacAgent(
        specs.time_step,
        specs.action,
        actor_network=actor,
        critic_network=critic,
        critic_network_2=critic_2,
        actor_optimizer=make_optimizer(hparams.actor_learning_rate, hparams),
        critic_optimizer=make_optimizer(hparams.critic_learning_rate, hparams),
        alpha_optimizer=make_optimizer(hparams.alpha_learning_rate, hparams),
        actor_policy_ctor=policy_ctor,
        target_update_tau=hparams.target_update_tau,
        target_update_period=hparams.target_update_period,
        td_errors_loss_fn=td_errors_loss_fn(hparams.critic_loss),
        gamma=hparams.gamma,
        reward_scale_factor=hparams.reward_scale_factor,
        target_entropy=hparams.target_entropy,
        train_step_counter=train_step,
    )
    if hparams.network_init == "torch":
        for net in (actor, critic, critic_2):  # SacAgent has created their variables
            torch_default_init(net)
    agent.initialize()  # copies the critics into their targets
    return agent


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


def torch_default_init(net: tf.Module) -> None:
    """Re-draws every Dense layer of `net` the way PyTorch's nn.Linear starts.

    Kernel and bias are uniform in +-1/sqrt(fan_in), where Keras' default is
    Glorot-uniform kernels (about 1.9x wider on a 400x300 layer, 2.4x on a
    300x1 critic output) and zero biases. Draws follow TensorFlow's global seed.
    """
    dense = [m for m in net.submodules if isinstance(m, tf.keras.layers.Dense)]
    if not dense:
        raise ValueError(f"{net.name} has no Dense layers to initialise.")
    for layer in dense:
        bound = 1.0 / math.sqrt(layer.kernel.shape[0])
        for var in (layer.kernel, layer.bias):
            var.assign(tf.random.uniform(var.shape, -bound, bound, dtype=var.dtype))


def policy_variable_specs(specs: EnvSpecs, hparams: Hyperparams) -> List[tf.TensorSpec]:
    """Shapes of the policy variables, without building a whole agent."""
    actor = make_actor_network(specs, hparams)
    actor.create_variables()
    return [tf.TensorSpec(v.shape, v.dtype) for v in actor.variables]


_STRATEGIES: Dict[Tuple[str, Optional[str]], tf.distribute.Strategy] = {}


def make_strategy(kind: str, tpu: Optional[str] = None) -> tf.distribute.Strategy:
    """default: one device; mirrored: all local GPUs or logical CPUs; tpu: a TPU.

    One strategy per kind and process: two MirroredStrategy objects number
    their collective ops alike, and the second one's all-reduces then clash
    with the shapes the first one's left behind (e.g. a second learner in a
    notebook). A TPU system is initialised only once as well.
    """
    key = (kind, tpu)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = _new_strategy(kind, tpu)
    return _STRATEGIES[key]


def _new_strategy(kind: str, tpu: Optional[str]) -> tf.distribute.Strategy:
    if kind == "default":
        return tf.distribute.get_strategy()
    if kind == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = gpus or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([d.name for d in devices])
    if kind == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"Unknown strategy {kind!r}; use default, mirrored or tpu.")


def use_logical_cpus(count: int) -> None:
    """Splits the CPU into `count` logical devices (before TensorFlow starts).

    MirroredStrategy then runs one replica per logical CPU, which is how the
    multi-device code path is exercised on a machine without accelerators.
    """
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
    )
