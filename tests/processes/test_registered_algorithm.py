"""A third algorithm is one folder and one registry entry: tests/tiny_algorithm/,
registered with SAC_ALGORITHMS, with no edit to config/, the presets, the
checkpoint checks or the jobs.

In one process: the name is accepted, its option checks, preset adjustment and
strategy check are the entry's, and its learner trains and checkpoints under its
own key. Then through sac-launch: every process (server, actors, learner,
evaluator) takes --algorithm=tiny_sac and the run trains to its end.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from support.processes import DEADLINE_S, TINY_RUN_FLAGS, TINY_RUN_ITERATIONS
from support.repo import TESTS_DIR
from support.training import batches

from sac_distributed import config as config_lib
from sac_distributed import paths, run_info
from sac_distributed.algorithm import registry
from sac_distributed.algorithm import strategy as strategy_lib
from sac_distributed.errors import CheckpointError, ConfigError
from sac_distributed.results import read_results

ENTRY = "tiny_algorithm.config:ALGORITHM"
NAME = "tiny_sac"


@pytest.fixture
def tiny_registered(monkeypatch):
    monkeypatch.setenv(registry.ALGORITHMS_ENV, ENTRY)
    monkeypatch.syspath_prepend(TESTS_DIR)


def _hparams(**overrides):
    small = dict(
        batch_size=16,
        initial_collect_steps=16,
        replay_buffer_capacity=1000,
        actor_fc_layer_params=(8, 8),
        critic_joint_fc_layer_params=(8, 8),
    )
    return config_lib.hyperparams_for("Pendulum-v1", {**small, **overrides})


def test_the_name_and_its_checks_come_from_the_entry(tiny_registered):
    assert registry.names()[:2] == ["sac", "crossq"] and NAME in registry.names()
    hparams = _hparams(algorithm=NAME)
    assert hparams.algorithm == NAME and hparams.clip_policy_log_std  # its preset adjustment
    assert not _hparams().clip_policy_log_std  # SAC's preset, as it was
    with pytest.raises(ConfigError, match="tiny_sac has no prioritized replay"):
        _hparams(algorithm=NAME, prioritized_replay=True)
    with pytest.raises(ConfigError, match="tiny_sac runs one replica, got 'mirrored'"):
        config_lib.LearnerConfig("Pendulum-v1", hparams, "/tmp/unused", strategy="mirrored")
    with pytest.raises(ConfigError, match="ablates CrossQ's pieces, but algorithm is 'tiny_sac'"):
        _hparams(algorithm=NAME, crossq_ablations=("separate_passes",))


def test_without_the_entry_the_name_is_refused(monkeypatch):
    monkeypatch.delenv(registry.ALGORITHMS_ENV, raising=False)
    with pytest.raises(ConfigError, match="algorithm must be one of sac, crossq, got 'tiny_sac'"):
        _hparams(algorithm=NAME)


def test_its_learner_trains_and_checkpoints_under_its_own_key(tiny_registered, env_specs, tmp_path):
    hparams = _hparams(algorithm=NAME)
    strategy = strategy_lib.make_strategy("default")
    root = str(tmp_path)
    learner = registry.make_learner(env_specs, hparams, strategy, root, seed=0)
    assert not learner.supports_prioritized_replay
    losses = learner.step(batches(env_specs, size=hparams.batch_size), 3)
    assert np.all(np.isfinite(losses)) and learner.train_step_numpy == 3
    assert learner.save_checkpoint()
    names = [name for name, _ in tf.train.list_variables(learner.latest_checkpoint)]
    assert any(name.startswith("tiny_agent/") for name in names)
    # The generic checkpoint check names the learner that wrote it.
    with pytest.raises(
        CheckpointError, match="written by the TinySAC learner.*--algorithm=tiny_sac"
    ):
        registry.make_learner(env_specs, _hparams(), strategy, root, seed=0)
    resumed = registry.make_learner(env_specs, hparams, strategy, root, seed=1)
    assert resumed.train_step_numpy == 3
    for got, want in zip(resumed.policy_weights(), learner.policy_weights()):
        np.testing.assert_array_equal(got, want)


@pytest.mark.slow
def test_sac_launch_trains_the_registered_algorithm_with_real_processes(tmp_path):
    root = tmp_path / "tiny"
    env = dict(os.environ)
    env[registry.ALGORITHMS_ENV] = ENTRY
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [TESTS_DIR, env.get("PYTHONPATH")]))
    launched = subprocess.run(
        [
            sys.executable,
            "-m",
            "sac_distributed.bin.launch",
            f"--root_dir={root}",
            f"--algorithm={NAME}",
            *TINY_RUN_FLAGS,
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    out = launched.stdout + launched.stderr
    assert launched.returncode == 0, out[-4000:]
    info = run_info.read_run_info(str(root))
    assert info["hparams"]["algorithm"] == NAME
    assert info["hparams"]["clip_policy_log_std"] is True  # the entry's preset adjustment
    points = read_results(paths.results_path(str(root)))
    assert points and points[-1].train_step == TINY_RUN_ITERATIONS
    checkpoint = tf.train.latest_checkpoint(paths.checkpoint_dir(str(root)))
    assert checkpoint.endswith(f"-{TINY_RUN_ITERATIONS}")
    names = [name for name, _ in tf.train.list_variables(checkpoint)]
    assert any(name.startswith("tiny_agent/") for name in names)
    assert os.path.isdir(paths.policy_dir(str(root), "greedy_policy"))
