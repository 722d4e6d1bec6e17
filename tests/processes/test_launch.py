"""sac-launch: a failing child, and Ctrl-C.

The full local run to num_iterations is test_launch_shards.py's (two replay
shards, two actors), which checks the run's output and logs; the single-server
stop that it does not see is checked here, on Ctrl-C."""

import json
import os
import re
import signal
import subprocess
import time

import pytest
from support.processes import DEADLINE_S, TINY, read_until, start_launch
from support.repo import TESTS_DIR

pytestmark = pytest.mark.slow


def _no_children_left(root_dir: str) -> bool:
    """True when no process is still running with this root_dir on its command line."""
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return not any(f"--root_dir={root_dir}" in line for line in out.splitlines())


def test_launch_reports_failing_child(tmp_path):
    root = str(tmp_path / "bad")
    # The launcher's own check makes the env; every job's attempt then fails.
    fails_in_jobs = [
        "--env_name=user_envs:make_after_first",
        f"--env_kwargs={json.dumps({'marker': str(tmp_path / 'made')})}",
    ]
    proc = start_launch([f"--root_dir={root}", *fails_in_jobs, *TINY], cwd=TESTS_DIR)
    out, _ = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 1, out[-4000:]
    assert "exited with code 2; its last lines:" in out
    assert "this env can be made only once" in out
    deadline = time.monotonic() + DEADLINE_S
    while not _no_children_left(root) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _no_children_left(root)


def test_launch_stops_everything_on_ctrl_c(tmp_path):
    root = str(tmp_path / "interrupted")
    # No periodic export: the policies the test finds are the graceful stop's.
    endless = ["--num_iterations=1000000", "--policy_save_interval=1000000"]
    proc = start_launch([f"--root_dir={root}", *TINY[1:], *endless])
    seen = read_until(proc, "Eval at train_step")  # training is under way
    proc.send_signal(signal.SIGINT)
    # An impatient second Ctrl-C (and a SIGTERM): logged, the stop goes on, and no
    # job is left running without its launcher.
    seen += read_until(proc, "sac-launch: waiting for")  # the stop is under way
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=DEADLINE_S)
    out = "".join(seen) + rest
    assert proc.returncode == 0, out[-4000:]
    assert "Received SIGINT again: still stopping the jobs" in out
    assert "stopped on request" in out
    assert re.search(r"sac-launch: waiting for [a-z_0-9, ]*learner", out), out[-3000:]
    # Then the one server, last (the sharded run says "their replay checkpoints").
    assert "sac-launch: waiting for server to write its replay checkpoint and stop" in out
    assert _no_children_left(root)
    # The learner's graceful stop leaves a checkpoint and exported policies behind.
    assert any(f.endswith(".index") for f in os.listdir(os.path.join(root, "train", "checkpoints")))
    assert os.path.isdir(os.path.join(root, "policies", "greedy_policy"))


def test_an_error_buffer_without_a_ratio_is_refused_before_any_job_starts(tmp_path):
    root = str(tmp_path / "run")
    proc = start_launch(
        [
            f"--root_dir={root}",
            "--env_name=Pendulum-v1",
            "--samples_per_insert=0",  # MinSize: there is no ratio to drift from
            "--samples_per_insert_error_buffer=512",
            *TINY,
        ]
    )
    out, _ = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 2, out[-4000:]
    assert "samples_per_insert_error_buffer only applies together with --samples_per_insert" in out
    assert not os.path.exists(root) or not os.listdir(root), "no job wrote anything"
    assert _no_children_left(root)
