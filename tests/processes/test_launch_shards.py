"""sac-launch --num_replay_shards: a short Pendulum-v1 run over 2 Reverb servers.

It is also the suite's whole local sac-launch run (to num_iterations, two
actors): what a user sees of any run (the jobs' prefixed output, the initial
collect's progress, the evaluations, the summary, one log per job, no process
left behind) is checked on it.

The full run needs the sharded data plane (actors that spread their inserts
over the shards, a learner that samples from all of them: replay/,
connection.py, actor_loop.py, learner_loop.py); the launcher's part (servers
started and waited for, every client given every shard, each shard read and
stopped at the end) is what sac-launch adds. The port check runs without it.
"""

import io
import os
import re
import signal
import socket
import subprocess

import portpicker
import pytest
from support.processes import (
    DEADLINE_S,
    TINY_RUN_FLAGS,
    TINY_RUN_ITERATIONS,
    assert_greedy_policy_acts,
    start_launch,
)

from sac_distributed.launchers.job_definitions import JobSpec
from sac_distributed.launchers.supervisor import Supervisor

pytestmark = pytest.mark.slow

NUM_ITERATIONS = TINY_RUN_ITERATIONS
TINY = list(TINY_RUN_FLAGS)
# Pendulum-v1's replay_buffer_capacity; each of 2 shards holds half of it.
PRESET_CAPACITY = 100_000
# sac-launch's last lines: one per shard (supervisor.print_shards).
_SHARD_LINE = re.compile(
    r"Replay shard (\d) \((server_\d), (\S+)\): (\d+) of (\d+) transitions stored, "
    r"(\d+) inserted, (\d+) sampled; exit code (\d+)"
)


def _launch_to_end(args) -> subprocess.CompletedProcess:
    """sac-launch run to its end; past DEADLINE_S, Ctrl-C'd and the test failed."""
    proc = start_launch(args)
    try:
        out, _ = proc.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=300)
        pytest.fail(f"sac-launch did not finish in {DEADLINE_S} s:\n{out[-4000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def _no_process_left(root_dir: str) -> bool:
    """True when no process is still running with this root_dir on its command line."""
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return not any(f"--root_dir={root_dir}" in line for line in out.splitlines())


def test_two_shards_both_fill_and_are_sampled(tmp_path):
    root = str(tmp_path / "run")
    run = _launch_to_end(
        [f"--root_dir={root}", "--num_actors=2", "--num_replay_shards=2", "--seed=3", *TINY]
    )
    out = run.stdout
    assert run.returncode == 0, out[-6000:]
    assert "(2 replay shards)" in out
    assert "[server_0]" in out and "[server_1]" in out
    assert "training finished; every job exited 0" in out
    assert "waiting for server_0, server_1 to write their replay checkpoints and stop" in out
    shards = _SHARD_LINE.findall(out)
    assert [s[:2] for s in shards] == [("0", "server_0"), ("1", "server_1")], out[-3000:]
    for index, name, address, stored, capacity, inserted, sampled, code in shards:
        assert int(inserted) > 0 and int(stored) > 0, f"shard {index} got no inserts"
        assert int(sampled) > 0, f"shard {index} was never sampled"
        assert code == "0", f"{name} exited {code}"
        assert address.startswith("localhost:"), address
        assert int(capacity) == PRESET_CAPACITY // 2, f"shard {index} holds {capacity}"
    assert len({s[2] for s in shards}) == 2  # two servers, two addresses

    # What any local run shows (moved from test_launch.py's unsharded run).
    assert "[learner]" in out and "[actor_1]" in out and "[evaluator]" in out
    assert f"Eval at train_step {NUM_ITERATIONS}" in out
    # Progress of the initial collect (the first actor to check finds the table empty).
    assert re.search(r"\[actor_\d\].*initial collect with random actions, replay holds", out)
    assert "Eval return:" in out
    assert f"at train_step {NUM_ITERATIONS}" in out.split("Eval return:")[-1]
    for name in ("server_0", "server_1", "learner", "actor_0", "actor_1", "evaluator"):
        assert os.path.getsize(os.path.join(root, "logs", f"{name}.log")) > 0, name
    assert _no_process_left(root)

    assert_greedy_policy_acts(root, NUM_ITERATIONS)


def _free_pair() -> int:
    """A port P with P + 1 free as well (the two shards' ports)."""
    for _ in range(100):
        port = portpicker.pick_unused_port()
        if port < 65535 and portpicker.is_port_free(port + 1):
            return port
    raise AssertionError("found no two consecutive free ports")


def test_a_taken_shard_port_is_refused_before_anything_starts(tmp_path):
    port = _free_pair()
    with socket.socket() as holder:  # something else listens on shard 1's port
        holder.bind(("", port + 1))
        holder.listen()
        run = _launch_to_end(
            [f"--root_dir={tmp_path / 'run'}", f"--port={port}", "--num_replay_shards=2", *TINY]
        )
    assert run.returncode == 2, run.stdout[-3000:]
    assert f"Port {port + 1} is already in use" in run.stdout
    assert "replay shard i uses --port + i" in run.stdout
    assert "Traceback" not in run.stdout


def test_supervisor_starts_no_client_when_a_shard_fails_to_start(tmp_path):
    port = _free_pair()
    root, logs = str(tmp_path / "run"), str(tmp_path / "run" / "logs")
    server = ("--root_dir=" + root, f"--port={port}", "--num_replay_shards=2")
    specs = [
        JobSpec("server_0", "sac_distributed.bin.reverb_server", server),
        JobSpec("server_1", "sac_distributed.no_such_binary", ()),
        JobSpec("learner", "sac_distributed.bin.learner", ("--root_dir=" + root,)),
    ]
    console = io.StringIO()
    result = Supervisor(
        specs,
        logs,
        console=console,
        server_ports={"server_0": port, "server_1": port + 1},
        server_start_timeout_s=DEADLINE_S,
    ).run()
    assert result.exit_code == 1, result.message
    assert "server_1 exited with code 1" in result.message
    assert "No module named sac_distributed.no_such_binary" in result.message
    assert set(result.exit_codes) == {"server_0", "server_1"}  # the learner never started
    assert not os.path.exists(os.path.join(logs, "learner.log"))
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert f"--root_dir={root}" not in ps  # server_0 was stopped with the run
