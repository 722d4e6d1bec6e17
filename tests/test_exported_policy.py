"""The exported greedy policy is the policy the training-time evaluator ran.

A learner trains on a real server and finishes (final push + final export).
Then the evaluator's path (the container's weights in NumPy) and sac-evaluate's
path (the greedy SavedModel through TF-Agents) play the same 20 seeded
episodes: every episode's return agrees, so a gap between the two tools'
averages can only come from different start states, i.e. noise.
"""

import os

import numpy as np
import pytest
from conftest import ENV_NAME, learner_config

from sac_distributed import paths
from sac_distributed.algorithm import specs as specs_lib
from sac_distributed.algorithm.policy import NumpyActorPolicy
from sac_distributed.jobs.evaluation import run_episodes
from sac_distributed.replay.variables import VariableContainer
from sac_distributed.tools import inspect_policy

EPISODES = 20
SEED = 123


@pytest.fixture(scope="module")
def finished_run(new_server, new_learner, write_replay, tmp_path_factory):
    server = new_server()
    write_replay(server.localhost_client(), 256)
    root_dir = str(tmp_path_factory.mktemp("exported_root"))
    config = learner_config(root_dir, f"localhost:{server.port}", {"num_iterations": 40})
    result = new_learner(config, server).run()
    assert result.stop_reason == "num_iterations reached"
    return server, root_dir


def test_saved_greedy_policy_plays_the_evaluators_episodes(finished_run, env_specs):
    server, root_dir = finished_run
    snapshot = VariableContainer(server.localhost_client()).pull()
    assert snapshot.learner_done and snapshot.train_step == 40

    spec = env_specs.action
    numpy_policy = NumpyActorPolicy(spec.minimum, spec.maximum, spec.shape)
    numpy_policy.set_weights(snapshot.policy_weights, snapshot.normalization)
    evaluator_returns, _ = run_episodes(specs_lib.load_env(ENV_NAME, SEED), numpy_policy, EPISODES)

    report = inspect_policy.evaluate(
        os.path.join(root_dir, paths.POLICIES_DIR, "greedy_policy"),
        EPISODES,
        env_name=ENV_NAME,
        seed=SEED,
    )
    exported_returns = np.asarray(report.stats.returns)
    # Same start states, same deterministic actions up to float32 rounding.
    np.testing.assert_allclose(exported_returns, evaluator_returns, rtol=1e-3, atol=1e-2)
    # And the episodes differ from one another: the agreement is not trivial.
    assert np.std(exported_returns) > 1.0, exported_returns


def test_a_different_seed_gives_other_start_states_and_other_returns(finished_run):
    _, root_dir = finished_run
    policy_dir = os.path.join(root_dir, paths.POLICIES_DIR, "greedy_policy")
    first = inspect_policy.evaluate(policy_dir, 5, env_name=ENV_NAME, seed=SEED)
    other = inspect_policy.evaluate(policy_dir, 5, env_name=ENV_NAME, seed=SEED + 1)
    assert first.stats.returns != other.stats.returns
