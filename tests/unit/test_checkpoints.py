"""Learner checkpoints: damaged ones are skipped (and said so), failed writes never load."""

import logging
import os
import shutil

import numpy as np
import pytest
from support.training import learner_config

from sac_distributed import paths
from sac_distributed.errors import CheckpointError


def _ckpt_dir(root_dir: str) -> str:
    return os.path.join(root_dir, paths.CHECKPOINT_DIR)


@pytest.fixture(scope="module")
def checkpoints_template(new_server, new_learner, tmp_path_factory):
    """A root_dir whose checkpoint directory holds ckpt-10 and ckpt-20 with different
    weights, written once per module by a learner of `learner_config`'s settings;
    returns (that root_dir, the policy weights at each step). Tests copy it."""
    server = new_server()
    root_dir = str(tmp_path_factory.mktemp("checkpoints_template"))
    loop = new_learner(learner_config(root_dir, f"localhost:{server.port}"), server)
    weights = {}
    for step in (10, 20):
        loop.learner.train_step.assign(step)
        for variable in loop.learner.agent.policy.variables():
            variable.assign(np.full(variable.shape, step / 100.0, variable.dtype.as_numpy_dtype))
        assert loop.learner.save_checkpoint()
        weights[step] = loop.learner.policy_weights()
    server.stop()
    return root_dir, weights


@pytest.fixture
def two_checkpoints(checkpoints_template, make_learner_config):
    """This test's root_dir with a copy of the template's (ckpt-10 and ckpt-20)."""
    template, weights = checkpoints_template
    config = make_learner_config()
    shutil.copytree(template, config.root_dir, dirs_exist_ok=True)
    return config, weights


def _corrupt(prefix: str) -> None:
    """Truncates a checkpoint's data file to half its size."""
    data = prefix + ".data-00000-of-00001"
    size = os.path.getsize(data)
    with open(data, "r+b") as f:
        f.truncate(size // 2)


def _restored(make_learner, config, caplog):
    caplog.clear()
    loop = make_learner(config)
    return loop.step, loop.learner.policy_weights(), caplog.text


def test_restart_restores_the_latest_checkpoint(two_checkpoints, make_learner, caplog):
    config, weights = two_checkpoints
    caplog.set_level(logging.INFO, logger="absl")
    step, restored, log = _restored(make_learner, config, caplog)
    assert step == 20
    np.testing.assert_array_equal(restored[0], weights[20][0])
    assert "ckpt-20 (train_step=20)" in log


def test_a_corrupt_latest_checkpoint_falls_back_to_the_previous_one(
    two_checkpoints, make_learner, caplog
):
    config, weights = two_checkpoints
    _corrupt(os.path.join(_ckpt_dir(config.root_dir), "ckpt-20"))
    caplog.set_level(logging.INFO, logger="absl")
    step, restored, log = _restored(make_learner, config, caplog)
    assert step == 10
    np.testing.assert_array_equal(restored[0], weights[10][0])
    assert "ckpt-20 is unreadable" in log
    assert "Fell back to" in log and "ckpt-10" in log


def test_no_readable_checkpoint_is_a_clear_error(two_checkpoints, make_learner):
    config, _ = two_checkpoints
    for step in (10, 20):
        _corrupt(os.path.join(_ckpt_dir(config.root_dir), f"ckpt-{step}"))
    with pytest.raises(CheckpointError) as error:
        make_learner(config)
    message = str(error.value)
    assert "ckpt-10" in message and "ckpt-20" in message
    assert "Move the directory aside" in message


def test_a_damaged_index_file_does_not_hide_the_checkpoints(two_checkpoints, make_learner):
    config, _ = two_checkpoints
    state = os.path.join(_ckpt_dir(config.root_dir), "checkpoint")
    with open(state, "w") as f:
        f.write("model_checkpoint_path: {{{ not a proto")
    loop = make_learner(config)
    assert loop.step == 20  # found by scanning the directory
    loop.learner.train_step.assign(30)
    assert loop.learner.save_checkpoint()
    assert make_learner(config).step == 30  # and the index is whole again


def test_a_half_written_checkpoint_is_never_loaded(two_checkpoints, make_learner, caplog):
    config, _ = two_checkpoints
    directory = _ckpt_dir(config.root_dir)
    # A write that died before TensorFlow wrote the index: data only.
    with open(os.path.join(directory, "ckpt-30.data-00000-of-00001"), "wb") as f:
        f.write(b"\0" * 100)
    # And one whose index exists but whose data is garbage.
    with open(os.path.join(directory, "ckpt-40.index"), "wb") as f:
        f.write(b"garbage")
    caplog.set_level(logging.INFO, logger="absl")
    step, _, log = _restored(make_learner, config, caplog)
    assert step == 20
    assert "ckpt-40 is unreadable" in log
    assert "ckpt-30" not in log.split("Restored")[-1]


def test_a_failed_checkpoint_write_keeps_the_previous_one(two_checkpoints, make_learner, caplog):
    config, _ = two_checkpoints
    caplog.set_level(logging.INFO, logger="absl")
    loop = make_learner(config)
    directory = _ckpt_dir(config.root_dir)
    backup = directory + ".bak"
    shutil.move(directory, backup)
    with open(directory, "w") as f:  # the directory is now a file: every write fails
        f.write("in the way")
    loop.learner.train_step.assign(30)
    assert loop.learner.save_checkpoint() is False
    assert "Could not write the checkpoint at train_step 30" in caplog.text
    os.remove(directory)
    shutil.move(backup, directory)
    step, _, _ = _restored(make_learner, config, caplog)
    assert step == 20
