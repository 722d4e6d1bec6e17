"""--conv_dtype=bfloat16: the learner's encoder convs compute in bfloat16 on float32
weights; the weights it trains, the checkpoint, the actors' NumPy policy and the
exported TF policy stay float32 (a float32 checkpoint resuming in bfloat16:
test_pixel_learner.py), and a bad value is refused in one line."""

import numpy as np
import pytest
import tensorflow as tf
from support.camera import (
    assert_numpy_actor_acts_as_the_tf_policy,
    learner_hparams,
    pointmass_camera,
    random_pixel_batches,
)

from sac_distributed import config as config_lib
from sac_distributed.algorithm.sac import pixel_networks
from sac_distributed.algorithm.sac.learner import make_learner
from sac_distributed.algorithm.sac.pixel_networks import PixelEncoder
from sac_distributed.errors import ConfigError


@pytest.fixture(scope="module")
def camera():
    env, specs = pointmass_camera()
    yield env, specs
    env.close()


def bf16_hparams():
    return learner_hparams(conv_dtype="bfloat16")


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
    assert_numpy_actor_acts_as_the_tf_policy(learner, specs, hp, env)


def test_an_unknown_conv_dtype_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="conv_dtype must be one of float32, bfloat16") as e:
        config_lib.Hyperparams(conv_dtype="float16")
    assert "\n" not in str(e.value)


def test_bfloat16_on_a_cpu_that_would_emulate_it_is_warned_of(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f\n")
    flags = pixel_networks.cpu_flags(str(cpuinfo))
    assert flags == {"fpu", "avx2", "avx512f"}
    said = pixel_networks.warn_if_bfloat16_is_emulated("bfloat16", flags, gpus=0)
    assert "without AVX512-BF16 or AMX" in said and "\n" not in said
    for quiet in (
        ("float32", flags, 0),  # nothing asked of bfloat16
        ("bfloat16", flags | {"avx512_bf16"}, 0),  # native on this CPU
        ("bfloat16", flags, 1),  # a GPU computes it
        ("bfloat16", None, 0),  # no /proc/cpuinfo to tell
    ):
        assert pixel_networks.warn_if_bfloat16_is_emulated(*quiet) is None
    assert pixel_networks.cpu_flags(str(tmp_path / "absent")) is None
