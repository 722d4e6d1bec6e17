"""A restart with other network sizes is refused as such (issue 10), by the real
learner binary, before it connects or writes anything."""

import os

import pytest
from support.processes import DEADLINE_S, run
from support.training import learner_config, small_hparams

from sac_distributed import jobs, paths

pytestmark = pytest.mark.slow

SMALL_FLAGS = [
    "--env_name=Pendulum-v1",
    "--initial_collect_steps=64",
    "--replay_buffer_capacity=2000",
    "--batch_size=32",
    "--samples_per_insert=0",
    "--connect_timeout=600",
]
WIDER = ["--actor_fc_layer_params=32,32", "--critic_joint_fc_layer_params=32,32"]
SAME_SIZES = ["--actor_fc_layer_params=16,16", "--critic_joint_fc_layer_params=16,16"]


@pytest.fixture(scope="module")
def trained_root(new_server, write_replay, tmp_path_factory) -> str:
    """A root_dir with checkpoints of a 16,16 run (jobs.run_learner, in-process)."""
    server = new_server()
    try:
        write_replay(server.localhost_client(), 64)
        root = str(tmp_path_factory.mktemp("trained"))
        result = jobs.run_learner(learner_config(root, f"localhost:{server.port}"), lambda: False)
        assert result.train_step == 20
    finally:
        server.stop()
    return root


def _wider_server(new_server) -> str:
    wide = dict(actor_fc_layer_params=(32, 32), critic_joint_fc_layer_params=(32, 32))
    return f"localhost:{new_server(small_hparams(**wide)).port}"


def _learner(root: str, address: str, flags=tuple(WIDER)):
    return run(
        "learner",
        f"--root_dir={root}",
        f"--replay_buffer_server_address={address}",
        f"--variable_container_server_address={address}",
        *SMALL_FLAGS,
        *flags,
        timeout_s=DEADLINE_S,
    )


def test_other_network_sizes_are_named_and_nothing_is_written(trained_root, new_server):
    info_path = os.path.join(trained_root, paths.RUN_INFO_FILE)
    with open(info_path) as f:
        info_before = f.read()
    result = _learner(trained_root, _wider_server(new_server))
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        f"error: {trained_root} holds another run: it has actor_fc_layer_params=16,16, you "
        "asked 32,32; it has critic_joint_fc_layer_params=16,16, you asked 32,32. Use a new "
        "--root_dir for this run, or pass that run's values to resume it."
    ], result.stderr[-3000:]  # the only line on the screen: no TF warnings above it
    with open(info_path) as f:
        assert f.read() == info_before  # run_info.json keeps the checkpoint's settings


def test_another_critic_is_refused_by_name(trained_root, new_server):
    """A layer-normalized critic cannot resume a plain one's checkpoint (nor the reverse)."""
    server = new_server()
    try:
        result = _learner(
            trained_root, f"localhost:{server.port}", [*SAME_SIZES, "--critic_layer_norm"]
        )
    finally:
        server.stop()
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        f"error: {trained_root} holds another run: it has critic_layer_norm=false, you asked "
        "true. Use a new --root_dir for this run, or pass that run's values to resume it."
    ], result.stderr[-3000:]


def test_without_run_info_the_restore_says_other_network_sizes(trained_root, new_server, tmp_path):
    """An older run without run_info.json: the restore tells a size mismatch from damage."""
    root = str(tmp_path / "old_run")
    os.rename(trained_root, root)
    try:
        os.remove(os.path.join(root, paths.RUN_INFO_FILE))
        result = _learner(root, _wider_server(new_server))
    finally:
        os.rename(root, trained_root)
    assert result.returncode == 2, result.stderr[-3000:]
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"error: The checkpoint {root}/train/checkpoints/ckpt-20 is "), error
    assert "readable but was written with other network sizes" in error
    assert "could be read" not in result.stderr
