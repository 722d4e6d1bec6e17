"""The variable container round trip and the NumPy actor policy that uses its weights."""

import numpy as np
import pytest
import reverb
from support.training import learner_config, random_observations
from tf_agents.policies import greedy_policy
from tf_agents.trajectories import time_step as ts

from sac_distributed import replay
from sac_distributed.algorithm.policy import NumpyActorPolicy, limit_blas_threads
from sac_distributed.algorithm.sac import learner as sac_learner
from sac_distributed.algorithm.sac import update as sac_update
from sac_distributed.replay import variables as variables_lib
from sac_distributed.replay.variables import VariableContainer


def _randomize(variables, scale, seed):
    """Trained-looking weights: far from the near-zero initial projection layer."""
    rng = np.random.default_rng(seed)
    for v in variables:
        v.assign(rng.normal(0.0, scale, v.shape).astype(v.dtype.as_numpy_dtype))


def _numpy_policy(env_specs, weights=None, seed=None):
    spec = env_specs.action
    return NumpyActorPolicy(spec.minimum, spec.maximum, spec.shape, weights=weights, seed=seed)


@pytest.fixture(scope="module")
def learner_on_server(new_server, new_learner, tmp_path_factory):
    """A LearnerLoop (not trained) on its own server, weights randomized."""
    server = new_server()
    config = learner_config(str(tmp_path_factory.mktemp("vars_root")), f"localhost:{server.port}")
    loop = new_learner(config, server)
    _randomize(sac_learner.policy_variables(loop.learner.agent), scale=0.5, seed=3)
    yield loop, server
    server.stop()


@pytest.fixture(scope="module")
def agent(env_specs, hparams):
    return sac_update.make_agent(env_specs, hparams)


def test_pull_returns_none_on_an_empty_table(client):
    assert replay.table_info(client, replay.VARIABLE_TABLE).current_size == 0
    assert VariableContainer(client).pull() is None


def test_learner_weights_round_trip_through_a_second_client(learner_on_server, env_specs, hparams):
    loop, server = learner_on_server
    sent = loop.publish()
    expected = loop.learner.policy_weights()
    assert sent == sum(w.nbytes for w in expected) > 0

    # Another client (as an actor would have) reads exactly what the learner holds.
    snapshot = VariableContainer(reverb.Client(f"localhost:{server.port}")).pull()
    assert snapshot is not None
    assert snapshot.train_step == loop.step == 0
    assert snapshot.learner_done is False
    signature = replay.variable_signature(env_specs, hparams)[replay.POLICY_VARIABLES]
    assert len(snapshot.policy_weights) == len(expected) == len(signature)
    for pulled, mine, spec in zip(snapshot.policy_weights, expected, signature):
        assert pulled.dtype == mine.dtype == spec.dtype.as_numpy_dtype
        assert pulled.shape == mine.shape == tuple(spec.shape)
        np.testing.assert_array_equal(pulled, mine)

    # The pulled weights drive the NumPy policy exactly like the learner's TF policy.
    policy = _numpy_policy(env_specs, snapshot.policy_weights)
    assert policy.has_weights
    obs = random_observations(env_specs, 32, scale=2.0, seed=4)
    tf_greedy = greedy_policy.GreedyPolicy(loop.learner.agent.policy)
    expected_actions = tf_greedy.action(ts.restart(obs, batch_size=len(obs))).action.numpy()
    np.testing.assert_allclose(policy.action(obs, greedy=True), expected_actions, atol=1e-5)


def test_push_replaces_the_single_item(client, env_specs, hparams):
    shapes = replay.variable_signature(env_specs, hparams)[replay.POLICY_VARIABLES]
    container = VariableContainer(client)
    try:
        for step in (5, 7):
            weights = [np.full(s.shape, step, np.float32) for s in shapes]
            container.push(weights, train_step=step, learner_done=step == 7)
    finally:
        container.close()
    assert replay.table_info(client, replay.VARIABLE_TABLE).current_size == 1
    snapshot = VariableContainer(client).pull()
    assert snapshot.train_step == 7
    assert snapshot.learner_done is True
    assert all(np.all(w == 7) for w in snapshot.policy_weights)


def _samples(client, table=replay.VARIABLE_TABLE) -> int:
    return replay.table_info(client, table).rate_limiter_info.sample_stats.completed


def test_weights_travel_only_after_a_push(client, env_specs, hparams):
    shapes = replay.variable_signature(env_specs, hparams)[replay.POLICY_VARIABLES]
    learner, actor = VariableContainer(client), VariableContainer(client)
    try:
        learner.push([np.full(s.shape, 1, np.float32) for s in shapes], train_step=1)
        first = actor.pull()
        sampled = _samples(client)
        again = actor.pull()  # nothing new: the same weights, no second sample
        assert _samples(client) == sampled
        assert again.train_step == first.train_step == 1
        assert all(np.all(w == 1) for w in again.policy_weights)

        learner.push([np.full(s.shape, 2, np.float32) for s in shapes], train_step=2)
        newer = actor.pull()
        assert _samples(client) == sampled + 1
        assert newer.train_step == 2 and all(np.all(w == 2) for w in newer.policy_weights)
        # Each pull hands out its own arrays: a caller changing them spoils no later pull.
        newer.policy_weights[0][...] = -1
        assert np.all(actor.pull().policy_weights[0] == 2)
    finally:
        learner.close()


def test_a_pull_after_an_error_samples_anew(client, env_specs, hparams, monkeypatch):
    """A failed pull forgets what it had: a restarted server counts its inserts anew."""
    shapes = replay.variable_signature(env_specs, hparams)[replay.POLICY_VARIABLES]
    learner, actor = VariableContainer(client), VariableContainer(client)
    try:
        learner.push([np.zeros(s.shape, np.float32) for s in shapes], train_step=3)
        actor.pull()
        real = variables_lib.table_counts

        def unreachable(*args, **kwargs):
            raise reverb.errors.DeadlineExceededError("the server is gone")

        monkeypatch.setattr(variables_lib, "table_counts", unreachable)
        with pytest.raises(reverb.errors.DeadlineExceededError):
            actor.pull()
        monkeypatch.setattr(variables_lib, "table_counts", real)
        sampled = _samples(client)
        assert actor.pull().train_step == 3
        assert _samples(client) == sampled + 1
    finally:
        learner.close()


def test_table_counts_without_a_server_is_a_deadline_error():
    import portpicker

    client = reverb.Client(f"localhost:{portpicker.pick_unused_port()}")
    with pytest.raises(reverb.errors.DeadlineExceededError):
        replay.table_counts(client, timeout_s=1)


@pytest.mark.parametrize("weight_scale", [0.1, 0.5, 3.0])
def test_numpy_greedy_actions_equal_tf_greedy_policy(agent, env_specs, weight_scale):
    variables = sac_learner.policy_variables(agent)
    _randomize(variables, scale=weight_scale, seed=11)
    obs = random_observations(env_specs, 64, scale=3.0, seed=12)
    time_step = ts.restart(obs, batch_size=len(obs))

    expected = greedy_policy.GreedyPolicy(agent.policy).action(time_step).action.numpy()
    policy = _numpy_policy(env_specs, [v.numpy() for v in variables])
    actual = policy.action(obs, greedy=True)

    assert actual.shape == expected.shape == (64,) + tuple(env_specs.action.shape)
    assert actual.dtype == np.float32
    np.testing.assert_allclose(actual, expected, atol=1e-5)
    # The comparison is not trivial: the actions differ between observations.
    assert np.ptp(expected) > 0.01 * float(env_specs.action.maximum - env_specs.action.minimum)


def test_numpy_distribution_equals_tf_collect_policy_distribution(agent, env_specs):
    variables = sac_learner.policy_variables(agent)
    _randomize(variables, scale=0.5, seed=21)
    obs = random_observations(env_specs, 16, scale=2.0, seed=22)
    time_step = ts.restart(obs, batch_size=len(obs))

    dist = agent.collect_policy.distribution(time_step).action.input_distribution
    mean, std = _numpy_policy(env_specs, [v.numpy() for v in variables]).distribution_params(obs)
    np.testing.assert_allclose(mean, dist.mean().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(std, dist.stddev().numpy(), rtol=1e-5, atol=1e-6)


# At weight scale 5 some log-stds overflow exp() to inf on purpose: tanh saturates,
# and the actions must still land inside the bounds.
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
@pytest.mark.parametrize("weight_scale", [0.5, 5.0])
def test_stochastic_actions_stay_within_the_action_bounds(agent, env_specs, weight_scale):
    variables = sac_learner.policy_variables(agent)
    _randomize(variables, scale=weight_scale, seed=31)
    weights = [v.numpy() for v in variables]
    obs = random_observations(env_specs, 500, scale=5.0, seed=32)
    spec = env_specs.action

    policy = _numpy_policy(env_specs, weights, seed=0)
    actions = policy.action(obs)
    assert actions.shape == (500,) + tuple(spec.shape) and actions.dtype == np.float32
    assert np.all(actions >= spec.minimum) and np.all(actions <= spec.maximum)
    # Sampling really is stochastic, and seeded.
    assert not np.array_equal(actions, policy.action(obs))
    np.testing.assert_array_equal(actions, _numpy_policy(env_specs, weights, seed=0).action(obs))

    random_actions = policy.random_action(500)
    assert np.all(random_actions >= spec.minimum) and np.all(random_actions <= spec.maximum)


def test_numpy_policy_rejects_weights_of_another_shape(env_specs):
    policy = _numpy_policy(env_specs)
    assert not policy.has_weights
    with pytest.raises(ValueError, match="pairs"):
        policy.set_weights([np.zeros((3, 16), np.float32)])
    two_dim_action = [np.zeros((3, 16), np.float32), np.zeros(16, np.float32)] * 1 + [
        np.zeros((16, 4), np.float32),
        np.zeros(4, np.float32),
    ]
    with pytest.raises(ValueError, match="action_dim"):
        policy.set_weights(two_dim_action)


def test_limit_blas_threads_makes_numpy_blas_single_threaded():
    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(limits=None):  # restores this process's pools afterwards
        assert limit_blas_threads(1) is True
        blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
        assert blas and all(pool["num_threads"] == 1 for pool in blas)
