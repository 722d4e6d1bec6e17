"""--clip_policy_log_std and --adam_epsilon: the two SB3 agent details left to try."""

import numpy as np
import pytest
import tensorflow as tf
from support.training import small_hparams
from tf_agents.agents.sac import sac_agent, tanh_normal_projection_network
from tf_agents.trajectories import time_step as ts

from sac_distributed.algorithm.policy import NumpyActorPolicy
from sac_distributed.algorithm.sac import learner as sac_learner
from sac_distributed.algorithm.sac import networks as sac_networks
from sac_distributed.algorithm.sac import update as sac_update
from sac_distributed.config import POLICY_LOG_STD_RANGE
from sac_distributed.errors import ConfigError

# Projection biases that put the log std of every action dimension at these values.
LOG_STDS = (-30.0, 0.5, 5.0)


def _set_head(variables, env_specs, mean, log_std):
    """Actor weights whose output is (mean, log std) in every action dimension:
    every weight 0, the projection layer's bias set."""
    for v in variables:
        v.assign(tf.zeros_like(v))
    action_dim = int(np.prod(env_specs.action.shape))
    bias = np.concatenate([np.full(action_dim, mean), np.full(action_dim, log_std)])
    variables[-1].assign(bias.astype(np.float32))


def _agent_with_log_std(env_specs, log_std, **overrides):
    """An agent whose actor outputs mean 0 and the given log std everywhere."""
    agent = sac_update.make_agent(env_specs, small_hparams(**overrides))
    variables = sac_learner.policy_variables(agent)
    _set_head(variables, env_specs, 0.0, log_std)
    return agent, [v.numpy() for v in variables]


def _tf_stddev(agent, env_specs):
    obs = np.ones((4,) + tuple(env_specs.observation.shape), np.float32)
    time_step = ts.restart(obs, batch_size=len(obs))
    dist = agent.collect_policy.distribution(time_step).action.input_distribution
    return dist.stddev().numpy()


def _numpy_stddev(weights, env_specs, log_std_range):
    spec = env_specs.action
    policy = NumpyActorPolicy(
        spec.minimum, spec.maximum, spec.shape, weights=weights, log_std_range=log_std_range
    )
    obs = np.ones((4,) + tuple(env_specs.observation.shape), np.float32)
    return policy.distribution_params(obs)[1]


def test_the_range_is_tf_agents_std_clip_transform():
    x = tf.constant([-30.0, -20.0, 0.0, 2.0, 5.0])
    expected = np.exp(np.clip(x.numpy(), *POLICY_LOG_STD_RANGE))
    np.testing.assert_allclose(sac_agent.std_clip_transform(x).numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("log_std", LOG_STDS)
def test_clipped_actor_and_numpy_policy_agree(env_specs, log_std):
    hp = small_hparams(clip_policy_log_std=True)
    agent, weights = _agent_with_log_std(env_specs, log_std, clip_policy_log_std=True)
    expected = np.exp(np.clip(log_std, *POLICY_LOG_STD_RANGE))
    tf_std = _tf_stddev(agent, env_specs)
    np.testing.assert_allclose(tf_std, expected, rtol=1e-5)
    np.testing.assert_allclose(
        _numpy_stddev(weights, env_specs, hp.policy_log_std_range), expected, rtol=1e-5
    )


def test_unclipped_is_the_default_and_leaves_a_large_log_std_alone(env_specs):
    hp = small_hparams()
    assert hp.clip_policy_log_std is False and hp.policy_log_std_range is None
    agent, weights = _agent_with_log_std(env_specs, 5.0)
    np.testing.assert_allclose(_tf_stddev(agent, env_specs), np.exp(5.0), rtol=1e-5)
    np.testing.assert_allclose(_numpy_stddev(weights, env_specs, None), np.exp(5.0), rtol=1e-5)


def test_a_log_std_past_float32s_range_overflows_unclipped_and_not_clipped(env_specs):
    # What large observations do to an untrained actor (Humanoid-v5's first update).
    agent, _ = _agent_with_log_std(env_specs, 100.0)
    assert np.isinf(_tf_stddev(agent, env_specs)).all()
    agent, _ = _agent_with_log_std(env_specs, 100.0, clip_policy_log_std=True)
    np.testing.assert_allclose(_tf_stddev(agent, env_specs), np.exp(2.0), rtol=1e-5)


def test_clipped_samples_stay_near_the_mean(env_specs):
    """Sampling (the actors' path) uses the clipped std: with log std 5 unclipped
    nearly every action saturates at a bound, clipped to std e^2 far fewer do."""
    hp = small_hparams(clip_policy_log_std=True)
    _, weights = _agent_with_log_std(env_specs, 5.0, clip_policy_log_std=True)
    spec = env_specs.action
    obs = np.ones((4000,) + tuple(env_specs.observation.shape), np.float32)
    saturated = {}
    for name, log_std_range in (("clipped", hp.policy_log_std_range), ("raw", None)):
        policy = NumpyActorPolicy(
            spec.minimum, spec.maximum, spec.shape, weights, seed=0, log_std_range=log_std_range
        )
        actions = policy.action(obs)
        saturated[name] = np.mean(np.abs(actions) > 0.99 * float(spec.maximum))
    assert saturated["raw"] > 0.95
    assert saturated["clipped"] < 0.8


def test_the_averaged_policy_keeps_the_clip(env_specs):
    hp = small_hparams(clip_policy_log_std=True, policy_averaging_tau=0.01)
    agent, _ = _agent_with_log_std(env_specs, 5.0, clip_policy_log_std=True)
    averager = sac_networks.PolicyAverager(agent._actor_network, env_specs, 0.01, None)  # noqa: SLF001
    _set_head(averager.network.variables, env_specs, 5.0, 5.0)
    obs = np.ones((4,) + tuple(env_specs.observation.shape), np.float32)
    dist = averager.policy.distribution(ts.restart(obs, batch_size=4)).action
    assert hp.policy_averaging_tau == 0.01
    np.testing.assert_allclose(dist.input_distribution.stddev().numpy(), np.exp(2.0), rtol=1e-5)


@pytest.mark.parametrize("epsilon", [1e-7, 1e-8])
def test_every_optimizer_uses_adam_epsilon(env_specs, epsilon):
    agent = sac_update.make_agent(env_specs, small_hparams(adam_epsilon=epsilon))
    optimizers = [
        agent._actor_optimizer,  # noqa: SLF001
        agent._critic_optimizer,  # noqa: SLF001
        agent._alpha_optimizer,  # noqa: SLF001
    ]
    for optimizer in optimizers:
        assert optimizer.epsilon == pytest.approx(epsilon)


@pytest.mark.parametrize("bad", [0, -1e-8, "1e-8"])
def test_a_bad_adam_epsilon_is_refused(bad):
    with pytest.raises(ConfigError, match=r"adam_epsilon must be a number > 0 .*got"):
        small_hparams(adam_epsilon=bad)


def test_a_non_bool_clip_is_refused():
    with pytest.raises(ConfigError, match="clip_policy_log_std must be true or false, got 'yes'"):
        small_hparams(clip_policy_log_std="yes")


# --squash_log_prob_epsilon: SB3's log(1 - tanh(u)^2 + 1e-6) in the policy's log-probability.


def _log_pi_at(env_specs, mean, epsilon):
    """SacAgent's own (action, log pi) for a policy at pre-tanh mean `mean`, std 1e-3."""
    agent = sac_update.make_agent(env_specs, small_hparams(squash_log_prob_epsilon=epsilon))
    _set_head(sac_learner.policy_variables(agent), env_specs, mean, np.log(1e-3))
    obs = np.ones((8,) + tuple(env_specs.observation.shape), np.float32)
    tf.random.set_seed(7)
    actions, log_pi = agent._actions_and_log_probs(ts.restart(tf.constant(obs), batch_size=8))  # noqa: SLF001
    return agent, actions.numpy(), log_pi.numpy()


def test_zero_keeps_tf_agents_own_head(env_specs):
    agent = sac_update.make_agent(env_specs, small_hparams())
    assert small_hparams().squash_log_prob_epsilon == 0.0
    projection = agent._actor_network._projection_networks  # noqa: SLF001
    assert type(projection) is tanh_normal_projection_network.TanhNormalProjectionNetwork


@pytest.mark.parametrize("mean", [0.5, 8.0])
def test_the_capped_log_prob_is_sb3s(env_specs, mean):
    """Same draws, same actions; log pi differs by exactly the capped tanh term."""
    _, exact_actions, exact = _log_pi_at(env_specs, mean, 0.0)
    _, capped_actions, capped = _log_pi_at(env_specs, mean, 1e-6)
    np.testing.assert_array_equal(capped_actions, exact_actions)
    u = np.float64(mean)  # the draws sit within a few 1e-3 of the mean
    exact_log_det = 2.0 * (np.log(2.0) - u - np.logaddexp(0.0, -2.0 * u))
    # The capped term is computed from tanh in float32, as SB3's is; at u = 8
    # float32 tanh is already 1, so the term is log(1e-6) itself.
    tanh32 = np.float64(tf.tanh(tf.constant(mean, tf.float32)).numpy())
    capped_log_det = np.log(1.0 - tanh32**2 + 1e-6)
    action_dim = int(np.prod(env_specs.action.shape))
    expected = -(capped_log_det - exact_log_det) * action_dim
    np.testing.assert_allclose(capped - exact, expected, atol=0.02)
    if mean > 5:  # saturated: the cap makes log pi smaller (0.8 nats at u = 8)
        assert np.all(capped - exact < -0.5)


def test_the_capped_head_is_copied_and_exported(env_specs, tmp_path):
    from tf_agents.policies import policy_saver

    agent, _, _ = _log_pi_at(env_specs, 8.0, 1e-6)
    averager = sac_networks.PolicyAverager(agent._actor_network, env_specs, 0.01)  # noqa: SLF001
    assert type(averager.network._projection_networks) is type(  # noqa: SLF001
        agent._actor_network._projection_networks  # noqa: SLF001
    )
    obs = np.ones((4,) + tuple(env_specs.observation.shape), np.float32)
    saver = policy_saver.PolicySaver(agent.collect_policy, batch_size=None)
    saver.save(str(tmp_path / "collect"))
    loaded = tf.saved_model.load(str(tmp_path / "collect"))
    action = loaded.action(ts.restart(tf.constant(obs), batch_size=4)).action.numpy()
    assert action.shape == (4,) + tuple(env_specs.action.shape)
    assert np.all(np.abs(action) <= float(env_specs.action.maximum))


@pytest.mark.parametrize("bad", [-1e-6, 1.0, "1e-6"])
def test_a_bad_squash_epsilon_is_refused(bad):
    with pytest.raises(ConfigError, match=r"squash_log_prob_epsilon must be a number in \[0, 1\)"):
        small_hparams(squash_log_prob_epsilon=bad)
