"""The CrossQ learner as the learner job runs it: a real server, the container, the exports.

A LearnerLoop with --algorithm=crossq trains on a real Reverb server and
finishes (final push + final export). Then the evaluator's path (the
container's folded weights in NumPy) and sac-evaluate's path (the greedy
SavedModel, whose actor runs its BatchRenorm layers in inference mode) play
the same 20 seeded episodes and must agree, as tests/unit/test_exported_policy.py
holds for SAC.
"""

import json
import os

import numpy as np
import pytest
from support.training import (
    ENV_NAME,
    assert_exported_policy_plays_the_evaluators_episodes,
    learner_config,
    small_hparams,
)

from sac_distributed import paths, run_info
from sac_distributed.algorithm.crossq import networks as crossq_networks
from sac_distributed.algorithm.crossq.learner import CrossQLearner
from sac_distributed.errors import ConfigError
from sac_distributed.replay.variables import VariableContainer

EPISODES = 20
SEED = 123
STEPS = 60
# hyperparams_for (through small_hparams) adds CrossQ's defaults: its learning rates
# and the actor's log std clipped, as --algorithm=crossq gives.
CROSSQ = {"algorithm": "crossq"}


@pytest.fixture(scope="module")
def finished_crossq_run(new_server, new_learner, write_replay, tmp_path_factory):
    server = new_server(small_hparams(**CROSSQ))
    write_replay(server.localhost_client(), 256)
    root_dir = str(tmp_path_factory.mktemp("crossq_root"))
    config = learner_config(
        root_dir, f"localhost:{server.port}", {**CROSSQ, "num_iterations": STEPS}
    )
    loop = new_learner(config, server)
    result = loop.run()
    assert result.stop_reason == "num_iterations reached"
    return server, root_dir, loop.learner


def test_the_job_runs_the_crossq_learner(finished_crossq_run):
    _, _, learner = finished_crossq_run
    assert isinstance(learner, CrossQLearner)
    assert learner.train_step_numpy == STEPS
    assert learner.agent.actor.input_norm.steps.numpy() == STEPS // 3


def test_the_container_holds_the_inference_mode_actor(finished_crossq_run):
    server, _, learner = finished_crossq_run
    snapshot = VariableContainer(server.localhost_client()).pull()
    assert snapshot.learner_done and snapshot.train_step == STEPS
    expected = crossq_networks.fold_actor_weights(learner.agent.actor)
    assert len(snapshot.policy_weights) == len(expected)
    for got, want in zip(snapshot.policy_weights, expected):
        np.testing.assert_array_equal(got, want)
    # The running statistics moved, so the folded kernel is not the raw one.
    raw_first_kernel = learner.agent.actor.hidden[0][0].kernel.numpy()
    assert not np.allclose(snapshot.policy_weights[0], raw_first_kernel, atol=1e-3)


def test_saved_greedy_policy_plays_the_evaluators_episodes(finished_crossq_run, env_specs):
    server, root_dir, _ = finished_crossq_run
    assert_exported_policy_plays_the_evaluators_episodes(
        server, root_dir, env_specs, EPISODES, SEED
    )


def test_resuming_with_the_other_algorithm_is_a_config_error(tmp_path):
    """run_info.json says which learner wrote the checkpoints; the other one is refused."""
    root = str(tmp_path)
    checkpoint_dir = paths.checkpoint_dir(root)
    os.makedirs(checkpoint_dir)
    open(os.path.join(checkpoint_dir, f"{paths.CHECKPOINT_PREFIX}-10.index"), "w").close()
    recorded = {"env_name": ENV_NAME, "hparams": {"algorithm": "sac"}}
    with open(paths.run_info_path(root), "w") as f:
        json.dump(recorded, f)
    with pytest.raises(ConfigError, match="algorithm=sac, you asked crossq"):
        run_info.check_same_run(root, ENV_NAME, small_hparams(**CROSSQ))
