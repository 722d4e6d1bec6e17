"""benchmarks/probe.py update_parity's TensorFlow half: flags, noise, weight layout, measure.

The SB3 half needs `make bench-sb3`'s virtualenv, which the suite does not build;
these check what ours does with SB3's weights, batches and noise."""

import numpy as np
import pytest
import tensorflow as tf
from support.training import small_hparams
from tf_agents.trajectories import time_step as ts

from benchmarks.probes import update_parity
from sac_distributed.algorithm.sac import update as sac_update


def test_flags_apply_to_the_preset():
    hp = update_parity.hyperparams(
        "Walker2DBulletEnv-v0",
        "--clip_policy_log_std --adam_epsilon=1e-8 --actor_fc_layer_params=32,32 "
        "--network_init=torch",
    )
    assert hp.clip_policy_log_std is True
    assert hp.adam_epsilon == 1e-8
    assert hp.actor_fc_layer_params == (32, 32)
    assert hp.network_init == "torch"
    assert hp.transitions_per_item == 8  # the rest is the walkers' preset
    with pytest.raises(SystemExit, match="--flags: --clip_log_std set no hyperparameter"):
        update_parity.hyperparams("Walker2DBulletEnv-v0", "--clip_log_std --gamma=0.9")


def test_an_env_with_other_action_bounds_is_refused(env_specs):
    with pytest.raises(SystemExit, match=r"Pendulum-v1's actions lie in \[-2.0, 2.0\]"):
        update_parity.check_unit_action_bounds(env_specs, "Pendulum-v1")
    walker = update_parity.env_loader.specs_for("Walker2DBulletEnv-v0")
    update_parity.check_unit_action_bounds(walker, "Walker2DBulletEnv-v0")  # [-1, 1]: fine


def _inputs(env_specs, hp, steps=3, seed=0):
    args = type("Args", (), {"seed": seed, "steps": steps, "done_rate": 0.25})
    return update_parity.make_inputs(env_specs, hp, args)


def test_the_noise_goes_to_each_sample_in_sb3s_order(env_specs):
    hp = small_hparams()
    tf.random.set_seed(0)
    agent = sac_update.make_agent(env_specs, hp)
    inputs = _inputs(env_specs, hp)
    noise = update_parity.FixedNoise(agent, inputs)
    noise.step = 1
    obs = inputs["observations"][1]
    time_step = ts.restart(tf.constant(obs), batch_size=len(obs))
    dist = agent._policy.distribution(time_step).action.input_distribution  # noqa: SLF001
    mean, std = dist.loc.numpy().astype(np.float64), dist.stddev().numpy().astype(np.float64)
    low, high = env_specs.action.minimum, env_specs.action.maximum
    # critic loss (next observations), actor loss, temperature loss
    for name in ("noise_next_observations", "noise_observations", "noise_observations"):
        actions, log_pi = noise(time_step, training=True)
        u = mean + std * inputs[name][1]
        expected = low + (high - low) * (np.tanh(u) + 1) / 2
        np.testing.assert_allclose(actions.numpy(), expected, rtol=1e-5, atol=1e-5)
        # log pi of a tanh-squashed Gaussian, scaled to the bounds, from u itself
        gaussian = -0.5 * ((u - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)
        # log(1 - tanh(u)^2) in a form that stays exact where tanh(u) rounds to 1
        log_sech2 = 2 * (np.log(2) - np.abs(u) - np.log1p(np.exp(-2 * np.abs(u))))
        jacobian = np.log((high - low) / 2) + log_sech2
        np.testing.assert_allclose(
            log_pi.numpy(), (gaussian - jacobian).sum(-1), rtol=1e-4, atol=1e-4
        )


def _sb3_layout(agent):
    """An agent's weights named as probe.py update_parity_sb3 writes SB3's."""
    out = {}
    actor = [v.numpy() for v in update_parity.networks(agent)["actor"]]
    proj_k, proj_b = actor[-2:]
    a = proj_k.shape[1] // 2
    layers = list(zip(actor[:-2:2], actor[1:-2:2])) + [
        (proj_k[:, :a], proj_b[:a]),
        (proj_k[:, a:], proj_b[a:]),
    ]
    for i, (k, b) in enumerate(layers):
        out[f"actor/{i}/kernel"], out[f"actor/{i}/bias"] = k, b
    for name in update_parity.GROUPS[1:]:
        values = [v.numpy() for v in update_parity.networks(agent)[name]]
        for i in range(len(values) // 2):
            out[f"{name}/{i}/kernel"], out[f"{name}/{i}/bias"] = values[2 * i], values[2 * i + 1]
    out["log_alpha"] = np.float32(0.25)
    return out


def test_sb3s_layout_loads_into_our_networks(env_specs):
    hp = small_hparams()
    source = sac_update.make_agent(env_specs, hp)
    target = sac_update.make_agent(env_specs, hp)
    update_parity.load_start(target, update_parity.sb3_as_keras(_sb3_layout(source)))
    for name, variables in update_parity.networks(source).items():
        for a, b in zip(variables, update_parity.networks(target)[name]):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    assert float(target._log_alpha.numpy()) == 0.25  # noqa: SLF001


def test_a_wrong_size_is_named(env_specs):
    agent = sac_update.make_agent(env_specs, small_hparams())
    wider = sac_update.make_agent(env_specs, small_hparams(actor_fc_layer_params=(32, 32)))
    start = update_parity.sb3_as_keras(_sb3_layout(wider))
    with pytest.raises(SystemExit, match="actor: ours has shapes"):
        update_parity.load_start(agent, start)


def test_a_run_is_repeatable_and_the_control_moves_it_only_a_little(env_specs):
    hp = small_hparams()
    tf.random.set_seed(0)
    start = update_parity.sb3_as_keras(_sb3_layout(sac_update.make_agent(env_specs, hp)))
    inputs = _inputs(env_specs, hp, steps=3)
    marks = [1, 3]
    first = update_parity.run_ours(env_specs, hp, inputs, start, marks)
    again = update_parity.run_ours(env_specs, hp, inputs, start, marks)
    same = update_parity.divergence(start, first["marks"], again["marks"])
    assert all(share == 0.0 for row in same.values() for share in row.values())
    np.testing.assert_array_equal(first["losses"], again["losses"])
    assert np.all(np.isfinite(first["losses"]))

    nudged = update_parity.perturbed(start, 1e-6, seed=0)
    control = update_parity.run_ours(env_specs, hp, inputs, nudged, marks)
    apart = update_parity.divergence(start, first["marks"], control["marks"])
    for name in ("actor", "critic1", "critic2"):
        assert 0.0 < apart[1][name] < 1e-2, (name, apart[1][name])
