"""SAC's update: TF-Agents' SacAgent with its optimizers, and the same update with
importance weights on the critic loss for prioritized replay.

`make_agent` builds the SacAgent whose `_train` the learner runs;
`weighted_sac_update` is that `_train` with per-row importance weights on the
critic loss, returning each row's |TD error| from the same forward pass
(priorities.py turns them into each item's priority). This module and
learner.py are the only ones that reach into SacAgent's private members, so a
faster SAC update replaces these alone. Nothing here knows of Reverb.
"""

from __future__ import annotations

import functools
from typing import Optional, Tuple

import tensorflow as tf
from tf_agents.agents.sac import sac_agent
from tf_agents.policies import actor_policy
from tf_agents.utils import common, object_identity

from sac_distributed.algorithm.common import td_errors_loss_fn, torch_default_init
from sac_distributed.algorithm.sac.networks import make_actor_network, make_critic_network
from sac_distributed.algorithm.sac.normalization import (
    NormalizedCriticNetwork,
    ObservationNormalizer,
)
from sac_distributed.config import Hyperparams
from sac_distributed.envs.specs import EnvSpecs


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
        target_entropy=hparams.target_entropy_for(int(specs.action.shape.num_elements())),
        initial_log_alpha=hparams.initial_log_alpha,
        train_step_counter=train_step,
    )
    if hparams.network_init == "torch":
        for net in (actor, critic, critic_2):  # SacAgent has created their variables
            torch_default_init(net)
    agent.initialize()  # copies the critics into their targets
    return agent


def critic_loss_and_td_errors(
    agent: sac_agent.SacAgent, experience, weights: Optional[tf.Tensor] = None
) -> Tuple[tf.Tensor, tf.Tensor]:
    """SacAgent's critic loss on a batch of Transitions, weighted per row, and each
    row's |TD error| (the mean over both critics).

    The same math as `SacAgent.critic_loss` (target = reward_scale * r + gamma *
    discount * (min of the target critics at a' ~ pi(s') - alpha log pi(a'|s')),
    the agent's td_errors_loss_fn per critic, summed, averaged over the global
    batch), but it also returns the TD errors from the same forward pass, for
    the priorities. The mean over both critics: each critic is trained on the
    item, so each one's error says how surprising it still is.
    """
    time_steps, policy_steps, next_time_steps = experience
    next_actions, next_log_pis = agent._actions_and_log_probs(next_time_steps, training=False)  # noqa: SLF001
    target_input = (next_time_steps.observation, next_actions)
    step_type = next_time_steps.step_type
    target_q1, _ = agent._target_critic_network_1(target_input, step_type, training=False)  # noqa: SLF001
    target_q2, _ = agent._target_critic_network_2(target_input, step_type, training=False)  # noqa: SLF001
    soft_value = tf.minimum(target_q1, target_q2) - tf.exp(agent._log_alpha) * next_log_pis  # noqa: SLF001
    targets = tf.stop_gradient(
        agent._reward_scale_factor * next_time_steps.reward  # noqa: SLF001
        + agent._gamma * next_time_steps.discount * soft_value  # noqa: SLF001
    )
    pred_input = (time_steps.observation, policy_steps.action)
    q1, _ = agent._critic_network_1(pred_input, time_steps.step_type, training=True)  # noqa: SLF001
    q2, _ = agent._critic_network_2(pred_input, time_steps.step_type, training=True)  # noqa: SLF001
    loss_fn = agent._td_errors_loss_fn  # noqa: SLF001
    per_row = loss_fn(targets, q1) + loss_fn(targets, q2)
    loss = common.aggregate_losses(
        per_example_loss=per_row,
        sample_weight=weights,
        regularization_loss=agent._critic_network_1.losses + agent._critic_network_2.losses,  # noqa: SLF001
    ).total_loss
    td_errors = 0.5 * (tf.abs(q1 - targets) + tf.abs(q2 - targets))
    return agent._critic_loss_weight * loss, tf.stop_gradient(td_errors)  # noqa: SLF001


def weighted_sac_update(
    agent: sac_agent.SacAgent, experience, weights: tf.Tensor
) -> Tuple[Tuple[tf.Tensor, ...], tf.Tensor]:
    """SacAgent's `_train` with importance `weights` on the critic loss alone.

    In SacAgent's order: critic, actor, temperature (each with its own tape,
    optimizer and the agent's gradient clipping), then train_step + 1 and the
    target update on its period. Returns ((total, critic, actor, alpha losses),
    per-row |TD error|).
    """
    critic_variables = list(
        object_identity.ObjectIdentitySet(
            agent._critic_network_1.trainable_variables  # noqa: SLF001
            + agent._critic_network_2.trainable_variables  # noqa: SLF001
        )
    )
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(critic_variables)
        critic_loss, td_errors = critic_loss_and_td_errors(agent, experience, weights)
    tf.debugging.check_numerics(critic_loss, "Critic loss is inf or nan.")
    _apply(agent, tape.gradient(critic_loss, critic_variables), critic_variables, "critic")
    time_steps = experience.time_step
    actor_variables = agent._actor_network.trainable_variables  # noqa: SLF001
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(actor_variables)
        actor_loss = agent._actor_loss_weight * agent.actor_loss(time_steps, training=True)  # noqa: SLF001
    tf.debugging.check_numerics(actor_loss, "Actor loss is inf or nan.")
    _apply(agent, tape.gradient(actor_loss, actor_variables), actor_variables, "actor")
    alpha_variables = [agent._log_alpha]  # noqa: SLF001
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(alpha_variables)
        alpha_loss = agent._alpha_loss_weight * agent.alpha_loss(time_steps, training=True)  # noqa: SLF001
    tf.debugging.check_numerics(alpha_loss, "Alpha loss is inf or nan.")
    _apply(agent, tape.gradient(alpha_loss, alpha_variables), alpha_variables, "alpha")
    agent.train_step_counter.assign_add(1)
    agent._update_target()  # noqa: SLF001
    total = critic_loss + actor_loss + alpha_loss
    return (total, critic_loss, actor_loss, alpha_loss), td_errors


def _apply(agent: sac_agent.SacAgent, gradients, variables, which: str) -> None:
    """SacAgent's own gradient step (clipping included) with its `which` optimizer."""
    optimizer = getattr(agent, f"_{which}_optimizer")
    agent._apply_gradients(gradients, variables, optimizer)  # noqa: SLF001
