"""sac-status: table sizes, rates and learner progress from a real Reverb server."""

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import reverb
from support import processes
from support.training import ENV_NAME, small_hparams

from sac_distributed import replay
from sac_distributed.config import ServerConfig
from sac_distributed.errors import ServerUnreachableError
from sac_distributed.replay.variables import VariableContainer
from sac_distributed.tools.status import (
    StatusMonitor,
    TableCounts,
    actor_dirs,
    compare,
    format_status,
)

CAPACITY = small_hparams().replay_capacity_items


def _push_weights(client: reverb.Client, train_step: int, done: bool = False) -> None:
    """Pushes zero weights of the server's own variable signature."""
    signature = replay.table_info(client, replay.VARIABLE_TABLE).signature
    weights = [np.zeros(s.shape, s.dtype.as_numpy_dtype) for s in signature["policy_variables"]]
    container = VariableContainer(client)
    try:
        container.push(weights, train_step, learner_done=done)
    finally:
        container.close()


def _make_actor_dirs(root: str, names) -> None:
    for name in names:
        path = os.path.join(root, "collect", name)
        os.makedirs(path)
        with open(os.path.join(path, "events.out.tfevents.0"), "w") as f:
            f.write("x")


def _status_cli(*flags, timeout_s: float = processes.DEADLINE_S) -> subprocess.CompletedProcess:
    return processes.run("status", *flags, timeout_s=timeout_s)


def test_poll_reports_sizes_rates_and_learner_progress(server_address, client, fill_replay):
    fill_replay(64)
    monitor = StatusMonitor(server_address, connect_timeout_s=5)
    first = monitor.poll()
    assert first.snapshot.replay.size == 64
    assert first.snapshot.replay.inserts == 64
    assert first.snapshot.train_step is None
    assert first.inserts_per_s is None  # rates need a previous read

    _push_weights(client, train_step=7)
    fill_replay(32, seed=1)
    second = monitor.poll()
    s1, s2 = first.snapshot, second.snapshot
    assert s2.replay.size == 96 and s2.replay.max_size == CAPACITY
    assert (s2.train_step, s2.learner_done) == (7, False)
    assert s2.variables.size == 1 and s2.variables.inserts == 1
    elapsed = s2.read_at - s1.read_at
    assert second.inserts_per_s == pytest.approx(32 / elapsed)
    assert second.samples_per_s == pytest.approx(0.0)  # nothing sampled the replay
    assert second.train_steps_per_s is None  # no train_step at the first read

    _push_weights(client, train_step=27, done=True)
    third = monitor.poll()
    assert third.train_steps_per_s == pytest.approx(20 / (third.snapshot.read_at - s2.read_at))
    text = format_status(third, server_address)
    assert f"uniform_table: 96 / {CAPACITY} items" in text
    assert "train_step 27 (done)" in text
    assert "actors seen" not in text  # no root_dir given


def test_items_of_several_transitions_are_reported_in_transitions_too(new_server, write_replay):
    server = new_server(small_hparams(transitions_per_item=4))
    try:
        write_replay(server.localhost_client(), 64)
        monitor = StatusMonitor(f"localhost:{server.port}", connect_timeout_s=5)
        first = monitor.poll()
        write_replay(server.localhost_client(), 32, seed=1)
        second = monitor.poll()
    finally:
        server.stop()
    assert second.snapshot.replay.transitions_per_item == 4
    assert second.snapshot.replay.size == 24  # (64 + 32) / 4 items
    text = format_status(second, "x:1")
    assert f"24 / {CAPACITY // 4} items of 4 transitions (96 transitions)" in text
    rate = 8 / (second.snapshot.read_at - first.snapshot.read_at)
    assert f"inserts {rate:.1f} items/s ({4 * rate:.1f} transitions/s)" in text


def test_rates_are_withheld_when_counters_restart(server_address, fill_replay):
    fill_replay(64)
    monitor = StatusMonitor(server_address, connect_timeout_s=5)
    before = monitor.poll().snapshot
    later = dataclasses.replace(before, read_at=before.read_at + 1.0)
    assert compare(before, later).inserts_per_s == 0.0
    (shard,) = later.shards
    restarted = dataclasses.replace(
        later, shards=(dataclasses.replace(shard, replay=TableCounts(0, CAPACITY, 0, 0)),)
    )
    assert compare(before, restarted).inserts_per_s is None


def _shard_servers(env_specs, tmp_path, num_shards: int = 2):
    """`num_shards` in-process servers, each with its shard's tables, in shard order."""
    servers = []
    for shard in range(num_shards):
        config = ServerConfig(
            ENV_NAME,
            small_hparams(),
            str(tmp_path / f"shard{shard}"),
            port=0,
            num_replay_shards=num_shards,
            replay_shard=shard,
        )
        servers.append(reverb.Server(replay.make_tables(config, env_specs), port=None))
    return servers


def test_every_shard_is_shown_and_a_stopped_one_is_down(env_specs, write_replay, tmp_path):
    servers = _shard_servers(env_specs, tmp_path)
    addresses = [f"localhost:{s.port}" for s in servers]
    try:
        write_replay(servers[0].localhost_client(), 40)
        write_replay(servers[1].localhost_client(), 24, seed=1)
        _push_weights(servers[0].localhost_client(), train_step=5)
        monitor = StatusMonitor(",".join(addresses), connect_timeout_s=2)
        first = monitor.poll()
        write_replay(servers[1].localhost_client(), 8, seed=2)
        second = monitor.poll()
        servers[1].stop()
        third = monitor.poll()
    finally:
        for server in servers:
            server.stop()
    shards = second.snapshot.shards
    assert [s.address for s in shards] == addresses
    assert [s.replay.size for s in shards] == [40, 32] and all(s.up for s in shards)
    assert second.snapshot.replay.size == 72  # the total of both shards
    assert second.snapshot.replay.max_size == sum(s.replay.max_size for s in shards)
    assert second.snapshot.train_step == 5  # from the first shard's variable container
    elapsed = second.snapshot.read_at - first.snapshot.read_at
    assert second.shard_rates[0].inserts_per_s == pytest.approx(0.0)
    assert second.shard_rates[1].inserts_per_s == pytest.approx(8 / elapsed)
    assert second.inserts_per_s == pytest.approx(8 / elapsed)
    text = format_status(second, ",".join(addresses))
    assert "(2 replay shards, 2 up)" in text
    assert "uniform_table (total of 2 shards up): 72 / " in text
    assert f"shard 1 {addresses[1]}: up, 32 / " in text and "train_step 5" in text

    down = third.snapshot.shards[1]
    assert not down.up and down.error
    assert third.snapshot.shards[0].up and third.snapshot.replay.size == 40
    assert third.shard_rates[1].inserts_per_s is None
    text = format_status(third, ",".join(addresses))
    assert "(2 replay shards, 1 up)" in text
    assert f"shard 1 {addresses[1]}: DOWN (" in text
    assert "train_step 5 (training)" in text


def test_status_fails_only_when_no_shard_answers(env_specs, free_port, tmp_path):
    (server,) = _shard_servers(env_specs, tmp_path, num_shards=1)
    nobody = f"localhost:{free_port()}"
    try:
        monitor = StatusMonitor(f"localhost:{server.port},{nobody}", connect_timeout_s=1)
        status = monitor.poll()
        assert [s.up for s in status.snapshot.shards] == [True, False]
        assert status.snapshot.shards[1].error == "no answer within 1 s"
        assert f"shard 1 {nobody}: DOWN (no answer within 1 s)" in format_status(status, "x")
    finally:
        server.stop()
    with pytest.raises(ServerUnreachableError, match=nobody):
        StatusMonitor(f"{nobody},localhost:{free_port()}", connect_timeout_s=1)


def test_actors_seen_counts_distinct_actor_dirs(tmp_path):
    root = str(tmp_path)
    _make_actor_dirs(root, ["actor_0", "actor_3"])
    os.makedirs(os.path.join(root, "collect", "not_an_actor"))
    with open(os.path.join(root, "collect", "actor_9"), "w") as f:
        f.write("a file, not a dir")
    found = actor_dirs(root, now=time.time() + 100)
    assert [a.name for a in found] == ["actor_0", "actor_3"]
    assert all(99 <= a.seconds_since_write <= 200 for a in found)
    assert actor_dirs(str(tmp_path / "missing")) == []


def test_lost_server_raises_then_reconnects_on_the_same_port(env_specs, free_port, tmp_path):
    port = free_port()
    config = ServerConfig(ENV_NAME, small_hparams(), str(tmp_path), port=port)
    server = reverb.Server(replay.make_tables(config, env_specs), port=port)
    try:
        monitor = StatusMonitor(f"localhost:{port}", connect_timeout_s=2)
        monitor.poll()
    finally:
        server.stop()
    with pytest.raises(ServerUnreachableError, match=f"localhost:{port}"):
        monitor.poll()
    server = reverb.Server(replay.make_tables(config, env_specs), port=port)
    try:
        status = monitor.poll()
        assert status.snapshot.replay.size == 0
        assert status.inserts_per_s is None  # a new server: no rates across the restart
    finally:
        server.stop()


@pytest.mark.slow
def test_binary_once_prints_one_snapshot(server_address, client, fill_replay, tmp_path):
    fill_replay(64)
    _push_weights(client, train_step=40)
    root = str(tmp_path / "root")
    _make_actor_dirs(root, ["actor_0", "actor_1"])
    result = _status_cli(
        f"--server={server_address}", "--once", "--interval=0.5", f"--root_dir={root}"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert out.count("Reverb server") == 1
    assert f"uniform_table: 64 / {CAPACITY} items, 64 inserted, 0 sampled" in out
    assert "rates: inserts 0.0 items/s, samples 0.0 items/s" in out
    assert "learner: train_step 40 (training), 0.0 steps/s" in out
    assert "actors seen: 2" in out and "actor_1: last write" in out


@pytest.mark.slow
def test_binary_shows_a_down_shard_and_exits_0(server_address, fill_replay, free_port):
    fill_replay(64)
    down = f"localhost:{free_port()}"
    result = _status_cli(
        # 5 s: the live shard must answer within it even on a busy machine.
        f"--server={server_address},{down}",
        "--once",
        "--interval=0.5",
        "--connect_timeout=5",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert f"Reverb servers {server_address},{down} (2 replay shards, 1 up)" in out
    assert f"shard 0 {server_address}: up, 64 / {CAPACITY} items" in out
    assert f"shard 1 {down}: DOWN (no answer within 5 s)" in out


@pytest.mark.slow
def test_binary_unreachable_server_exits_2(free_port):
    address = f"localhost:{free_port()}"
    result = _status_cli(f"--server={address}", "--once", "--connect_timeout=1")
    assert result.returncode == 2, result.stderr[-3000:]
    assert f"error: No Reverb server answered at {address}" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_binary_rejects_bad_address():
    result = _status_cli("--server=nohostport", "--once")
    assert result.returncode == 2
    assert "is not a host:port address" in result.stderr


@pytest.mark.slow
def test_binary_refreshes_until_ctrl_c(reverb_server, server_address, fill_replay, tmp_path):
    fill_replay(64)
    log = str(tmp_path / "status.log")
    flags = [f"--server={server_address}", "--interval=0.3", "--connect_timeout=1"]
    proc = processes.start("status", flags, log)
    try:
        processes.wait_for_log(
            log, r"(?s)(uniform_table: 64 .*){2}", processes.DEADLINE_S, {"sac-status": proc}
        )
        fill_replay(32, seed=1)
        processes.wait_for_log(
            log, r"uniform_table: 96 ", processes.DEADLINE_S, {"sac-status": proc}
        )
        reverb_server.stop()
        unreachable = f"Reverb server {server_address}: unreachable, retrying"
        processes.wait_for_log(
            log, f"(?s)({unreachable}.*){{2}}", processes.DEADLINE_S, {"sac-status": proc}
        )
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=processes.DEADLINE_S) == 0
    finally:
        processes.kill_all({"sac-status": proc})
    assert "Traceback" not in processes.read(log)


# Run in a fresh interpreter where `import tensorflow` (and so `import reverb`) fails.
_WITHOUT_TENSORFLOW = """
import sys
sys.modules["tensorflow"] = None
sys.modules["reverb"] = None
"""


def test_tools_import_without_tensorflow():
    """sac-status, sac-plot and sac-launch get the run-dir layout from `paths`, not the loops;
    sac-evaluate loads TensorFlow only with the policy, so its --help is instant."""
    code = _WITHOUT_TENSORFLOW + textwrap.dedent(
        """
        import sac_distributed.bin.launch, sac_distributed.bin.plot, sac_distributed.bin.status
        import sac_distributed.paths, sac_distributed.tools.plotting, sac_distributed.tools.status
        import sac_distributed.bin.evaluate, sac_distributed.tools.inspect_policy
        print("imported")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=processes.DEADLINE_S
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "imported" in result.stdout


def test_binary_starts_and_checks_its_flags_without_tensorflow():
    """A flag error is reported by sac-status without TensorFlow being importable."""
    code = _WITHOUT_TENSORFLOW + textwrap.dedent(
        """
        sys.argv = ["sac-status", "--server=nohostport", "--once"]
        from sac_distributed.bin import status
        status.run()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=processes.DEADLINE_S
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "is not a host:port address" in result.stderr
    assert "Traceback" not in result.stderr


# --- a run's files, without a server ----------------------------------------------


def test_binary_without_server_or_root_dir_says_what_to_pass():
    result = _status_cli("--once")
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.splitlines() == [
        "error: sac-status needs --server=host:port (a running job's Reverb server) or "
        "--root_dir=DIR (a run's files, finished or not)."
    ]


def test_binary_on_a_root_dir_without_a_run_says_so(tmp_path):
    result = _status_cli(f"--root_dir={tmp_path}")
    assert result.returncode == 2, result.stderr[-3000:]
    assert f"error: {tmp_path} holds no run yet" in result.stderr
    assert "--server=host:port" in result.stderr


def test_run_files_without_tensorflow(tmp_path):
    """sac-status --root_dir reads the files alone: TensorFlow and Reverb stay unimportable."""
    root = tmp_path / "run"
    (root / "train" / "checkpoints").mkdir(parents=True)
    for step in (100, 2000):
        (root / "train" / "checkpoints" / f"ckpt-{step}.index").write_text("x")
    (root / "run_info.json").write_text(
        '{"env_name": "Pendulum-v1", "hparams": {"actor_fc_layer_params": [64, 64], '
        '"critic_joint_fc_layer_params": [64, 64], "num_iterations": 8000}}'
    )
    code = _WITHOUT_TENSORFLOW + textwrap.dedent(
        f"""
        sys.argv = ["sac-status", "--root_dir={root}"]
        from sac_distributed.bin import status
        status.run()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=processes.DEADLINE_S
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == [
        f"Run in {root} (from its files)",
        "  env: Pendulum-v1; actor 64,64, critic 64,64; num_iterations 8000",
        "  learner checkpoints: 2, the latest at train_step 2000",
        "  evaluations: none",
        "  exported policies: none; replay checkpoints: 0",
        "  actors seen: 0; training episodes: 0",
    ]
