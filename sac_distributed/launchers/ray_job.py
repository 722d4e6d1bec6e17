"""One job of a Ray run: `JobProcess`, the Ray actor that runs a job's binary as its child.

`ray_launch.py` places one per job (`JobSpec`) and Ray restarts it when its
process dies; this module is what runs inside it: start the child, tie its
life to the actor's, follow its log file and relay our own and error lines
to the launcher, stop it gracefully on request.
"""

from __future__ import annotations

import collections
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, TextIO

import ray

from sac_distributed.launchers.job_definitions import JobSpec
from sac_distributed.launchers.supervisor import INTERESTING_OUTPUT

USER_ERROR_EXIT_CODE = 2  # bin/_common.run's exit code for a bad setting
GRACE_S = 60.0  # for jobs to exit after the learner's end or a stop request
POLL_S = 0.5
_PR_SET_PDEATHSIG = 1
_TAIL_LINES = 20
_OURS = "== sac-launch:"  # starts the lines the engine writes into a job's log


class JobProcess:
    """One job of the run: its binary as a child process of this Ray actor.

    Ray restarts the actor when its process dies; the child process is tied to
    it (Ray kills a dead worker's children; PR_SET_PDEATHSIG sends SIGTERM if
    that cleanup is off), and the actor exits when the child dies, so either
    death restarts the pair. A restarted instance first waits for a previous
    child of the same job on this node to exit, which would otherwise hold the
    server's port or the learner's lock. The child writes its output to
    logs/<job>.log itself; the actor follows that file and prints our own and
    error lines, which Ray forwards to the launcher as "(<job> pid=...) ...".
    """

    def __init__(
        self,
        spec: JobSpec,
        log_dir: str,
        run_id: str,
        verbose: bool,
        env_vars: Optional[Dict[str, str]] = None,
    ):
        self._spec = spec
        self._env_vars = dict(env_vars or {})
        self._log_path = os.path.join(log_dir, f"{spec.name}.log")
        self._pid_path = os.path.join(tempfile.gettempdir(), "sac_ray", run_id, spec.name)
        self._verbose = verbose
        self._stopping = threading.Event()
        self._process: Optional[subprocess.Popen] = None
        self.tail: collections.deque = collections.deque(maxlen=_TAIL_LINES)
        os.makedirs(log_dir, exist_ok=True)
        os.makedirs(os.path.dirname(self._pid_path), exist_ok=True)
        _wait_for_previous(self._pid_path, spec.module)

    def __repr__(self) -> str:
        # Ray prefixes the lines this actor prints with it: "(actor_0 pid=..., ip=...)".
        return self._spec.name

    def run(self) -> int:
        """Runs the job to its end; returns its exit code, or ends this actor on a crash."""
        node = ray.get_runtime_context().get_node_id()
        # The child writes its log itself, so that a child outliving this actor (it
        # gets SIGTERM and stops gracefully) is not cut off by a broken pipe.
        with open(self._log_path, "a", buffering=1) as log:
            start_at = log.tell()
            self._process = _start(self._spec, log, self._env_vars)
            with open(self._pid_path, "w") as f:
                f.write(str(self._process.pid))
            header = (
                f"{_OURS} {self._spec.name} started as pid {self._process.pid} on node "
                f"{node} ({ray.util.get_node_ip_address()})"
            )
            log.write(header + "\n")
        self._emit(header)
        self._follow(start_at)
        code = self._process.returncode
        with open(self._log_path, "a") as log:
            log.write(f"{_OURS} {self._spec.name} exited with code {code}\n")
        if code in (0, USER_ERROR_EXIT_CODE) or self._stopping.is_set():
            _remove(self._pid_path)
            return code
        self._emit(f"{_OURS} {self._spec.name} died (exit code {code}); Ray restarts it")
        os._exit(1)  # an actor that dies is what Ray restarts

    def stop(self, grace_s: float = GRACE_S) -> None:
        """SIGTERM (the job exits gracefully), SIGKILL after `grace_s`."""
        self._stopping.set()
        process = self._process
        if process is None or process.poll() is not None:
            return
        _signal_group(process, signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait()

    def last_lines(self) -> List[str]:
        return list(self.tail)

    def _follow(self, offset: int) -> None:
        """Relays the child's log lines from `offset` until the child has exited."""
        assert self._process is not None
        pending = ""
        with open(self._log_path, errors="replace") as log:
            log.seek(offset)
            while True:
                exited = self._process.poll() is not None
                for chunk in iter(log.readline, ""):
                    pending += chunk
                    if pending.endswith("\n"):
                        self._relay(pending.rstrip("\n"))
                        pending = ""
                if exited:
                    break
                time.sleep(POLL_S)
        if pending:
            self._relay(pending)

    def _relay(self, line: str) -> None:
        self.tail.append(line)
        if line.startswith(_OURS):
            return
        if self._verbose or INTERESTING_OUTPUT.search(line):
            self._emit(line)

    @staticmethod
    def _emit(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _start(spec: JobSpec, log: TextIO, env_vars: Dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        spec.argv(sys.executable),
        env={**os.environ, **env_vars},
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )


def _die_with_parent() -> None:
    """In the child: SIGTERM when the Ray worker that started it dies, however it dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def _wait_for_previous(pid_path: str, module: str, grace_s: float = GRACE_S) -> None:
    """Waits for the last child this job started on this node, SIGKILL after `grace_s`."""
    try:
        with open(pid_path) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + grace_s
    while _runs(pid, module):
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        time.sleep(0.2)


def _remove(pid_path: str) -> None:
    """Removes the pid file, and its run's directory once it is empty."""
    for remove, path in ((os.remove, pid_path), (os.rmdir, os.path.dirname(pid_path))):
        try:
            remove(path)
        except OSError:
            pass


def _runs(pid: int, module: str) -> bool:
    """True while `pid` is alive and still the job's binary (not a reused pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return module.encode() in f.read()
    except OSError:
        return False


# --- the launcher side ---------------------------------------------------------
