"""A job binary stopped while it starts (before its StopSignal, during TensorFlow's
import) exits 0 at once: a restart loop's or a supervisor's SIGTERM in that window
is a clean stop. Chaos found evaluators that died of the signal there (exit -15)."""

import os
import signal
import subprocess
import sys
import time

import portpicker
import pytest
from proc_utils import DEADLINE_S

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
