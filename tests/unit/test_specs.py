"""Table signatures from env specs, and the actor -> Reverb -> learner data path."""

import numpy as np
import pytest
import tensorflow as tf
from support.training import small_hparams
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory

from sac_distributed import replay
from sac_distributed.envs import loader as env_loader
from sac_distributed.errors import SignatureMismatchError


def test_server_tables_have_the_signatures_built_from_env_specs(client, env_specs, hparams):
    infos = client.server_info()
    assert set(infos) == {replay.REPLAY_TABLE, replay.VARIABLE_TABLE, replay.MAX_PRIORITY_TABLE}

    transition = replay.transition_signature(env_specs)
    variables = replay.variable_signature(env_specs, hparams)
    assert replay.signatures_match(transition, infos[replay.REPLAY_TABLE].signature)
    assert replay.signatures_match(variables, infos[replay.VARIABLE_TABLE].signature)
    # The checks the actor, learner and evaluator run before using the tables.
    replay.check_table_signature(client, replay.REPLAY_TABLE, transition, "transition spec")
    replay.check_table_signature(client, replay.VARIABLE_TABLE, variables, "variable spec")

    # One column of K flat float32 rows (s[3], a[1], r, discount, s'[3]); K=1 here,
    # and the server's table has it while the K-agnostic signature leaves it open.
    assert list(transition) == [replay.TRANSITIONS]
    assert transition[replay.TRANSITIONS].shape.as_list() == [None, 3 + 1 + 2 + 3]
    assert transition[replay.TRANSITIONS].dtype == tf.float32
    table = infos[replay.REPLAY_TABLE].signature[replay.TRANSITIONS]
    assert table.shape.as_list() == [hparams.transitions_per_item, 9]
    assert replay.signatures_match(
        replay.transition_signature(env_specs, hparams.transitions_per_item),
        infos[replay.REPLAY_TABLE].signature,
    )
    # The variable signature is the actor network's: (kernel, bias) per layer, 16-16-(2*1).
    shapes = [tuple(s.shape) for s in variables[replay.POLICY_VARIABLES]]
    assert shapes == [(3, 16), (16,), (16, 16), (16,), (16, 2), (2,)]
    assert variables[replay.TRAIN_STEP].dtype == tf.int64
    assert variables[replay.LEARNER_DONE].dtype == tf.bool


def test_check_table_signature_names_a_missing_table(client, env_specs):
    with pytest.raises(SignatureMismatchError, match="no table 'replay'") as raised:
        replay.check_table_signature(
            client, "replay", replay.transition_signature(env_specs), "transition spec"
        )
    assert replay.REPLAY_TABLE in str(raised.value)


@pytest.mark.parametrize("k", [1, 4])
def test_actor_writes_are_read_back_by_the_learner_dataset(new_server, write_replay, env_specs, k):
    server = new_server(small_hparams(transitions_per_item=k))
    try:
        _check_round_trip(server, write_replay, env_specs, k)
    finally:
        server.stop()


def _check_round_trip(server, write_replay, env_specs, k):
    client = server.localhost_client()
    written = write_replay(client, 64)  # row i has reward i, so every sample names its source
    assert replay.table_info(client, replay.REPLAY_TABLE).current_size == 64 // k
    batch_size = 16
    dataset = replay.make_dataset(f"localhost:{server.port}", env_specs, batch_size)
    batches = list(dataset.take(3))
    assert len(batches) == 3

    obs_shape = (batch_size,) + tuple(env_specs.observation.shape)
    act_shape = (batch_size,) + tuple(env_specs.action.shape)
    for batch in batches:
        assert isinstance(batch, trajectory.Transition)
        time_step, action_step, next_time_step = batch
        assert time_step.observation.shape == next_time_step.observation.shape == obs_shape
        assert action_step.action.shape == act_shape
        assert next_time_step.reward.shape == next_time_step.discount.shape == (batch_size,)
        assert time_step.step_type.shape == next_time_step.step_type.shape == (batch_size,)
        for tensor in (time_step.observation, action_step.action, next_time_step.observation):
            assert tensor.dtype == tf.float32
        assert next_time_step.reward.dtype == next_time_step.discount.dtype == tf.float32
        assert time_step.step_type.dtype == tf.int32
        assert np.all(time_step.step_type.numpy() == ts.StepType.MID)
        assert np.all(next_time_step.step_type.numpy() == ts.StepType.MID)

        # Every field of a sampled row comes from the same written transition.
        rewards = next_time_step.reward.numpy()
        for row, reward in enumerate(rewards):
            source = written[int(reward)]
            assert reward == source[replay.REWARD]
            np.testing.assert_array_equal(
                time_step.observation[row].numpy(), source[replay.OBSERVATION]
            )
            np.testing.assert_array_equal(action_step.action[row].numpy(), source[replay.ACTION])
            np.testing.assert_array_equal(
                next_time_step.discount[row].numpy(), source[replay.DISCOUNT]
            )
            np.testing.assert_array_equal(
                next_time_step.observation[row].numpy(), source[replay.NEXT_OBSERVATION]
            )
        # An item is K consecutive written transitions, starting at a multiple of K.
        for item in rewards.reshape(-1, k).astype(int):
            assert item[0] % k == 0
            np.testing.assert_array_equal(item, np.arange(item[0], item[0] + k))


def test_signatures_match_compares_structure_shapes_and_dtypes(env_specs, hparams):
    transition = replay.transition_signature(env_specs, 8)
    assert replay.signatures_match(transition, replay.transition_signature(env_specs, 8))
    # The K-agnostic signature (jobs check with it) matches a table of any K, not vice versa.
    open_k = replay.transition_signature(env_specs)
    assert replay.signatures_match(open_k, transition)
    assert not replay.signatures_match(transition, open_k)
    assert not replay.signatures_match(transition, replay.transition_signature(env_specs, 4))

    # Names do not matter, only structure, shapes and dtypes.
    renamed = {k: tf.TensorSpec(s.shape, s.dtype, name=f"other_{k}") for k, s in transition.items()}
    assert replay.signatures_match(transition, renamed)

    column = replay.TRANSITIONS
    wider = {column: tf.TensorSpec((8, 10), tf.float32)}
    assert not replay.signatures_match(transition, wider)
    assert not replay.signatures_match(open_k, wider)
    as_float64 = {column: tf.TensorSpec((8, 9), tf.float64)}
    assert not replay.signatures_match(transition, as_float64)
    flat = {column: tf.TensorSpec((9,), tf.float32)}
    assert not replay.signatures_match(open_k, flat)
    assert not replay.signatures_match(transition, {})
    assert not replay.signatures_match({}, transition)

    # Different network sizes give different variable signatures.
    variables = replay.variable_signature(env_specs, hparams)
    assert replay.signatures_match(variables, replay.variable_signature(env_specs, hparams))
    for layers in [(32, 32), (16,), (16, 16, 16)]:
        other = replay.variable_signature(env_specs, small_hparams(actor_fc_layer_params=layers))
        assert not replay.signatures_match(variables, other), layers
    # The critic is not part of what actors need.
    critic = replay.variable_signature(env_specs, small_hparams(critic_joint_fc_layer_params=(64,)))
    assert replay.signatures_match(variables, critic)


def test_describe_signature_lists_every_field_with_dtype_and_shape(env_specs, hparams):
    text = replay.describe_signature(replay.transition_signature(env_specs, 8))
    assert text == (
        "{transitions: float32[8, 9] rows of (observation: float32[3], action: float32[1], "
        "reward: float32[], discount: float32[], next_observation: float32[3])}"
    ), text

    text = replay.describe_signature(replay.variable_signature(env_specs, hparams))
    assert "float32[3, 16]" in text and "float32[16, 2]" in text, text
    assert "train_step: int64[]" in text and "learner_done: bool[]" in text, text


def _run_episode(env, action_fn):
    env.reset()
    steps = 0
    while True:
        time_step = env.step(action_fn())
        steps += 1
        if time_step.is_last():
            return steps, float(time_step.discount)


def test_a_time_limit_ending_keeps_discount_one():
    env = env_loader.load_env("Pendulum-v1", seed=0)
    try:
        steps, discount = _run_episode(env, lambda: np.zeros(1, np.float32))
    finally:
        env.close()
    assert steps == 200  # gym's limit for Pendulum-v1
    assert discount == 1.0  # truncated, not terminal: critics bootstrap


def test_a_true_termination_keeps_discount_zero():
    env = env_loader.load_env("CartPole-v1", seed=0)
    try:
        steps, discount = _run_episode(env, lambda: np.int64(1))  # always push right: falls
    finally:
        env.close()
    assert steps < 500
    assert discount == 0.0


def _balance(observation) -> np.ndarray:
    """A PD controller that keeps pybullet's pole up for the whole episode."""
    x, vx, cos_theta, sin_theta, theta_dot = observation
    theta = np.arctan2(sin_theta, cos_theta)
    return np.clip([10 * theta + theta_dot + 0.1 * x + 0.3 * vx], -1, 1).astype(np.float32)


def test_pybullet_pole_endings_reach_the_critic_as_they_happened():
    """InvertedPendulumBullet: a balanced pole ends at the 1000-step limit with
    discount 1 (bootstrap), a fallen pole ends early with discount 0 (terminal)."""
    env = env_loader.load_env("InvertedPendulumBulletEnv-v0", seed=0)
    try:
        time_step, steps = env.reset(), 0
        while not time_step.is_last():
            time_step = env.step(_balance(time_step.observation))
            steps += 1
        assert (steps, float(time_step.discount)) == (1000, 1.0)
        env.reset()
        steps, discount = _run_episode(env, lambda: np.ones(1, np.float32))
        assert steps < 100 and discount == 0.0
    finally:
        env.close()


def test_a_pybullet_walker_steps_as_gym_makes_it():
    """specs.load_env (TF-Agents' suite, then the discount fix) changes nothing else:
    the observations, rewards and endings of gym.make's env, which SB3 trains on."""
    import gym

    name, seed = "Walker2DBulletEnv-v0", 3
    ours = env_loader.load_env(name, seed=seed)
    theirs = gym.make(name)
    theirs.seed(seed)
    rng = np.random.default_rng(0)
    endings = 0
    try:
        time_step = ours.reset()
        np.testing.assert_array_equal(time_step.observation, theirs.reset())
        for _ in range(400):
            action = rng.uniform(-1, 1, 6).astype(np.float32)
            time_step = ours.step(action)
            if time_step.is_first():  # the auto-reset after an ending; the action is unused
                np.testing.assert_array_equal(time_step.observation, theirs.reset())
                continue
            observation, reward, done, info = theirs.step(action)
            np.testing.assert_allclose(time_step.observation, observation, rtol=0, atol=1e-6)
            assert float(time_step.reward) == pytest.approx(reward, abs=1e-5)
            assert time_step.is_last() == done
            if done:
                endings += 1
                assert float(time_step.discount) == 0.0  # a fall: terminal for the critic
    finally:
        ours.close()
        theirs.close()
    assert endings >= 5  # random actions topple the walker within a few dozen steps
