"""Our replay rows give the same SAC losses as stock 2-step trajectories.

The stock TF-Agents SAC pipeline samples 2-step `Trajectory`s and converts them
with `trajectory.to_transition` (SacAgent squeezes the time dimension). Ours
packs each transition into one flat float32 row and K rows into one replay
item; the learner turns a batch of items [N, K, width] into N * K transitions.
Here the same numbers go through both conversions and the agent's critic,
actor and alpha losses must agree; their sampling is made identical with fixed
seeds.
"""

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.agents import data_converter
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory

from sac_distributed import replay
from sac_distributed.algorithm.sac import update as sac_update

BATCH = 32
SEED = 1234


@pytest.fixture(scope="module")
def seeded_agent(env_specs, hparams):
    tf.random.set_seed(7)
    return sac_update.make_agent(env_specs, hparams)


@pytest.fixture(scope="module")
def experience(env_specs):
    """A batch of 2-step trajectories and the replay items built from the same numbers."""
    rng = np.random.default_rng(5)
    obs_dim = env_specs.observation.shape[0]
    observation = rng.uniform(-1, 1, (BATCH, 2, obs_dim)).astype(np.float32)
    action = rng.uniform(-2, 2, (BATCH, 2, 1)).astype(np.float32)
    reward = rng.normal(0, 3, (BATCH, 2)).astype(np.float32)
    terminal = rng.random(BATCH) < 0.25  # episode ends after the first step
    discount = np.stack([np.where(terminal, 0.0, 1.0), np.ones(BATCH)], 1).astype(np.float32)
    first = rng.random(BATCH) < 0.25
    step_type = np.stack(
        [np.where(first, ts.StepType.FIRST, ts.StepType.MID), np.where(terminal, 2, 1)], 1
    ).astype(np.int32)
    next_step_type = np.stack(
        [np.where(terminal, ts.StepType.LAST, ts.StepType.MID), np.full(BATCH, 1)], 1
    ).astype(np.int32)
    stock = trajectory.Trajectory(
        step_type=tf.constant(step_type),
        observation=tf.constant(observation),
        action=tf.constant(action),
        policy_info=(),
        next_step_type=tf.constant(next_step_type),
        reward=tf.constant(reward),
        discount=tf.constant(discount),
    )
    # What an actor writes for step 0 -> 1 of each trajectory: one row each.
    rows = replay.row_layout(env_specs).pack(
        observation[:, 0], action[:, 0], reward[:, 0], discount[:, 0], observation[:, 1]
    )
    return stock, rows


def _ours(env_specs, rows, k):
    """What the learner gets from the table: batches of items of K rows, as Transitions."""
    items = tf.constant(rows.reshape(BATCH // k, k, -1))
    return replay.items_to_transition(items, replay.row_layout(env_specs))


def _stock_transition(stock):
    """What SacAgent does with a 2-step trajectory: to_transition, then drop the time dim."""
    transition = trajectory.to_transition(stock)
    assert transition.time_step.observation.shape[:2] == (BATCH, 1)
    return tf.nest.map_structure(lambda t: tf.squeeze(t, axis=1), transition)


def _losses(agent, transition):
    time_step, action_step, next_time_step = transition
    out = {}
    tf.random.set_seed(SEED)
    out["critic"] = agent.critic_loss(
        time_step,
        action_step.action,
        next_time_step,
        td_errors_loss_fn=tf.math.squared_difference,
        gamma=0.99,
        reward_scale_factor=1.0,
        training=False,
    ).numpy()
    tf.random.set_seed(SEED)
    out["actor"] = agent.actor_loss(time_step, training=False).numpy()
    tf.random.set_seed(SEED)
    out["alpha"] = agent.alpha_loss(time_step, training=False).numpy()
    return out


def test_stock_conversion_is_what_sac_agent_does(seeded_agent, experience):
    stock, _ = experience
    ours = _stock_transition(stock)
    theirs = data_converter.AsTransition(seeded_agent.data_context, squeeze_time_dim=True)(stock)
    tf.nest.map_structure(np.testing.assert_array_equal, ours, theirs)


@pytest.mark.parametrize("k", [1, 4, 8])
def test_replay_items_give_the_same_sac_losses_as_2_step_trajectories(
    seeded_agent, experience, env_specs, k
):
    stock, rows = experience
    expected = _losses(seeded_agent, _stock_transition(stock))
    assert all(np.isfinite(v) for v in expected.values())
    # Seeding makes the sampled actions, hence the losses, repeatable.
    assert _losses(seeded_agent, _stock_transition(stock)) == expected

    ours = _ours(env_specs, rows, k)
    assert ours.time_step.observation.shape == (BATCH,) + tuple(env_specs.observation.shape)
    actual = _losses(seeded_agent, ours)
    for name in ("critic", "actor", "alpha"):
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-6, err_msg=name)

    # The fields SAC reads are the same tensors.
    stock_t = _stock_transition(stock)
    for a, b in [
        (ours.time_step.observation, stock_t.time_step.observation),
        (ours.action_step.action, stock_t.action_step.action),
        (ours.next_time_step.reward, stock_t.next_time_step.reward),
        (ours.next_time_step.discount, stock_t.next_time_step.discount),
        (ours.next_time_step.observation, stock_t.next_time_step.observation),
    ]:
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_critic_loss_sees_a_misaligned_reward(seeded_agent, experience, env_specs):
    """Control: the comparison above is sensitive to the reward the row carries."""
    stock, rows = experience
    expected = _losses(seeded_agent, _stock_transition(stock))
    layout = replay.row_layout(env_specs)
    fields = layout.unpack(rows)
    fields[replay.REWARD] = np.roll(fields[replay.REWARD], 1)
    shifted = layout.pack(*(fields[name] for name in replay.TRANSITION_FIELDS))
    wrong = _losses(seeded_agent, _ours(env_specs, shifted, 4))
    assert not np.isclose(wrong["critic"], expected["critic"], rtol=1e-4)
    # The actor and alpha losses do not read rewards.
    np.testing.assert_allclose(wrong["actor"], expected["actor"], rtol=1e-6)
