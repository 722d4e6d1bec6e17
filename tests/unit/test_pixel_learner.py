"""The pixel learner in one process: DrQ's update trains the shared encoder through
the critic loss alone, the NumPy actor acts as the exported TF policy does, the
variable container's shapes are the learner's, and a checkpoint resumes."""

import numpy as np
import pytest
import tensorflow as tf
from support.camera import (
    assert_numpy_actor_acts_as_the_tf_policy,
    learner_hparams,
    pointmass_camera,
    random_pixel_batches,
)

from sac_distributed.algorithm.pixel_policy import acting_weight_shapes_for
from sac_distributed.algorithm.sac.learner import make_learner
from sac_distributed.algorithm.sac.pixel_learner import PixelSacLearner
from sac_distributed.algorithm.sac.pixel_networks import random_shift

BATCH = 8  # learner_hparams' batch_size


@pytest.fixture(scope="module")
def camera():
    env, specs = pointmass_camera()
    yield env, specs
    env.close()


def test_the_critic_loss_trains_the_encoder_and_the_actor_loss_does_not(camera, tmp_path):
    env, specs = camera
    learner = make_learner(
        specs, learner_hparams(), tf.distribute.get_strategy(), str(tmp_path), seed=0
    )
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
    hp = learner_hparams()
    learner = make_learner(specs, hp, tf.distribute.get_strategy(), str(tmp_path), seed=1)
    learner.step(random_pixel_batches(specs, BATCH), 2)
    weights = learner.variables().policy_weights
    assert [w.shape for w in weights] == acting_weight_shapes_for(specs, hp)
    assert_numpy_actor_acts_as_the_tf_policy(learner, specs, hp, env)


@pytest.mark.parametrize("conv_dtype", ["float32", "bfloat16"])
def test_a_checkpoint_resumes_the_pixel_learner(camera, tmp_path, conv_dtype):
    _, specs = camera
    strategy = tf.distribute.get_strategy()
    learner = make_learner(specs, learner_hparams(), strategy, str(tmp_path), seed=2)
    learner.step(random_pixel_batches(specs, BATCH), 2)
    assert learner.save_checkpoint()
    weights = learner.variables().policy_weights
    resumed_hp = learner_hparams(conv_dtype=conv_dtype)  # the convs' dtype is not stored
    resumed = make_learner(specs, resumed_hp, strategy, str(tmp_path), seed=3)
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
