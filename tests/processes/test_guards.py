"""Start-up guards, each done for real with the binaries (issue 10).

* a second server on a served port (a Reverb server, or another program) is
  refused, naming what holds the port;
* a root_dir under a regular file is refused by every binary and the launcher
  in one line, before any connection or banner, with no traceback and no
  library start-up chatter above it;
* the evaluator needs only the variable container's address.
"""

import os
import socket

import pytest
import reverb
from support.processes import DEADLINE_S, error_lines, run
from support.training import ENV_NAME, learner_config, small_hparams

from sac_distributed import config as config_lib
from sac_distributed import replay
from sac_distributed.envs import loader as env_loader

pytestmark = pytest.mark.slow

# The flags that make a binary's tables match conftest's small servers.
SMALL_FLAGS = [
    f"--env_name={ENV_NAME}",
    "--initial_collect_steps=64",
    "--replay_buffer_capacity=2000",
    "--batch_size=32",
    "--actor_fc_layer_params=16,16",
    "--critic_joint_fc_layer_params=16,16",
    "--eval_interval=10",
    "--num_eval_episodes=1",
    "--samples_per_insert=0",
]


def _server_on(port: int, root: str) -> reverb.Server:
    config = config_lib.ServerConfig(ENV_NAME, small_hparams(), root, port=port)
    return reverb.Server(replay.make_tables(config, env_loader.specs_for(ENV_NAME)), port=port)


def test_second_server_on_a_port_served_by_reverb_is_refused(tmp_path, free_port):
    port = free_port()
    first = _server_on(port, str(tmp_path / "first"))
    try:
        result = run(
            "reverb_server",
            f"--root_dir={tmp_path / 'second'}",
            f"--port={port}",
            timeout_s=DEADLINE_S,
        )
        # The first server is untouched and still answers.
        assert replay.REPLAY_TABLE in first.localhost_client().server_info(timeout=60)
    finally:
        first.stop()
    assert result.returncode == 2, result.stderr[-3000:]
    assert error_lines(result.stderr) == [
        f"error: Port {port} is already in use by another Reverb server (tables "
        f"{replay.MAX_PRIORITY_TABLE}, {replay.REPLAY_TABLE}, {replay.VARIABLE_TABLE}). Stop "
        "it first, or start this "
        "server with another --port (0 picks a free one)."
    ], result.stderr[-3000:]
    assert "Started replay server" not in result.stderr
    assert not os.path.exists(tmp_path / "second" / "replay_checkpoints")


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_second_server_on_a_port_held_by_another_program_is_refused(tmp_path, free_port, host):
    port = free_port()
    with socket.socket() as listener:
        listener.bind((host, port))
        listener.listen()
        result = run("reverb_server", f"--root_dir={tmp_path}", f"--port={port}", timeout_s=600)
    assert result.returncode == 2, result.stderr[-3000:]
    lines = error_lines(result.stderr)
    assert len(lines) == 1, result.stderr[-3000:]
    assert f"Port {port} is already in use by another program (not a Reverb server)" in lines[0]


def test_launcher_refuses_a_port_in_use_before_its_banner(tmp_path, free_port):
    port = free_port()
    with socket.socket() as listener:
        listener.bind(("0.0.0.0", port))
        listener.listen()
        result = run("launch", f"--root_dir={tmp_path}", f"--port={port}", timeout_s=DEADLINE_S)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"error: Port {port} is already in use" in result.stderr
    assert "sac-launch:" not in result.stdout  # no banner, no job started
    assert not os.path.exists(tmp_path / "logs")


@pytest.fixture(scope="module")
def under_a_file(tmp_path_factory) -> str:
    """A root_dir path whose parent is a regular file."""
    base = tmp_path_factory.mktemp("file_parent")
    blocker = base / "a_file"
    blocker.write_text("not a directory")
    return str(blocker / "run")


@pytest.mark.parametrize("binary", ["reverb_server", "learner", "actor", "evaluator", "launch"])
def test_root_dir_under_a_file_is_one_line_before_anything_else(under_a_file, binary, free_port):
    # An unused port: a binary that connected before checking would wait, then
    # fail on the connection instead of the root_dir.
    address = f"localhost:{free_port()}"
    result = run(
        binary,
        f"--root_dir={under_a_file}",
        f"--replay_buffer_server_address={address}",
        f"--variable_container_server_address={address}",
        "--connect_timeout=600",
        *(["--port=0"] if binary in ("reverb_server", "launch") else []),
        timeout_s=DEADLINE_S,
    )
    blocker = os.path.dirname(under_a_file)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        f"error: root_dir {under_a_file} cannot be created: {blocker} is a file, not a "
        "directory. Pass a --root_dir whose parents are all directories (e.g. a new path "
        "under /tmp)."
    ], result.stderr[-3000:]  # the only line: no traceback, no TF or gym chatter
    assert result.stdout == ""  # the launcher printed no banner


def test_verbose_brings_library_start_up_messages_back(tmp_path):
    # An unknown env fails after the libraries are imported (a bad root_dir or flag
    # fails before, so it would show nothing either way).
    said = {}
    for verbose in ([], ["--verbose"]):
        root = tmp_path / f"run{len(verbose)}"
        result = run(
            "learner", f"--root_dir={root}", "--env_name=NoSuchEnv-v7", *verbose,
            timeout_s=DEADLINE_S,
        )  # fmt: skip
        assert result.returncode == 2, result.stderr[-3000:]
        assert "error: Unknown environment 'NoSuchEnv-v7'" in result.stderr
        said[bool(verbose)] = result.stderr
    assert "Gym has been unmaintained" not in said[False]
    assert "Gym has been unmaintained" in said[True]
    assert said[True].index("Gym has been") < said[True].index("error: Unknown environment")


def test_evaluator_needs_only_the_variable_container_address(new_server, new_learner, tmp_path):
    """With no --replay_buffer_server_address it reads the replay count from the
    variable container's server, not localhost:8008."""
    server = new_server()
    address = f"localhost:{server.port}"
    root = str(tmp_path / "root")
    learner = new_learner(learner_config(root, address), server)
    learner.publish(done=True)  # train_step 0, final: one evaluation, then it exits
    result = run(
        "evaluator",
        f"--root_dir={root}",
        f"--variable_container_server_address={address}",
        "--connect_timeout=600",
        *SMALL_FLAGS,
        timeout_s=DEADLINE_S,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "localhost:8008" not in result.stderr
    assert "Learner finished at train_step 0; evaluator done." in result.stderr
    with open(os.path.join(root, "eval", "results.csv")) as f:
        rows = f.read().splitlines()
    assert rows[1].startswith("0,0,"), rows  # train_step 0, 0 env steps in its replay
