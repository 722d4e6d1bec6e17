"""--initial_alpha: where the learned temperature starts, for SAC, CrossQ and the pixel
learner alike; a bad value is refused before anything is built."""

import math
import os

import pytest
import tensorflow as tf
from support.training import crossq_hparams, small_hparams

from sac_distributed import config as config_lib
from sac_distributed.algorithm.crossq.update import CrossQAgent
from sac_distributed.algorithm.sac import update as sac_update
from sac_distributed.algorithm.sac.pixel_learner import PixelSacAgent
from sac_distributed.envs import loader
from sac_distributed.errors import ConfigError

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def test_the_default_is_one_as_tf_agents_and_sb3_start(env_specs):
    assert config_lib.Hyperparams().initial_alpha == 1.0
    agent = sac_update.make_agent(env_specs, small_hparams())
    assert math.exp(agent._log_alpha.numpy()) == pytest.approx(1.0)  # noqa: SLF001


@pytest.mark.parametrize("alpha", [0.1, 2.5])
def test_sac_and_crossq_start_at_the_given_alpha(env_specs, alpha):
    sac = sac_update.make_agent(env_specs, small_hparams(initial_alpha=alpha))
    assert math.exp(sac._log_alpha.numpy()) == pytest.approx(alpha)  # noqa: SLF001
    crossq = CrossQAgent(
        env_specs, crossq_hparams(initial_alpha=alpha), tf.Variable(0, dtype=tf.int64)
    )
    assert math.exp(crossq.log_alpha.numpy()) == pytest.approx(alpha)


def test_the_pixel_learner_starts_at_the_given_alpha():
    env = loader.load_env(
        "pointmass:make_env",
        seed=0,
        env_kwargs={"pixels": True, "image_size": 16},
        module_dirs=(EXAMPLES,),
    )
    try:
        specs = loader.env_specs(env)
    finally:
        env.close()
    hparams = config_lib.Hyperparams(
        batch_size=4,
        actor_fc_layer_params=(8,),
        critic_joint_fc_layer_params=(8,),
        initial_alpha=0.1,
    )
    agent = PixelSacAgent(specs, hparams, tf.Variable(0, dtype=tf.int64))
    assert math.exp(agent.log_alpha.numpy()) == pytest.approx(0.1)


@pytest.mark.parametrize("bad", [0, -0.1, float("inf"), "0.1"])
def test_a_bad_initial_alpha_is_refused_in_one_line(bad):
    with pytest.raises(ConfigError, match=r"initial_alpha must be a number > 0, got"):
        config_lib.Hyperparams(initial_alpha=bad)
