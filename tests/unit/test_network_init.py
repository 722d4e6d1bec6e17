"""--network_init: TF-Agents' Glorot start or PyTorch's nn.Linear start (SB3's)."""

import math

import numpy as np
import pytest
import tensorflow as tf
from support.training import small_hparams

from sac_distributed.algorithm.sac import update as sac_update
from sac_distributed.algorithm.sac.normalization import ObservationNormalizer
from sac_distributed.errors import ConfigError


def _dense_layers(net):
    layers = [m for m in net.submodules if isinstance(m, tf.keras.layers.Dense)]
    assert layers, f"{net.name} has no Dense layers"
    return layers


def _networks(agent):
    return {
        "actor": agent._actor_network,  # noqa: SLF001
        "critic_1": agent._critic_network_1,  # noqa: SLF001
        "critic_2": agent._critic_network_2,  # noqa: SLF001
    }


def test_glorot_is_the_default_and_starts_biases_at_zero(env_specs):
    hp = small_hparams()
    assert hp.network_init == "glorot"
    agent = sac_update.make_agent(env_specs, hp)
    for name, net in _networks(agent).items():
        for layer in _dense_layers(net):
            assert not np.any(layer.bias.numpy()), f"{name}/{layer.name} bias is not zero"


@pytest.mark.parametrize("normalize", [False, True])
def test_torch_draws_kernels_and_biases_within_one_over_sqrt_fan_in(env_specs, normalize):
    tf.random.set_seed(0)
    hp = small_hparams(network_init="torch", normalize_observations=normalize)
    normalizer = ObservationNormalizer(env_specs.observation) if normalize else None
    agent = sac_update.make_agent(env_specs, hp, normalizer=normalizer)
    for name, net in _networks(agent).items():
        for layer in _dense_layers(net):
            kernel, bias = layer.kernel.numpy(), layer.bias.numpy()
            bound = 1.0 / math.sqrt(kernel.shape[0])
            for what, value in (("kernel", kernel), ("bias", bias)):
                assert np.abs(value).max() <= bound, f"{name}/{layer.name} {what} too wide"
                if value.size >= 16:  # a draw over the whole range, not a narrower one
                    assert np.abs(value).max() > 0.5 * bound, f"{name}/{layer.name} {what}"
    # the two critics start from different draws, and each target from its critic
    c1 = agent._critic_network_1.variables  # noqa: SLF001
    c2 = agent._critic_network_2.variables  # noqa: SLF001
    assert not np.allclose(c1[0].numpy(), c2[0].numpy())
    for online, target in (
        (c1, agent._target_critic_network_1.variables),  # noqa: SLF001
        (c2, agent._target_critic_network_2.variables),  # noqa: SLF001
    ):
        for a, b in zip(online, target):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_torch_starts_the_critic_output_smaller_than_glorot(env_specs):
    """The point of the option: PyTorch's last critic layer is ~2x narrower."""

    def last_kernel_std(init):
        tf.random.set_seed(1)
        agent = sac_update.make_agent(env_specs, small_hparams(network_init=init))
        return _dense_layers(agent._critic_network_1)[-1].kernel.numpy().std()  # noqa: SLF001

    assert last_kernel_std("torch") < 0.75 * last_kernel_std("glorot")


def test_an_unknown_init_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match="network_init must be one of glorot, torch, got 'he'"):
        small_hparams(network_init="he")
