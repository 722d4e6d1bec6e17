"""--critic_loss: squared (TF-Agents' and SB3's) or huber TD-error loss for the critics."""

import numpy as np
import pytest
import tensorflow as tf
from support.training import small_hparams
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts

from sac_distributed.algorithm import common as algorithm_common
from sac_distributed.algorithm.sac import update as sac_update
from sac_distributed.errors import ConfigError

REWARD = 1000.0  # far beyond any untrained Q: every row's TD error is about this


def _batch(env_specs, n=32, seed=0):
    """One-step transitions, all with reward REWARD and discount 1."""
    rng = np.random.default_rng(seed)
    obs_shape, act_shape = tuple(env_specs.observation.shape), tuple(env_specs.action.shape)
    obs = tf.constant(rng.uniform(-1, 1, (n,) + obs_shape).astype(np.float32))
    next_obs = tf.constant(rng.uniform(-1, 1, (n,) + obs_shape).astype(np.float32))
    action = tf.constant(rng.uniform(-1, 1, (n,) + act_shape).astype(np.float32))
    mid = tf.fill([n], ts.StepType.MID)
    first = ts.TimeStep(mid, tf.zeros([n]), tf.ones([n]), obs)
    second = ts.TimeStep(mid, tf.fill([n], REWARD), tf.ones([n]), next_obs)
    return trajectory.Transition(first, policy_step.PolicyStep(action, (), ()), second)


def _agent(env_specs, critic_loss):
    tf.keras.utils.set_random_seed(0)
    return sac_update.make_agent(env_specs, small_hparams(critic_loss=critic_loss))


def _sac_critic_loss(agent, experience) -> float:
    """SacAgent's own critic loss, its next actions drawn from a fixed seed."""
    tf.keras.utils.set_random_seed(1)
    loss = agent.critic_loss(
        experience.time_step,
        experience.action_step.action,
        experience.next_time_step,
        td_errors_loss_fn=agent._td_errors_loss_fn,  # noqa: SLF001
        gamma=agent._gamma,  # noqa: SLF001
    )
    return float(loss)


def test_squared_is_the_default_and_tf_agents_loss(env_specs):
    assert small_hparams().critic_loss == "squared"
    agent = sac_update.make_agent(env_specs, small_hparams())
    assert agent._td_errors_loss_fn is tf.math.squared_difference  # noqa: SLF001


def test_huber_grows_linearly_with_a_large_td_error_where_squared_grows_quadratically(
    env_specs,
):
    # Two critics, each off by about REWARD on every row (untrained Q values are
    # within a few units of 0): squared ~ 2 * REWARD**2, Huber ~ 2 * (REWARD - 0.5).
    experience = _batch(env_specs)
    squared = _sac_critic_loss(_agent(env_specs, "squared"), experience)
    huber = _sac_critic_loss(_agent(env_specs, "huber"), experience)
    assert 2 * (REWARD - 20) ** 2 < squared < 2 * (REWARD + 20) ** 2
    assert 2 * (REWARD - 20) < huber < 2 * (REWARD + 20)


def test_huber_is_quadratic_within_one_of_the_target():
    fn = algorithm_common.td_errors_loss_fn("huber")
    targets = tf.constant([0.0, 0.0, 0.0, 0.0])
    predictions = tf.constant([0.5, -0.9, 3.0, -10.0])
    expected = [0.5 * 0.25, 0.5 * 0.81, 3.0 - 0.5, 10.0 - 0.5]
    np.testing.assert_allclose(fn(targets, predictions).numpy(), expected, rtol=1e-6)


def test_prioritized_replay_update_uses_the_same_loss(env_specs):
    # The weighted update (prioritized replay) computes the critic loss itself; with
    # unit weights it must give SacAgent's own critic loss for either choice.
    experience = _batch(env_specs)
    for critic_loss in ("squared", "huber"):
        agent = _agent(env_specs, critic_loss)
        # SacAgent._train scales its critic loss by critic_loss_weight; so does this one.
        expected = agent._critic_loss_weight * _sac_critic_loss(agent, experience)  # noqa: SLF001
        tf.keras.utils.set_random_seed(1)  # the same next-action draw
        weights = tf.ones_like(experience.next_time_step.reward)
        weighted, _ = sac_update.critic_loss_and_td_errors(agent, experience, weights)
        np.testing.assert_allclose(float(weighted), expected, rtol=1e-5, err_msg=critic_loss)


def test_an_unknown_loss_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match="critic_loss must be one of squared, huber"):
        small_hparams(critic_loss="l1")
