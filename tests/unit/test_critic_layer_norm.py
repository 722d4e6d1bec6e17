"""--critic_layer_norm: critics whose hidden layers are Dense, LayerNorm, ReLU."""

import numpy as np
import pytest
import tensorflow as tf
from support.training import small_hparams

from sac_distributed.algorithm.sac import networks as sac_networks
from sac_distributed.algorithm.sac import update as sac_update
from sac_distributed.algorithm.sac.normalization import ObservationNormalizer
from sac_distributed.errors import CheckpointError, ConfigError


def _critics(agent):
    return {
        "critic_1": agent._critic_network_1,  # noqa: SLF001
        "critic_2": agent._critic_network_2,  # noqa: SLF001
        "target_1": agent._target_critic_network_1,  # noqa: SLF001
        "target_2": agent._target_critic_network_2,  # noqa: SLF001
    }


def _norms(net):
    return [m for m in net.submodules if isinstance(m, tf.keras.layers.LayerNormalization)]


def _observations_and_actions(env_specs, n=8, seed=0):
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n,) + tuple(env_specs.observation.shape)).astype(np.float32)
    act = rng.uniform(-1, 1, size=(n,) + tuple(env_specs.action.shape)).astype(np.float32)
    return tf.constant(obs), tf.constant(act)


def test_off_by_default_keeps_tf_agents_critic(env_specs):
    hp = small_hparams()
    assert hp.critic_layer_norm is False
    agent = sac_update.make_agent(env_specs, hp)
    for name, net in _critics(agent).items():
        assert not _norms(net), f"{name} has a LayerNormalization layer"


@pytest.mark.parametrize("normalize", [False, True])
def test_every_critic_normalizes_each_hidden_layer(env_specs, normalize):
    hp = small_hparams(critic_layer_norm=True, normalize_observations=normalize)
    normalizer = ObservationNormalizer(env_specs.observation) if normalize else None
    agent = sac_update.make_agent(env_specs, hp, normalizer=normalizer)
    obs, act = _observations_and_actions(env_specs)
    values = {}
    for name, net in _critics(agent).items():
        norms = _norms(net)
        assert len(norms) == len(hp.critic_joint_fc_layer_params), name
        q, _ = net((obs, act))
        assert q.shape == (8,), name
        values[name] = q.numpy()
    # Two critics from two draws; each target starts as its critic.
    assert not np.allclose(values["critic_1"], values["critic_2"])
    np.testing.assert_array_equal(values["critic_1"], values["target_1"])
    np.testing.assert_array_equal(values["critic_2"], values["target_2"])


def _first_dense(net):
    return [m for m in net.submodules if isinstance(m, tf.keras.layers.Dense)][0]


@pytest.mark.parametrize("layer_norm", [False, True])
def test_q_ignores_the_scale_of_a_hidden_layer_only_with_the_norm(env_specs, layer_norm):
    """What the normalization is for: a hidden layer's scale does not reach Q."""
    agent = sac_update.make_agent(env_specs, small_hparams(critic_layer_norm=layer_norm))
    net = agent._critic_network_1  # noqa: SLF001
    first = _first_dense(net)
    obs, act = _observations_and_actions(env_specs, n=32)
    before = net((obs, act))[0].numpy()
    # A bias that differs between units (LayerNorm removes a shift common to all),
    # so that the layer's output changes and its bias is not zero when scaled.
    first.bias.assign(np.linspace(-0.5, 0.5, first.bias.shape[0]).astype(np.float32))
    shifted = net((obs, act))[0].numpy()
    assert not np.allclose(before, shifted)  # the layer is used at all
    first.kernel.assign(first.kernel * 7.0)
    first.bias.assign(first.bias * 7.0)
    scaled = net((obs, act))[0].numpy()
    if layer_norm:
        np.testing.assert_allclose(scaled, shifted, rtol=1e-3, atol=1e-3)
    else:
        assert np.abs(scaled - shifted).max() > 0.1


def test_torch_init_draws_the_dense_layers_and_leaves_the_norms_at_identity(env_specs):
    tf.random.set_seed(0)
    hp = small_hparams(critic_layer_norm=True, network_init="torch")
    agent = sac_update.make_agent(env_specs, hp)
    for net in _critics(agent).values():
        for norm in _norms(net):
            np.testing.assert_array_equal(norm.gamma.numpy(), 1.0)
            np.testing.assert_array_equal(norm.beta.numpy(), 0.0)
        dense = [m for m in net.submodules if isinstance(m, tf.keras.layers.Dense)]
        assert all(np.any(layer.bias.numpy()) for layer in dense)  # torch draws biases too


def test_training_moves_the_norms_and_checkpoints_them(
    make_learner, make_learner_config, fill_replay
):
    fill_replay(64)
    loop = make_learner(make_learner_config({"critic_layer_norm": True}, steps_per_call=5))
    result = loop.run()
    assert result.stop_reason == "num_iterations reached"
    assert np.isfinite(result.last_loss)
    agent = loop.learner.agent
    gammas = [n.gamma.numpy() for n in _norms(agent._critic_network_1)]  # noqa: SLF001
    assert any(not np.allclose(g, 1.0) for g in gammas)  # trained, not left at the start
    # The checkpoint holds the trained normalization (and so a restart resumes it).
    path = loop.learner.latest_checkpoint
    key = "agent/_critic_network_1/_hidden/0/1/gamma/.ATTRIBUTES/VARIABLE_VALUE"
    np.testing.assert_array_equal(tf.train.load_variable(path, key), gammas[0])


@pytest.mark.parametrize("written_with", [False, True])
def test_a_checkpoint_of_the_other_critic_is_refused_by_name(
    make_learner, make_learner_config, written_with
):
    """Below run_info.json's check (an older run without it): the learner itself
    names the option, where the failed restore would read as damage."""
    first = make_learner(make_learner_config({"critic_layer_norm": written_with}))
    assert first.learner.save_checkpoint()
    path = first.learner.latest_checkpoint
    with pytest.raises(CheckpointError) as error:
        make_learner(make_learner_config({"critic_layer_norm": not written_with}))
    assert str(error.value) == (
        f"The checkpoint {path} was written with critic_layer_norm={written_with}, but this "
        f"learner runs with critic_layer_norm={not written_with}. Pass "
        f"--critic_layer_norm={str(written_with).lower()} to resume it, or use a new root_dir."
    )
    # Nothing was touched: the same setting still restores it, weights and all.
    again = make_learner(make_learner_config({"critic_layer_norm": written_with}))
    for before, after in zip(_critic_weights(first), _critic_weights(again)):
        np.testing.assert_array_equal(before, after)


def _critic_weights(loop):
    return [v.numpy() for v in loop.learner.agent._critic_network_1.variables]  # noqa: SLF001


def test_a_non_bool_is_refused():
    with pytest.raises(ConfigError, match="critic_layer_norm must be true or false, got 1"):
        small_hparams(critic_layer_norm=1)


def test_a_critic_without_hidden_layers_is_refused(env_specs):
    with pytest.raises(ValueError, match="at least one hidden layer"):
        sac_networks.LayerNormCriticNetwork((env_specs.observation, env_specs.action), ())
