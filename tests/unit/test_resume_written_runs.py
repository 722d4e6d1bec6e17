"""Run directories written by the learners at commit d88b097 resume unchanged.

tests/data/runs_d88b097/{sac,crossq} each hold what a learner leaves in its
root_dir: run_info.json (written as `jobs.run_learner` writes it) and a checkpoint
after 7 updates of tiny networks on Pendulum-v1 (SAC with observation
normalization and policy averaging, so every tracked object is there), and
expected.npz, the acting variables the learner published at that step. Today's
learner must restore every object under the names it was saved with, act with
the same weights and train on; run_info.json's fields must still be the ones
Hyperparams and the env loader write, but for hyperparameters added since, whose
defaults are the values those runs had.
"""

import dataclasses
import json
import os
import shutil

import numpy as np
import pytest
from support.repo import DATA_DIR
from support.training import batches

from sac_distributed import config as config_lib
from sac_distributed import paths, run_info
from sac_distributed.algorithm import registry
from sac_distributed.algorithm import strategy as strategy_lib
from sac_distributed.envs import sources as env_sources

RUNS = os.path.join(DATA_DIR, "runs_d88b097")
STEPS_WRITTEN = 7


def _copied_run(algorithm: str, tmp_path) -> str:
    root = str(tmp_path / algorithm)
    shutil.copytree(os.path.join(RUNS, algorithm), root)
    return root


def _recorded_hparams(root: str) -> config_lib.Hyperparams:
    return config_lib.Hyperparams(**run_info.read_run_info(root)["hparams"])


@pytest.mark.parametrize("algorithm", ["sac", "crossq"])
def test_the_learner_restores_and_trains_on_from_the_written_checkpoint(
    algorithm, tmp_path, env_specs
):
    root = _copied_run(algorithm, tmp_path)
    info = run_info.read_run_info(root)
    hparams = _recorded_hparams(root)
    assert hparams.algorithm == algorithm
    # The same run to every job's check (env, sizes, algorithm, K, normalization).
    run_info.check_same_run(root, info["env_name"], hparams, info["env_kwargs"])

    strategy = strategy_lib.make_strategy("default")
    learner = registry.make_learner(env_specs, hparams, strategy, root, seed=1)
    expected = np.load(os.path.join(root, "expected.npz"))
    variables = learner.variables()
    assert variables.train_step == int(expected["train_step"]) == STEPS_WRITTEN
    assert len(variables.policy_weights) == len([k for k in expected.files if k[0] == "w"])
    # CrossQ's acting weights are computed (BatchRenorm folded into the kernels), and
    # float32 arithmetic may round differently on another CPU's SIMD units: equal to
    # float32 rounding, where seed 1's fresh weights would differ by ~0.1.
    for i, weight in enumerate(variables.policy_weights):
        np.testing.assert_allclose(weight, expected[f"w{i}"], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(variables.normalization.mean, expected["mean"])
    np.testing.assert_array_equal(variables.normalization.std, expected["std"])
    assert variables.normalization.clip == float(expected["clip"])
    if algorithm == "sac":
        assert variables.normalization.enabled  # the normalizer's statistics came back

    losses = learner.step(batches(env_specs, size=hparams.batch_size), 2)
    assert np.all(np.isfinite(losses))
    assert learner.train_step_numpy == STEPS_WRITTEN + 2
    assert learner.save_checkpoint()
    assert learner.latest_checkpoint.endswith(f"{paths.CHECKPOINT_PREFIX}-{STEPS_WRITTEN + 2}")


# Hyperparameters added after d88b097, each with the value those runs trained with,
# which must be its default, so that a run recorded without it resumes unchanged.
ADDED_SINCE = {
    "target_entropy_per_action_dim": -0.5,
    "frame_stack": 3,
    "action_repeat": 1,
    "initial_alpha": 1.0,
    "conv_dtype": "float32",
    "rescale_actions": False,
}


@pytest.mark.parametrize("algorithm", ["sac", "crossq"])
def test_run_info_holds_the_fields_written_today(algorithm):
    with open(os.path.join(RUNS, algorithm, paths.RUN_INFO_FILE)) as f:
        info = json.load(f)
    today = {f.name: f.default for f in dataclasses.fields(config_lib.Hyperparams)}
    assert set(info["hparams"]) == set(today) - set(ADDED_SINCE)
    assert {name: today[name] for name in ADDED_SINCE} == ADDED_SINCE
    written = {"env_name", "hparams", *env_sources.run_info_fields(info["env_name"], "")}
    assert set(info) == written
