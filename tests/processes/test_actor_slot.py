"""One running actor per task index: actors given one index are refused, and
replicas that all run one command (--claim_task) write distinct collect/actor_<task>/."""

import os
import socket

import pytest
from support.processes import DEADLINE_S, error_lines, run
from support.training import ENV_NAME, pick_free_port, small_hparams

from sac_distributed import config as config_lib
from sac_distributed import jobs, paths
from sac_distributed.errors import ConfigError, RunOwnedError
from sac_distributed.jobs.actor_slot import ActorSlot
from sac_distributed.results import EpisodeLog, read_episodes

EPISODE = 200  # Pendulum-v1's time limit


def test_a_held_index_is_refused_naming_its_holder(root_dir):
    with ActorSlot.take(root_dir, 3, claim=False):
        with pytest.raises(RunOwnedError) as refused:
            ActorSlot.take(root_dir, 3, claim=False)
    message = str(refused.value)
    assert f"pid {os.getpid()} on host {socket.gethostname()}" in message
    assert "runs as task 3 of this root_dir" in message
    assert "--claim_task" in message
    ActorSlot.take(root_dir, 3, claim=False).release()  # free again once released


def test_claiming_takes_the_lowest_index_no_running_actor_holds(root_dir):
    first = ActorSlot.take(root_dir, 0, claim=True)
    second = ActorSlot.take(root_dir, 0, claim=True)
    assert (first.task, second.task) == (0, 1)
    first.release()  # e.g. that replica's process died
    with ActorSlot.take(root_dir, 0, claim=True) as again:
        assert again.task == 0
    second.release()


def test_claim_task_beside_a_task_is_refused():
    with pytest.raises(ConfigError, match="--claim_task picks the actor's index itself"):
        config_lib.ActorConfig(ENV_NAME, small_hparams(), "/tmp/unused", task=2, claim_task=True)


def test_a_claiming_actor_writes_the_free_index_files(root_dir, server_address):
    """Index 0 is held by a running actor, so the claiming one collects as task 1."""
    config = config_lib.ActorConfig(
        ENV_NAME,
        small_hparams(),
        root_dir,
        client=config_lib.ClientConfig(server_address, server_address, connect_timeout_s=10.0),
        max_env_steps=EPISODE + 50,
        claim_task=True,
    )
    with ActorSlot.take(root_dir, 0, claim=False):
        jobs.run_actor(config, lambda: False)
    assert not os.path.exists(paths.episodes_path(root_dir, 0))
    episodes = read_episodes(paths.episodes_path(root_dir, 1))
    assert [e.actor_env_steps for e in episodes] == [EPISODE]


def test_the_actor_binary_refuses_a_held_task_and_leaves_its_episodes(root_dir):
    path = paths.episodes_path(root_dir, 0)
    log = EpisodeLog(path)
    log.append(EPISODE, -1234.5, EPISODE)
    log.close()
    with open(path) as f:
        before = f.read()
    address = f"localhost:{pick_free_port()}"  # refused before it connects anywhere
    with ActorSlot.take(root_dir, 0, claim=False):
        result = run(
            "actor",
            f"--env_name={ENV_NAME}",
            f"--root_dir={root_dir}",
            f"--replay_buffer_server_address={address}",
            f"--variable_container_server_address={address}",
            "--connect_timeout=5",
            timeout_s=DEADLINE_S,
        )
    assert result.returncode == 2, result.stderr[-3000:]
    [error] = error_lines(result.stderr)
    assert f"Another actor (pid {os.getpid()} on host {socket.gethostname()})" in error
    assert "Give this actor another --task, or pass --claim_task" in error
    with open(path) as f:
        assert f.read() == before
