"""Starting the real binaries as subprocesses, polling their logs with deadlines, and
reading what they print: the process helpers the test files share."""

import os
import re
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

from support.repo import SETUP_PY

# How long a test waits for a condition that a busy 2-core machine reaches
# late (a process starting, a log line, an exit). Generous on purpose: the
# tests assert what happens, never how fast; a deadline only stops a hang.
DEADLINE_S = float(os.environ.get("SAC_TEST_DEADLINE_S", "600"))
# A whole sac-launch run in seconds (Pendulum-v1, tiny nets): the launchers' tests.
TINY_RUN_ITERATIONS = 200
TINY_RUN_FLAGS = (
    f"--num_iterations={TINY_RUN_ITERATIONS}",
    "--initial_collect_steps=100",
    "--batch_size=32",
    "--actor_fc_layer_params=16,16",
    "--critic_joint_fc_layer_params=16,16",
    "--eval_interval=200",
    "--num_eval_episodes=1",
    "--policy_save_interval=200",
)
# sac-launch's own tests: the same run with an evaluation half way (test_launch,
# test_thread_launch).
TINY = [
    "--num_iterations=200",
    "--initial_collect_steps=100",
    "--batch_size=32",
    "--actor_fc_layer_params=16,16",
    "--critic_joint_fc_layer_params=16,16",
    "--eval_interval=100",
    "--num_eval_episodes=1",
    "--policy_save_interval=200",
]


def actor_collecting(task: Optional[int] = None) -> str:
    """The regex of an actor's first replay-size check, logged in its collect loop
    before its first env step (any actor's, or task `task`'s)."""
    who = r"\d+" if task is None else str(task)
    return rf"Actor {who}: (initial collect|replay holds)"


def start(module: str, flags, log_path: str) -> subprocess.Popen:
    """Starts `python -m sac_distributed.bin.<module> flags...`, output to `log_path`."""
    log = open(log_path, "a")
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", f"sac_distributed.bin.{module}", *flags],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    proc.log_path = log_path  # so a failure can show what the process said
    return proc


def run(
    module: str, *flags: str, timeout_s: float, cwd: Optional[str] = None
) -> subprocess.CompletedProcess:
    """Runs `python -m sac_distributed.bin.<module> flags...` to the end, output captured."""
    return subprocess.run(
        [sys.executable, "-m", f"sac_distributed.bin.{module}", *flags],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def start_launch(flags: Sequence[str], **popen_kwargs) -> subprocess.Popen:
    """Starts `python -u -m sac_distributed.bin.launch flags...` (sac-launch) with its
    stdout and stderr together on one text pipe, for a test that reads it as it comes."""
    return subprocess.Popen(
        [sys.executable, "-u", "-m", "sac_distributed.bin.launch", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        **popen_kwargs,
    )


def read_until(proc: subprocess.Popen, marker: str) -> List[str]:
    """The output lines up to the first one with `marker` (asserted), read as they come."""
    deadline = time.monotonic() + DEADLINE_S
    seen: List[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        if marker in line or time.monotonic() > deadline:
            break
    assert any(marker in line for line in seen), "".join(seen)[-3000:]
    return seen


def error_lines(stderr: str) -> List[str]:
    """The lines a binary printed as user errors (`error: ...`)."""
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def setup_py_console_scripts() -> List[Tuple[str, str]]:
    """(script, module) for each sac-* console script setup.py declares, e.g.
    ("sac-launch", "launch") for sac_distributed.bin.launch."""
    with open(SETUP_PY, encoding="utf-8") as f:
        return re.findall(r'"(sac-[\w-]+)=sac_distributed\.bin\.(\w+):run"', f.read())


def read(path: str) -> str:
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        return f.read()


def wait_for_log(
    path: str,
    pattern: str,
    deadline_s: float,
    procs: Optional[Dict[str, subprocess.Popen]] = None,
    start_at: int = 0,
) -> re.Match:
    """Polls `path` until `pattern` (a regex) appears after byte `start_at`."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        match = re.search(pattern, read(path)[start_at:])
        if match:
            return match
        for name, proc in (procs or {}).items():
            if proc.poll() is not None:
                pytest.fail(
                    f"{name} exited ({proc.returncode}) while waiting for {pattern!r}"
                    f"{_log_tail(proc)}"
                )
        time.sleep(0.2)
    text = read(path)
    pytest.fail(
        f"waited {deadline_s} s for {path} to log {pattern!r}; it did not.\n"
        f"Its warnings and errors:\n{_warnings(text)}\nIts end:\n{text[-3000:]}"
    )


def _warnings(text: str, limit: int = 40) -> str:
    """The log's absl warning and error lines (W.../E... prefixes), the last `limit`."""
    lines = [line for line in text.splitlines() if re.match(r"[WEF]\d{4} ", line)]
    return "\n".join(lines[-limit:]) or "(none)"


def _log_tail(proc: subprocess.Popen) -> str:
    """The end of a process's log, for a failure message ('' if it has none)."""
    path = getattr(proc, "log_path", None)
    return f"; its log {path} ends:\n{read(path)[-3000:]}" if path else ""


def settled(read_value, what: str, agreeing_reads: int = 4, interval_s: float = 0.5) -> int:
    """Polls `read_value()` until `agreeing_reads` reads `interval_s` apart agree.

    For a count whose writers are paused: a busy server may still be working
    through data they sent before the pause, so one unchanged pair is not enough.
    """
    history = []
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        history.append(read_value())
        if len(history) >= agreeing_reads and len(set(history[-agreeing_reads:])) == 1:
            return history[-1]
        time.sleep(interval_s)
    pytest.fail(f"{what} never settled in {DEADLINE_S} s: {history[-8:]}")


def wait_all(procs: Dict[str, subprocess.Popen], deadline_s: float) -> Dict[str, int]:
    """Waits for every process; kills all and fails the test past the deadline."""
    deadline = time.monotonic() + deadline_s
    for name, proc in procs.items():
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_all(procs)
            pytest.fail(f"waited {deadline_s} s for {name} to exit; it is still running")
    return {name: proc.returncode for name, proc in procs.items()}


def kill_all(procs: Dict[str, subprocess.Popen]) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def stop(proc: subprocess.Popen, timeout_s: float = DEADLINE_S) -> int:
    """SIGTERM, then SIGKILL if it does not exit in time; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def assert_greedy_policy_acts(root_dir: str, train_step: int) -> None:
    """The run's exported greedy policy loads with stock TF-Agents at `train_step`
    and gives an in-bounds action on Pendulum-v1."""
    import numpy as np
    from tf_agents.environments import suite_gym
    from tf_agents.policies import py_tf_eager_policy

    from sac_distributed import paths

    policy = py_tf_eager_policy.SavedModelPyTFEagerPolicy(
        paths.policy_dir(root_dir, "greedy_policy"), load_specs_from_pbtxt=True
    )
    assert policy.get_train_step() == train_step
    env = suite_gym.load("Pendulum-v1")
    action = policy.action(env.reset()).action
    spec = env.action_spec()
    assert np.all(action >= spec.minimum) and np.all(action <= spec.maximum)


def processes_mentioning(text: str) -> list:
    """The pids whose command line contains `text` (a test's scratch path)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    pids.append(int(entry))
        except (OSError, ValueError):
            continue
    return pids


def kill_processes_mentioning(text: str) -> None:
    """SIGKILLs every process whose command line contains `text`."""
    for pid in processes_mentioning(text):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
