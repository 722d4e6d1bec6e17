"""--conv_dtype=bfloat16: the learner's encoder convs compute in bfloat16 on float32
weights; the weights it trains, the checkpoint, the actors' NumPy policy and the
exported TF policy stay float32, and a bad value is refused in one line."""

import os

import numpy as np
import pytest
import tensorflow as tf
from support.camera import random_pixel_batches
from tf_agents.policies import greedy_policy
from tf_agents.trajectories import time_step as ts

from sac_distributed import config as config_lib
from sac_distributed.algorithm.pixel_policy import make_acting_policy
from sac_distributed.algorithm.sac.learner import make_learner
from sac_distributed.algorithm.sac.pixel_networks import PixelEncoder
from sac_distributed.envs import loader
from sac_distributed.errors import ConfigError

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


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


def hparams(conv_dtype="float32"):
    return config_lib.Hyperparams(
        batch_size=8,
        initial_collect_steps=8,
        actor_fc_layer_params=(16, 16),
        critic_joint_fc_layer_params=(16, 16),
        conv_dtype=conv_dtype,
    )


def bf16_hparams():
    return hparams("bfloat16")


def test_bfloat16_features_follow_the_float32_ones_on_the_same_weights():
    encoder = PixelEncoder(conv_dtype="bfloat16")
    images = tf.constant(np.random.default_rng(0).integers(0, 256, (4, 20, 20, 9), np.uint8))
    fast = encoder(images).numpy()
    exact = encoder(images, conv_dtype="float32").numpy()
    assert fast.dtype == np.float32 and fast.shape == (4, 50)
    assert all(v.dtype == tf.float32 for v in encoder.variables)
    assert np.abs(fast - exact).max() < 0.05  # bfloat16 keeps 8 bits of mantissa
    assert not np.array_equal(fast, exact)  # it did compute in bfloat16


def test_a_bfloat16_learner_trains_the_encoder_and_acts_in_float32(camera, tmp_path):
    env, specs = camera
    hp = bf16_hparams()
    learner = make_learner(specs, hp, tf.distribute.get_strategy(), str(tmp_path), seed=0)
    encoder = learner.agent.encoder.trainable_variables
    before = [v.numpy().copy() for v in encoder]
    losses = learner.step(random_pixel_batches(specs, 8), 3)
    assert np.all(np.isfinite(losses)) and learner.train_step_numpy == 3
    assert all(np.abs(v.numpy() - b).max() > 0 for v, b in zip(encoder, before))
    assert {v.dtype for v in learner.agent.variables if v.dtype.is_floating} == {tf.float32}
    # The exported TF policy's convs run in float32: the float32 NumPy actor matches it.
    policy = make_acting_policy(specs, hp, seed=0)
    policy.set_weights(learner.variables().policy_weights)
    observation = env.reset().observation
    greedy = greedy_policy.GreedyPolicy(learner.policy)
    want = greedy.action(ts.restart(tf.constant(observation[None]), batch_size=1)).action
    np.testing.assert_allclose(policy.action(observation[None], greedy=True), want, atol=1e-5)


def test_a_float32_checkpoint_resumes_in_bfloat16(camera, tmp_path):
    _, specs = camera
    strategy = tf.distribute.get_strategy()
    learner = make_learner(specs, hparams(), strategy, str(tmp_path), seed=2)
    learner.step(random_pixel_batches(specs, 8), 2)
    assert learner.save_checkpoint()
    weights = learner.variables().policy_weights
    resumed = make_learner(specs, bf16_hparams(), strategy, str(tmp_path), seed=3)
    assert resumed.train_step_numpy == 2
    for a, b in zip(weights, resumed.variables().policy_weights):
        np.testing.assert_array_equal(a, b)


def test_an_unknown_conv_dtype_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="conv_dtype must be one of float32, bfloat16") as e:
        config_lib.Hyperparams(conv_dtype="float16")
    assert "\n" not in str(e.value)
