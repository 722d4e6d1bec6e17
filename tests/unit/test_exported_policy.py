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
from support.training import (
    ENV_NAME,
    assert_exported_policy_plays_the_evaluators_episodes,
    learner_config,
)

from sac_distributed import paths
from sac_distributed.envs import loader as env_loader
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

    assert_exported_policy_plays_the_evaluators_episodes(
        server, root_dir, env_specs, EPISODES, SEED
    )


def _evaluate_seeing_start_states(monkeypatch, policy_dir: str, seed: int):
    """sac-evaluate's episodes with `seed`: (the start state of each, the returns)."""
    starts = []
    load_env = env_loader.load_env

    def load_env_recording_resets(*args, **kwargs):
        env = load_env(*args, **kwargs)
        reset = env.reset

        def recorded_reset():
            time_step = reset()
            starts.append(np.array(time_step.observation))
            return time_step

        env.reset = recorded_reset
        return env

    with monkeypatch.context() as patch:
        patch.setattr(env_loader, "load_env", load_env_recording_resets)
        report = inspect_policy.evaluate(policy_dir, 5, env_name=ENV_NAME, seed=seed)
    assert len(starts) == 5, "evaluate did not reset the environment once per episode"
    return np.stack(starts), np.asarray(report.stats.returns)


def test_a_different_seed_gives_other_start_states_and_other_returns(finished_run, monkeypatch):
    _, root_dir = finished_run
    policy_dir = os.path.join(root_dir, paths.POLICIES_DIR, "greedy_policy")
    starts, returns = _evaluate_seeing_start_states(monkeypatch, policy_dir, SEED)
    again, returns_again = _evaluate_seeing_start_states(monkeypatch, policy_dir, SEED)
    other, other_returns = _evaluate_seeing_start_states(monkeypatch, policy_dir, SEED + 1)
    # The seed decides the episodes: the same seed plays them again...
    np.testing.assert_array_equal(again, starts)
    np.testing.assert_allclose(returns_again, returns, rtol=1e-5)
    # ...and another seed starts every episode elsewhere, with another return.
    for episode, (start, other_start) in enumerate(zip(starts, other)):
        assert not np.allclose(start, other_start), (episode, start, other_start)
    assert not np.any(np.isclose(returns, other_returns)), (returns, other_returns)
