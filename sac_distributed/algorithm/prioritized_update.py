"""Prioritized replay's side of the SAC update: importance weights, TD errors, priorities.

`weighted_sac_update` is SacAgent's `_train` with per-row importance weights on
the critic loss, returning each row's |TD error| from the same forward pass;
`item_priorities` turns those into each replay item's new priority. The
SacLearner's `step_prioritized` runs it; replay/priorities.py sends the
priorities to the servers. Like SacLearner, it reaches into SacAgent's private
members, and knows nothing of Reverb.
"""

from __future__ import annotations

from typing import Optional, Tuple

import tensorflow as tf
from tf_agents.agents.sac import sac_agent
from tf_agents.utils import common, object_identity

# Added to every new priority: an item at priority 0 would never be sampled
# again, although its TD error changes as the critics learn.
PRIORITY_EPSILON = 1e-6


def importance_weights(
    probability: tf.Tensor, replay_size: tf.Tensor, beta: float, rows_per_item: int
) -> tf.Tensor:
    """Per-row importance weights (N * P(i)) ** -beta / their batch maximum, float32.

    `probability` is each item's sampling probability P(i) within the whole
    replay and `replay_size` N its size in items, so the weights undo the
    bias of prioritized sampling by a fraction beta (Schaul et al. 2016);
    dividing by the batch's largest weight keeps them in (0, 1], so they only
    ever scale updates down (under a multi-replica strategy, each replica's
    batch is normalized on its own). Each of an item's K = `rows_per_item` rows gets
    the item's weight (rows are item-major). float64 inside: N * P(i) of a
    rarely drawn item is tiny. Uniform sampling (P = 1/N) gives weights of 1.
    """
    size = tf.cast(replay_size, tf.float64)
    weights = tf.pow(size * tf.cast(probability, tf.float64), -float(beta))
    weights /= tf.reduce_max(weights)
    return tf.cast(tf.repeat(weights, rows_per_item), tf.float32)


def item_priorities(td_errors: tf.Tensor, rows_per_item: int) -> tf.Tensor:
    """Each item's new priority: the mean |TD error| of its K rows, + epsilon (float64).

    The mean, not the max: an item's K rows are consecutive steps of one
    episode, sampled together, and the mean says how much the item as a whole
    has left to teach without one outlier step deciding it.
    """
    per_item = tf.reduce_mean(tf.reshape(td_errors, [-1, rows_per_item]), axis=1)
    return tf.cast(per_item, tf.float64) + PRIORITY_EPSILON


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
