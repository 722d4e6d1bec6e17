"""The compose services' commands run as local processes: the tiny budget every job
gets, the processes started and waited for, the healthcheck probe, and the image's
environment. test_compose_run runs launch/docker-compose.yml's commands with them,
test_kubernetes_run the Kubernetes containers'.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Mapping, Tuple

import pytest

from support.launch_files import dockerfile_instructions
from support.processes import kill_all, read

NUM_ITERATIONS = 200
EVAL_INTERVAL = 100
# Appended to every sac-* command; hyperparameters must be the same for all jobs.
BUDGET_FLAGS = (
    f"--num_iterations={NUM_ITERATIONS}",
    "--initial_collect_steps=200",
    # Tiny nets and batches: the run proves the commands work, not that SAC learns.
    "--batch_size=32",
    "--actor_fc_layer_params=16,16",
    "--critic_joint_fc_layer_params=16,16",
    # The preset's 128 at batch 32 admits ~50 transitions over the whole run; 2 admits
    # ~3200, so every actor replica is sure of a share (a test asserts each wrote).
    "--samples_per_insert=2",
    f"--eval_interval={EVAL_INTERVAL}",
    "--num_eval_episodes=1",
    # The tests read only the final export: one export, at the last step.
    f"--policy_save_interval={NUM_ITERATIONS}",
)
SERVER_READY_S = 600.0
JOBS_DEADLINE_S = 900.0
HEALTHCHECK_TIMEOUT_S = 120.0
TAIL_CHARS = 3000
BIN_DIR = Path(sys.executable).parent


def executable(name: str) -> str:
    """The program of that name installed next to this interpreter (the venv's bin)."""
    path = BIN_DIR / name
    assert path.is_file() and os.access(path, os.X_OK), (
        f"{name!r} from the compose file is not installed in {BIN_DIR}."
    )
    return str(path)


def dockerfile_env(text: str) -> Dict[str, str]:
    """The image's ENV settings (`ENV K=V ...` and the legacy `ENV K V`)."""
    env: Dict[str, str] = {}
    for keyword, args in dockerfile_instructions(text):
        if keyword != "ENV":
            continue
        words = shlex.split(args)
        if words and "=" not in words[0]:
            env[words[0]] = " ".join(words[1:])
        else:
            env.update(word.split("=", 1) for word in words)
    return env


# --- processes ----------------------------------------------------------------


@dataclasses.dataclass
class Proc:
    name: str
    argv: List[str]
    log: Path
    popen: subprocess.Popen

    def tail(self) -> str:
        state = "running" if self.popen.poll() is None else f"exit {self.popen.returncode}"
        header = f"--- {self.name} ({state}): {shlex.join(self.argv)}"
        return f"{header}\n{read(str(self.log))[-TAIL_CHARS:]}"


class Procs:
    """Every process the test starts, killed at teardown if still running."""

    def __init__(self, log_dir: Path, cwd: Path):
        self.log_dir = log_dir
        self.cwd = cwd
        self.running: Dict[str, Proc] = {}

    def start(self, name: str, argv: List[str], env: Mapping[str, str]) -> Proc:
        log_path = self.log_dir / f"{name}.log"
        with open(log_path, "ab") as log:
            popen = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.cwd,
                env=dict(env),
            )
        popen.log_path = str(log_path)  # support.processes.wait_for_log shows it on failure
        proc = Proc(name, argv, log_path, popen)
        self.running[name] = proc
        return proc

    def kill_all(self) -> None:
        kill_all({name: proc.popen for name, proc in self.running.items()})


def wait_for_exit(procs: List[Proc], deadline_s: float, watch: Proc) -> Dict[str, int]:
    """Polls until every process exited 0; fails with log tails on the first failure.

    A job that exits non-zero, or `watch` (the server) exiting at all, fails
    at once, so the others do not run into the deadline.
    """
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        failed = [p for p in procs if p.popen.poll() not in (None, 0)]
        if watch.popen.poll() is not None:
            failed.append(watch)
        if failed:
            codes = {p.name: p.popen.returncode for p in failed}
            pytest.fail(f"{codes} exited:\n" + "\n".join(p.tail() for p in failed))
        if all(p.popen.poll() == 0 for p in procs):
            return {p.name: p.popen.returncode for p in procs}
        time.sleep(0.2)
    late = [p for p in procs if p.popen.poll() is None]
    pytest.fail(
        f"{[p.name for p in late]} still running after {deadline_s:.0f} s:\n"
        + "\n".join(p.tail() for p in late)
    )


def run_healthcheck(argv: List[str], env: Mapping[str, str], cwd: Path) -> Tuple[int, str]:
    """(exit code, output) of one healthcheck probe."""
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=HEALTHCHECK_TIMEOUT_S,
    )
    return result.returncode, result.stdout + result.stderr
