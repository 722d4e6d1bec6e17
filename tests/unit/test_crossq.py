"""The CrossQ learner in one process: its config, layers, update, acting weights and checkpoints.

Tiny networks on Pendulum-v1's specs and constant batches; no Reverb server
(tests/unit/test_crossq_run.py runs it as the learner job does).
"""

import numpy as np
import pytest
import tensorflow as tf
from support.training import batches, crossq_hparams, make_batch, new_crossq_learner, small_hparams

from sac_distributed import config as config_lib
from sac_distributed.algorithm import strategy as strategy_lib
from sac_distributed.algorithm.crossq import config as crossq_config
from sac_distributed.algorithm.crossq import networks as crossq_networks
from sac_distributed.algorithm.policy import NumpyActorPolicy
from sac_distributed.algorithm.sac.learner import SacLearner
from sac_distributed.errors import CheckpointError, ConfigError
from sac_distributed.replay.signatures import POLICY_VARIABLES, variable_signature

# --- configuration ----------------------------------------------------------------


def test_an_unknown_algorithm_is_a_config_error():
    with pytest.raises(ConfigError, match="algorithm must be one of sac, crossq, got 'td3'"):
        small_hparams(algorithm="td3")


@pytest.mark.parametrize(
    "option",
    [
        dict(prioritized_replay=True),
        dict(policy_averaging_tau=0.005),
        dict(critic_layer_norm=True),
        dict(normalize_observations=True),
        dict(learning_rate_schedule="linear"),
    ],
)
def test_options_crossq_cannot_follow_are_config_errors(option):
    (name,) = option
    with pytest.raises(ConfigError, match=f"--algorithm=crossq does not support {name}="):
        crossq_hparams(**option)
    small_hparams(**option)  # SAC takes each of them


def test_a_presets_own_option_crossq_cannot_follow_is_left_at_its_default():
    """InvertedPendulum's preset averages the policy (for SAC); picking CrossQ there
    trains without it, where naming the option is still refused."""
    sac = config_lib.hyperparams_for("InvertedPendulumBulletEnv-v0", {})
    assert sac.policy_averaging_tau == 0.005
    picked = config_lib.hyperparams_for("InvertedPendulumBulletEnv-v0", {"algorithm": "crossq"})
    assert picked.algorithm == "crossq" and picked.policy_averaging_tau == 0.0
    assert (picked.n_step, picked.critic_loss) == (sac.n_step, sac.critic_loss)  # the rest kept
    with pytest.raises(ConfigError, match="does not support policy_averaging_tau=0.01"):
        config_lib.hyperparams_for(
            "InvertedPendulumBulletEnv-v0", {"algorithm": "crossq", "policy_averaging_tau": 0.01}
        )


def test_crossq_needs_batch_statistics_and_one_replica():
    with pytest.raises(ConfigError, match="batch_size >= 2"):
        crossq_hparams(batch_size=1)
    with pytest.raises(ConfigError, match="--strategy=default only, got 'mirrored'"):
        config_lib.LearnerConfig("Pendulum-v1", crossq_hparams(), "/tmp/x", strategy="mirrored")


def test_crossq_takes_its_learning_rate_unless_the_flags_name_one():
    default = config_lib.hyperparams_for("HalfCheetahBulletEnv-v0", {"algorithm": "crossq"})
    assert default.critic_learning_rate == default.actor_learning_rate == 1e-3
    assert default.alpha_learning_rate == 1e-3
    given = config_lib.hyperparams_for(
        "HalfCheetahBulletEnv-v0", {"algorithm": "crossq", "actor_learning_rate": 3e-4}
    )
    assert given.actor_learning_rate == 3e-4 and given.critic_learning_rate == 1e-3
    sac = config_lib.hyperparams_for("HalfCheetahBulletEnv-v0", {})
    assert sac.algorithm == "sac" and sac.critic_learning_rate == 3e-4  # the preset, unchanged


def test_crossq_clips_the_actors_log_std_unless_the_flags_say_not_to():
    assert config_lib.hyperparams_for("Pendulum-v1", {"algorithm": "crossq"}).clip_policy_log_std
    unclipped = config_lib.hyperparams_for(
        "Pendulum-v1", {"algorithm": "crossq", "clip_policy_log_std": False}
    )
    assert not unclipped.clip_policy_log_std
    assert not config_lib.hyperparams_for("Pendulum-v1", {}).clip_policy_log_std  # SAC: as before


# --- the layer --------------------------------------------------------------------


def _reference_renorm(x, mean_run, var_run, eps, r_max, d_max, warmed_up):
    """Batch renormalization in NumPy (scale 1, offset 0), from the paper's equations."""
    mean, var = x.mean(0), x.var(0)
    std, std_run = np.sqrt(var + eps), np.sqrt(var_run + eps)
    r = np.clip(std / std_run, 1 / r_max, r_max) if warmed_up else 1.0
    d = np.clip((mean - mean_run) / std_run, -d_max, d_max) if warmed_up else 0.0
    return (x - mean) / std * r + d, mean, var


@pytest.mark.parametrize("warmed_up", [False, True])
def test_batch_renorm_trains_on_batch_statistics_and_infers_on_running_ones(warmed_up):
    settings = crossq_config.CrossQSettings(renorm_warmup_steps=0 if warmed_up else 10)
    layer = crossq_networks.BatchRenorm(settings)
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, (64, 5)).astype(np.float32)
    layer.build(x.shape)
    layer.moving_mean.assign(np.full(5, 2.0, np.float32))
    layer.moving_variance.assign(np.full(5, 0.5, np.float32))

    out = layer(tf.constant(x), training=True).numpy()

    s = settings
    expected, mean, var = _reference_renorm(
        x.astype(np.float64), 2.0, 0.5, s.renorm_epsilon, s.r_max, s.d_max, warmed_up
    )
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    m = s.renorm_momentum
    np.testing.assert_allclose(layer.moving_mean.numpy(), m * 2.0 + (1 - m) * mean, rtol=1e-5)
    np.testing.assert_allclose(layer.moving_variance.numpy(), m * 0.5 + (1 - m) * var, rtol=1e-5)
    assert layer.steps.numpy() == 1
    # Inference: the running statistics alone, and nothing moves.
    inferred = layer(tf.constant(x), training=False).numpy()
    running_std = np.sqrt(layer.moving_variance.numpy() + s.renorm_epsilon)
    np.testing.assert_allclose(inferred, (x - layer.moving_mean.numpy()) / running_std, rtol=1e-5)
    assert layer.steps.numpy() == 1


# --- the update -------------------------------------------------------------------


@pytest.fixture(scope="module")
def stepped(env_specs, tmp_path_factory):
    """One CrossQ learner (its update traced once for the tests below), stepped one
    update at a time on constant batches from step 0 to 6, recording on the way what
    the tests read: after step 1, the critics' input statistics; at each step, whether
    the actor moved; at step 5, a checkpoint and the value of every variable.

    Returns (learner at step 6, its root_dir, the record). The tests read the record;
    the one that changes the learner (its actor's statistics) reads nothing else of it.
    """
    root_dir = str(tmp_path_factory.mktemp("crossq_root"))
    learner = new_crossq_learner(env_specs, root_dir)
    agent = learner.agent
    data = batches(env_specs)

    def actor_snapshot():
        return [v.numpy().copy() for v in agent.actor.trainable_variables]

    record = {"actor_changed": []}
    for step in range(1, 7):
        before = actor_snapshot()
        learner.step(data, 1)
        after = actor_snapshot()
        record["actor_changed"].append(any(not np.array_equal(a, b) for a, b in zip(before, after)))
        critics = (agent.critic_1, agent.critic_2)
        if step == 1:
            record["critic_steps_1"] = [c.input_norm.steps.numpy() for c in critics]
            record["critic_means_1"] = [c.input_norm.moving_mean.numpy().copy() for c in critics]
        if step == 5:
            record["saved"] = learner.save_checkpoint()
            record["variables_5"] = [(v.name, v.numpy().copy()) for v in agent.variables]
            optimizer = agent.critic_optimizer
            record["critic_optimizer_5"] = [v.numpy().copy() for v in optimizer.variables]
    record["actor_steps"] = agent.actor.input_norm.steps.numpy()
    record["critic_1_steps"] = agent.critic_1.input_norm.steps.numpy()
    record["train_step"] = learner.train_step_numpy
    return learner, root_dir, record


def test_one_critic_pass_normalizes_s_and_s_prime_together(env_specs, stepped):
    """Each critic's input statistics move once per update, by the mean over the
    concatenated (s, a) and (s', a') batch: one joint forward pass."""
    learner, _, record = stepped
    batch = make_batch(env_specs)  # the batch of every update (batches() repeats it)
    joint_obs = tf.concat([batch.time_step.observation, batch.next_time_step.observation], 0)
    obs_size = int(env_specs.observation.shape.num_elements())
    expected = (1 - crossq_config.DEFAULT_SETTINGS.renorm_momentum) * joint_obs.numpy().mean(0)
    # After the first update, for both critics.
    for steps, moving_mean in zip(record["critic_steps_1"], record["critic_means_1"]):
        assert steps == 1
        np.testing.assert_allclose(moving_mean[:obs_size], expected, rtol=1e-4, atol=1e-7)
    assert not hasattr(learner.agent, "target_critic_1")  # the bootstrap reads these critics


def test_the_actor_steps_every_third_update(stepped):
    _, _, record = stepped
    assert record["actor_changed"] == [True, False, False, True, False, False]
    assert record["actor_steps"] == 2
    assert record["critic_1_steps"] == 6
    assert record["train_step"] == 6


# --- acting -----------------------------------------------------------------------


def _perturb_statistics(actor, seed: int = 1) -> None:
    """Running statistics and scales far from their start, so folding is not trivial."""
    rng = np.random.default_rng(seed)
    for norm in [actor.input_norm] + [n for _, n in actor.hidden]:
        size = norm.moving_mean.shape[0]
        norm.moving_mean.assign(rng.normal(0, 1, size).astype(np.float32))
        norm.moving_variance.assign(rng.uniform(0.2, 3.0, size).astype(np.float32))
        norm.scale.assign(rng.uniform(0.5, 2.0, size).astype(np.float32))
        norm.offset.assign(rng.normal(0, 0.5, size).astype(np.float32))


def test_folded_weights_act_as_the_network_in_inference_mode(env_specs, stepped):
    learner, _, _ = stepped  # trained 6 updates; its statistics are overwritten here
    _perturb_statistics(learner.agent.actor)
    observations = np.random.default_rng(2).uniform(-1, 1, (50, 3)).astype(np.float32)
    distribution, _ = learner.agent.actor(tf.constant(observations), training=False)
    act = env_specs.action
    policy = NumpyActorPolicy(act.minimum, act.maximum, act.shape, learner.policy_weights())

    np.testing.assert_allclose(
        policy.action(observations, greedy=True), distribution.mode().numpy(), atol=1e-5
    )
    # The pre-tanh mean as well (the greedy action saturates where it is large).
    mean, _ = policy.distribution_params(observations)
    net_mean = distribution.input_distribution.mean().numpy()  # before the tanh squash
    np.testing.assert_allclose(mean, net_mean, rtol=1e-4, atol=1e-4)


def test_acting_weights_have_the_containers_shapes(env_specs, stepped):
    """The variable container's signature (its policy weights, from the layer sizes)
    fits CrossQ's weights."""
    learner, _, _ = stepped  # shapes and dtypes do not change with training
    specs = variable_signature(env_specs, crossq_hparams())[POLICY_VARIABLES]
    weights = learner.variables().policy_weights
    assert [tuple(s.shape) for s in specs] == [w.shape for w in weights]
    assert all(w.dtype == np.float32 for w in weights)


# --- checkpoints --------------------------------------------------------------------


def test_a_checkpoint_resumes_every_statistic_and_optimizer_state(env_specs, stepped):
    _, root_dir, record = stepped  # checkpointed at step 5
    assert record["saved"]
    resumed = new_crossq_learner(
        env_specs, root_dir, seed=7
    )  # other initial weights, then restored

    assert resumed.train_step_numpy == 5
    originals, restored = record["variables_5"], resumed.agent.variables
    # (Keras numbers layer names per process, so the two agents' names differ.)
    assert [v.shape for _, v in originals] == [v.shape for v in restored]
    statistics = [v for name, v in originals if "moving_" in name or name.endswith("steps:0")]
    assert len(statistics) == 3 * 3 * 3  # actor and both critics: 3 norms x 3 statistics each
    assert all(np.any(v != 0) for v in statistics)  # all moved: the test is not trivial
    for (name, a), b in zip(originals, restored):
        np.testing.assert_array_equal(b.numpy(), a, err_msg=name)
    # The optimizers' moments too.
    for a, b in zip(record["critic_optimizer_5"], resumed.agent.critic_optimizer.variables):
        np.testing.assert_array_equal(b.numpy(), a)
    assert resumed.agent.critic_optimizer.iterations.numpy() == 5
    # And it trains on from there.
    resumed.step(batches(env_specs), 1)
    assert resumed.train_step_numpy == 6


def test_a_sac_checkpoint_is_refused_by_name(env_specs, root_dir):
    strategy = strategy_lib.make_strategy("default")
    sac = SacLearner(env_specs, small_hparams(), strategy, root_dir, seed=0)
    assert sac.save_checkpoint()
    with pytest.raises(CheckpointError, match="written by the SAC learner"):
        new_crossq_learner(env_specs, root_dir)


def test_the_actor_takes_a_batch_of_any_outer_rank(env_specs):
    actor = crossq_networks.make_batch_renorm_actor_network(env_specs, crossq_hparams())
    actor.create_variables()
    observations = tf.zeros([2, 4] + env_specs.observation.shape.as_list())
    distribution, _ = actor(observations, training=False)
    assert distribution.mode().shape == [2, 4] + env_specs.action.shape.as_list()


@pytest.mark.parametrize("per_dim", [-0.5, -1.0])
def test_crossqs_target_entropy_follows_the_per_action_dim_rule(env_specs, per_dim):
    from sac_distributed.algorithm.crossq.update import CrossQAgent

    hparams = crossq_hparams(target_entropy_per_action_dim=per_dim)
    agent = CrossQAgent(env_specs, hparams, tf.Variable(0, dtype=tf.int64))
    assert agent.target_entropy == pytest.approx(per_dim * env_specs.action.shape.num_elements())
