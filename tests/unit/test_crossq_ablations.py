"""CrossQ's ablations (`--crossq_ablations`): each piece turned back to SAC's, alone.

In one process on Pendulum-v1's specs with constant batches, as tests/unit/test_crossq.py;
the learning runs that use them are in docs/tuning.md.
"""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from support.training import batches, crossq_hparams, make_batch, new_crossq_learner

from sac_distributed import config as config_lib
from sac_distributed import paths, run_info
from sac_distributed.algorithm.crossq import config as crossq_config
from sac_distributed.algorithm.policy import NumpyActorPolicy
from sac_distributed.errors import ConfigError

STEPS = 4  # each ablation's shared learner: updates, then a checkpoint


def _run_ablation(env_specs, root_dir: str, ablation: str) -> dict:
    """A learner with `ablation` (its update traced once), stepped one update at a time
    from step 0 to STEPS on constant batches and checkpointed there, with what the
    tests read recorded on the way (the learner itself under "learner", its root_dir
    under "root_dir")."""
    learner = new_crossq_learner(env_specs, root_dir, crossq_ablations=(ablation,))
    agent = learner.agent
    actor, critics = agent.actor, (agent.critic_1, agent.critic_2)
    data = batches(env_specs)
    record = {"learner": learner, "root_dir": root_dir, "actor_changed": []}
    for step in range(1, STEPS + 1):
        before = [v.numpy().copy() for v in actor.trainable_variables]
        record["losses"] = learner.step(data, 1)
        after = actor.trainable_variables
        record["actor_changed"].append(
            any(not np.array_equal(b, a.numpy()) for b, a in zip(before, after))
        )
        if ablation == "separate_passes" and step == 1:
            record["critic_steps_1"] = [c.input_norm.steps.numpy() for c in critics]
            record["critic_means_1"] = [c.input_norm.moving_mean.numpy().copy() for c in critics]
        if ablation == "no_policy_delay" and step == 3:
            record["actor_steps_3"] = actor.input_norm.steps.numpy()
    record["saved"] = learner.save_checkpoint()
    record["variables"] = [v.numpy().copy() for v in agent.variables]
    return record


@pytest.fixture(scope="module")
def ablated(env_specs, tmp_path_factory):
    """`ablated(name)`: `_run_ablation`'s record, one run per ablation and module.

    The tests read the record and may read (not change) the learner in it."""
    runs = {}

    def get(ablation: str) -> dict:
        if ablation not in runs:
            root_dir = str(tmp_path_factory.mktemp(ablation.replace(".", "_")))
            runs[ablation] = _run_ablation(env_specs, root_dir, ablation)
        return runs[ablation]

    return get


def test_ablations_are_refused_for_sac_and_unknown_or_repeated_names():
    with pytest.raises(ConfigError, match="add --algorithm=crossq"):
        config_lib.hyperparams_for("Pendulum-v1", {"crossq_ablations": ("separate_passes",)})
    with pytest.raises(ConfigError, match="unknown 'joint'.*separate_passes"):
        crossq_hparams(crossq_ablations=("joint",))
    with pytest.raises(ConfigError, match="twice"):
        crossq_hparams(crossq_ablations=("target_critics", "target_critics"))


def test_each_ablation_sets_only_its_own_piece():
    default = crossq_config.settings_for(crossq_hparams())
    assert default == crossq_config.DEFAULT_SETTINGS
    changed = {
        "separate_passes": {"joint_pass": False},
        "target_critics": {"target_critics": True},
        "no_batch_renorm": {"batch_renorm": False},
        "adam_beta1_0.9": {"adam_beta1": 0.9},
        "no_policy_delay": {"policy_delay": 1},
    }
    assert set(changed) == set(crossq_config.ABLATIONS)
    for name, fields in changed.items():
        settings = crossq_config.settings_for(crossq_hparams(crossq_ablations=(name,)))
        differing = {
            f: getattr(settings, f)
            for f in settings.__dataclass_fields__
            if getattr(settings, f) != getattr(default, f)
        }
        assert differing == fields, name


def test_a_run_with_other_ablations_is_refused(tmp_path):
    """The ablated networks hold other variables (target critics, no statistics):
    run_info.json binds a root_dir to its ablations, as to its algorithm."""
    root = str(tmp_path)
    ablated = crossq_hparams(crossq_ablations=("target_critics",))
    os.makedirs(paths.checkpoint_dir(root))
    open(
        os.path.join(paths.checkpoint_dir(root), f"{paths.CHECKPOINT_PREFIX}-10.index"), "w"
    ).close()
    recorded = {"env_name": "Pendulum-v1", "hparams": dataclasses.asdict(ablated)}
    with open(paths.run_info_path(root), "w") as f:
        json.dump(recorded, f)
    with pytest.raises(ConfigError, match="crossq_ablations=target_critics, you asked"):
        run_info.check_same_run(root, "Pendulum-v1", crossq_hparams())
    run_info.check_same_run(root, "Pendulum-v1", ablated)


def test_separate_passes_move_the_statistics_by_the_first_pass_alone(env_specs, ablated):
    """The (s', a') pass normalizes with its own batch statistics and leaves the
    running ones to (s, a), so the warm-up still counts one call per update."""
    record = ablated("separate_passes")
    batch = make_batch(env_specs)  # the batch of every update (batches() repeats it)
    obs_size = int(env_specs.observation.shape.num_elements())
    expected = (
        1 - crossq_config.DEFAULT_SETTINGS.renorm_momentum
    ) * batch.time_step.observation.numpy()
    # After the first update, for both critics.
    for steps, moving_mean in zip(record["critic_steps_1"], record["critic_means_1"]):
        assert steps == 1
        np.testing.assert_allclose(moving_mean[:obs_size], expected.mean(0), rtol=1e-4, atol=1e-7)


def test_separate_passes_bootstrap_on_other_statistics_than_the_joint_pass(env_specs, root_dir):
    """The same weights, batch and sampled a': the joint pass's loss repeats, and the
    two-pass loss differs from it (only the batch statistics differ)."""
    agent = new_crossq_learner(env_specs, root_dir).agent
    batch = make_batch(env_specs)

    def loss(settings) -> float:
        agent.settings = settings
        tf.random.set_seed(3)  # the same a' ~ pi(s') each time
        return float(agent.critic_loss(batch))

    joint = crossq_config.DEFAULT_SETTINGS
    separate = dataclasses.replace(joint, joint_pass=False)
    first, two_pass, again = loss(joint), loss(separate), loss(joint)
    assert np.isfinite([first, two_pass]).all()
    assert first == pytest.approx(again, rel=1e-6)
    assert abs(first - two_pass) > 1e-4 * abs(first)


def test_target_critics_start_as_copies_and_follow_by_tau(env_specs, root_dir):
    learner = new_crossq_learner(
        env_specs, root_dir, crossq_ablations=("target_critics",), target_update_tau=0.1
    )
    agent = learner.agent
    pairs = list(zip(agent.target_critics, (agent.critic_1, agent.critic_2)))
    for target, critic in pairs:
        for t, c in zip(target.variables, critic.variables):
            np.testing.assert_array_equal(t.numpy(), c.numpy())
    before = [[t.numpy().copy() for t in target.variables] for target, _ in pairs]
    learner.step(batches(env_specs), 1)
    for (target, critic), old in zip(pairs, before):
        dense = [i for i, v in enumerate(critic.variables) if "kernel" in v.name][0]
        t_new, c_new, t_old = target.variables[dense], critic.variables[dense], old[dense]
        np.testing.assert_allclose(t_new.numpy(), 0.9 * t_old + 0.1 * c_new.numpy(), rtol=1e-5)
        assert not np.array_equal(t_new.numpy(), c_new.numpy())
        # The bootstrap reads the targets in inference mode: their warm-up count is the copy's.
        assert target.input_norm.steps.numpy() == critic.input_norm.steps.numpy()


def test_without_batch_renorm_the_networks_are_plain_and_fold_to_themselves(env_specs, ablated):
    learner = ablated("no_batch_renorm")["learner"]  # trained STEPS updates
    actor = learner.agent.actor
    assert not [v for v in actor.variables if "moving" in v.name or "scale" in v.name]
    weights = learner.policy_weights()
    kernels = [v for v in actor.variables if "kernel" in v.name]
    for folded, kernel in zip(weights[::2], kernels):
        np.testing.assert_array_equal(folded, kernel.numpy())
    observations = make_batch(env_specs).time_step.observation
    act = env_specs.action
    policy = NumpyActorPolicy(act.minimum, act.maximum, act.shape, weights)
    distribution, _ = actor(observations, training=False)
    np.testing.assert_allclose(
        policy.action(observations.numpy(), greedy=True), distribution.mode().numpy(), atol=1e-5
    )


def test_without_the_policy_delay_the_actor_steps_every_update(ablated):
    record = ablated("no_policy_delay")
    assert record["actor_changed"][:3] == [True, True, True]  # each of the first 3 updates
    assert record["actor_steps_3"] == 3


def test_adam_beta1_ablation_reaches_the_optimizers(ablated):
    learner = ablated("adam_beta1_0.9")["learner"]
    for optimizer in (learner.agent.critic_optimizer, learner.agent.actor_optimizer):
        assert float(tf.keras.backend.get_value(optimizer.beta_1)) == pytest.approx(0.9)


@pytest.mark.parametrize("ablation", sorted(crossq_config.ABLATIONS))
def test_every_ablation_trains_checkpoints_and_resumes(env_specs, ablated, ablation):
    record = ablated(ablation)  # STEPS updates, then a checkpoint
    assert np.isfinite(float(record["losses"].critic))
    assert record["saved"]
    resumed = new_crossq_learner(
        env_specs, record["root_dir"], seed=7, crossq_ablations=(ablation,)
    )
    assert resumed.train_step_numpy == STEPS
    for a, b in zip(record["variables"], resumed.agent.variables):
        np.testing.assert_array_equal(a, b.numpy())
