"""Actions on [-1, 1] (Hyperparams.rescale_actions, envs/actions.py): the jobs see a
[-1, 1] spec, the env's step maps each action to its bounds, and the exported
policies act in the env's own bounds again. Pendulum-v1's torque is in [-2, 2]."""

import os

import numpy as np
import pytest
from support.training import (
    ENV_NAME,
    assert_exported_policy_plays_the_evaluators_episodes,
    learner_config,
)

from sac_distributed import paths
from sac_distributed.algorithm import strategy as strategy_lib
from sac_distributed.algorithm.policy import NumpyActorPolicy, add_batch
from sac_distributed.config import GENERIC_PRESET, hyperparams_for
from sac_distributed.envs import actions
from sac_distributed.envs import loader as env_loader
from sac_distributed.replay.connection import Connection
from sac_distributed.replay.variables import VariableContainer
from sac_distributed.runtime import Metrics
from sac_distributed.tools import inspect_policy


def test_the_env_acts_on_unit_actions_and_steps_in_its_own_bounds():
    rescaled = env_loader.load_env(ENV_NAME, seed=3, rescale_actions=True)
    raw = env_loader.load_env(ENV_NAME, seed=3)
    spec = rescaled.action_spec()
    assert (float(spec.minimum), float(spec.maximum)) == (-1.0, 1.0)
    assert (float(raw.action_spec().minimum), float(raw.action_spec().maximum)) == (-2.0, 2.0)
    np.testing.assert_array_equal(rescaled.reset().observation, raw.reset().observation)
    for unit in (0.5, -1.0, 0.25, 1.0):
        a = rescaled.step(np.array([unit], np.float32))
        b = raw.step(np.array([2.0 * unit], np.float32))
        np.testing.assert_allclose(a.observation, b.observation, rtol=1e-6)
        assert a.reward == pytest.approx(float(b.reward), rel=1e-6)


def test_specs_name_the_envs_own_bounds_only_where_actions_are_rescaled():
    specs = env_loader.specs_for(ENV_NAME, rescale_actions=True)
    assert (float(specs.action.minimum), float(specs.action.maximum)) == (-1.0, 1.0)
    assert (float(specs.env_action.minimum), float(specs.env_action.maximum)) == (-2.0, 2.0)
    assert env_loader.specs_for(ENV_NAME).env_action is None
    # MountainCarContinuous acts on [-1, 1] already: left as it is.
    assert env_loader.specs_for("MountainCarContinuous-v0", rescale_actions=True).env_action is None


def test_only_bounded_float_specs_other_than_unit_are_rescaled():
    from tf_agents.specs import array_spec

    def box(low, high, dtype=np.float32):
        return array_spec.BoundedArraySpec((2,), dtype, low, high)

    assert actions.needs_rescale(box([-2.0, 0.0], [2.0, 1.0]))
    assert not actions.needs_rescale(box(-1.0, 1.0))
    assert not actions.needs_rescale(box(-np.inf, np.inf))  # env_specs refuses it in its words
    assert not actions.needs_rescale(box(0, 3, np.int32))
    center, half = actions.center_and_half_range(box([-2.0, 0.0], [2.0, 1.0]))
    np.testing.assert_array_equal(center, [0.0, 0.5])
    np.testing.assert_array_equal(half, [2.0, 0.5])


def test_an_env_without_a_preset_acts_on_unit_actions_and_a_preset_does_not():
    assert GENERIC_PRESET.rescale_actions
    assert hyperparams_for("InvertedPendulum-v5").rescale_actions
    assert not hyperparams_for(ENV_NAME).rescale_actions  # Pendulum-v1 has a preset
    assert not hyperparams_for("InvertedPendulum-v5", {"rescale_actions": False}).rescale_actions


@pytest.fixture(scope="module")
def rescaled_run(new_server, write_replay, tmp_path_factory):
    """A learner trained on [-1, 1] actions of Pendulum-v1, finished and exported."""
    from sac_distributed.jobs.learner_loop import LearnerLoop

    specs = env_loader.specs_for(ENV_NAME, rescale_actions=True)
    server = new_server()
    write_replay(server.localhost_client(), 256)
    root_dir = str(tmp_path_factory.mktemp("rescaled_root"))
    config = learner_config(
        root_dir, f"localhost:{server.port}", {"num_iterations": 40, "rescale_actions": True}
    )
    connection = Connection(config.client, "test learner", lambda: False)
    connection.open()
    strategy = strategy_lib.make_strategy(config.strategy)
    loop = LearnerLoop(config, specs, strategy, connection, Metrics(None), lambda: False)
    assert loop.run().stop_reason == "num_iterations reached"
    return server, root_dir, specs


def test_the_exported_policy_acts_in_the_envs_bounds(rescaled_run):
    server, root_dir, specs = rescaled_run
    exported = inspect_policy.load_policy(paths.policy_dir(root_dir, "greedy_policy"))
    spec = exported.action_spec
    assert (float(spec.minimum), float(spec.maximum)) == (-2.0, 2.0)

    snapshot = VariableContainer(server.localhost_client()).pull()
    unit = NumpyActorPolicy(specs.action.minimum, specs.action.maximum, specs.action.shape)
    unit.set_weights(snapshot.policy_weights, snapshot.normalization)
    env = env_loader.load_env(ENV_NAME, seed=5)
    time_step = env.reset()
    for _ in range(20):
        action = exported.action(time_step).action  # as sac-evaluate calls it
        expected = 2.0 * unit.action(add_batch(time_step.observation), greedy=True)[0]
        np.testing.assert_allclose(action, expected, rtol=1e-4, atol=1e-5)
        time_step = env.step(action)


def test_sac_evaluate_on_the_env_plays_the_evaluators_episodes(rescaled_run):
    server, root_dir, specs = rescaled_run
    assert os.path.isdir(paths.policy_dir(root_dir, "greedy_policy"))
    assert_exported_policy_plays_the_evaluators_episodes(server, root_dir, specs, 10, 7)


def test_the_flag_turns_it_on_for_a_preset():
    assert not hyperparams_for("HalfCheetah-v5").rescale_actions
    assert hyperparams_for("HalfCheetah-v5", {"rescale_actions": True}).rescale_actions
