"""A job binary stopped before it works exits 0: while it starts (before its
StopSignal, during TensorFlow's import: chaos found evaluators that died of the
signal there, exit -15), and while it waits for its server (it said "No Reverb
server answered within 300 s" and exited 2)."""

import os
import signal
import subprocess
import sys
import time

import portpicker
import pytest
from support import processes
from support.processes import DEADLINE_S

_SIGTERM_CAUGHT = 1 << (signal.SIGTERM - 1)


def _catches_sigterm(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & _SIGTERM_CAUGHT)
    return False


@pytest.mark.parametrize("job", ["actor", "evaluator", "learner", "reverb_server"])
def test_sigterm_while_starting_exits_zero_at_once(job, tmp_path):
    address = f"localhost:{portpicker.pick_unused_port()}"  # no server: the job stays early
    flags = [f"--root_dir={tmp_path / 'run'}", "--env_name=Pendulum-v1"]
    if job == "reverb_server":
        flags.append(f"--port={address.rpartition(':')[2]}")
    else:
        flags += [
            f"--replay_buffer_server_address={address}",
            f"--variable_container_server_address={address}",
        ]
    proc = subprocess.Popen(
        [sys.executable, "-m", f"sac_distributed.bin.{job}", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not _catches_sigterm(proc.pid):  # the early handler, before TensorFlow's import
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"waited {DEADLINE_S} s for {job} to start"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert "Received SIGTERM while starting, before any work: exiting." in err
    assert not os.path.exists(tmp_path / "run" / "run_info.json")


def test_sigterm_while_waiting_for_the_server_is_a_clean_stop(tmp_path):
    address = f"localhost:{portpicker.pick_unused_port()}"  # nothing listens there
    log_path = str(tmp_path / "evaluator.log")
    proc = processes.start(
        "evaluator",
        [
            f"--root_dir={tmp_path / 'run'}",
            "--env_name=Pendulum-v1",
            f"--variable_container_server_address={address}",
        ],
        log_path,
    )
    try:
        processes.wait_for_log(log_path, "Waiting for the Reverb server", DEADLINE_S, {"e": proc})
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = processes.read(log_path)
    assert code == 0, log[-3000:]
    assert f"Stopped while waiting for the Reverb server at {address}" in log
    assert "No Reverb server answered" not in log and "error:" not in log
