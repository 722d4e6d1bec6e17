"""The pixel learner in one process: DrQ's update trains the shared encoder through
the critic loss alone, the NumPy actor acts as the exported TF policy does, the
variable container's shapes are the learner's, and a checkpoint resumes."""

import os

import numpy as np
import pytest
import tensorflow as tf
from support.camera import random_pixel_batches
from tf_agents.policies import greedy_policy
from tf_agents.trajectories import time_step as ts

from sac_distributed import config as config_lib
from sac_distributed.algorithm.pixel_policy import acting_weight_shapes_for, make_acting_policy
from sac_distributed.algorithm.sac.learner import make_learner
from sac_distributed.algorithm.sac.pixel_learner import PixelSacLearner
from sac_distributed.algorithm.sac.pixel_networks import random_shift
from sac_distributed.envs import loader

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
BATCH = 8


@pytest.fixture(scope="module")
def camera():
    env = loader.load_env(
        "pointmass:make_env",
        seed=0,
        env_kwargs={"pixels": True, "image_size": 16},
        module_dirs=(EXAMPLES,),
        frame_stack=3,
    )
    yield env, loader.env_specs(env)
    env.close()


def hparams(**changes):
    return config_lib.Hyperparams(
        batch_size=BATCH,
        initial_collect_steps=BATCH,
        actor_fc_layer_params=(16, 16),
        critic_joint_fc_layer_params=(16, 16),
        **changes,
    )


def test_the_critic_loss_trains_the_encoder_and_the_actor_loss_does_not(camera, tmp_path):
    env, specs = camera
    learner = make_learner(specs, hparams(), tf.distribute.get_strategy(), str(tmp_path), seed=0)
    assert isinstance(learner, PixelSacLearner)
    agent = learner.agent
    encoder = {id(v) for v in agent.encoder.trainable_variables}
    assert encoder <= {id(v) for v in agent.critic_variables}
    assert not encoder & {id(v) for v in agent.actor.head_variables}
    before = [v.numpy().copy() for v in agent.encoder.trainable_variables]
    losses = learner.step(random_pixel_batches(specs, BATCH), 3)
    assert np.all(np.isfinite(losses)) and learner.train_step_numpy == 3
    moved = [np.abs(v.numpy() - b).max() for v, b in zip(agent.encoder.trainable_variables, before)]
    assert all(m > 0 for m in moved)


def test_the_numpy_actor_acts_as_the_tf_policy_and_the_container_shapes_match(camera, tmp_path):
    env, specs = camera
    hp = hparams()
    learner = make_learner(specs, hp, tf.distribute.get_strategy(), str(tmp_path), seed=1)
    learner.step(random_pixel_batches(specs, BATCH), 2)
    weights = learner.variables().policy_weights
    assert [w.shape for w in weights] == acting_weight_shapes_for(specs, hp)
    policy = make_acting_policy(specs, hp, seed=0)
    policy.set_weights(weights)
    observation = env.reset().observation
    greedy = greedy_policy.GreedyPolicy(learner.policy)
    want = greedy.action(ts.restart(tf.constant(observation[None]), batch_size=1)).action
    np.testing.assert_allclose(policy.action(observation[None], greedy=True), want, atol=1e-5)


def test_a_checkpoint_resumes_the_pixel_learner(camera, tmp_path):
    _, specs = camera
    strategy = tf.distribute.get_strategy()
    learner = make_learner(specs, hparams(), strategy, str(tmp_path), seed=2)
    learner.step(random_pixel_batches(specs, BATCH), 2)
    assert learner.save_checkpoint()
    weights = learner.variables().policy_weights
    resumed = make_learner(specs, hparams(), strategy, str(tmp_path), seed=3)
    assert resumed.train_step_numpy == 2
    for a, b in zip(weights, resumed.variables().policy_weights):
        np.testing.assert_array_equal(a, b)


def test_random_shift_moves_each_image_by_at_most_the_pad():
    image = np.zeros((2, 12, 12, 1), np.uint8)
    image[:, 6, 6] = 255
    shifted = random_shift(tf.constant(image), pad=2).numpy()
    for i in range(2):
        rows, cols = np.nonzero(shifted[i, ..., 0] == 255)
        assert len(rows) == 1 and abs(rows[0] - 6) <= 2 and abs(cols[0] - 6) <= 2
