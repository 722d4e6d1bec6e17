"""Local launcher: server, actors, learner and evaluator as separate OS processes.

What each job runs comes from `job_definitions` (portable, shared with other
launchers); this module only runs them on this machine. `Supervisor` starts
each job with `python -m sac_distributed.bin.<job>`,
streams their output with a `[name]` prefix (full logs go to
root_dir/logs/<name>.log), and ends the run when:
  * the learner exits 0: actors and evaluator exit on their own once they see
    the learner's done flag; then the server is stopped with SIGTERM (it
    checkpoints the replay on the way out);
  * any job exits non-zero: the run stops and reports which job, its exit code
    and its last log lines;
  * Ctrl-C / SIGTERM: every job gets SIGTERM, stragglers SIGKILL after a grace.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Deque, Dict, Optional, Sequence, TextIO

from sac_distributed import paths, plotting
from sac_distributed.errors import ConfigError
from sac_distributed.job_definitions import LEARNER, SERVER, JobSpec

_TAIL_LINES = 20
_SHUTDOWN_GRACE_S = 60.0
# While jobs shut down, the launcher says every this many seconds whom it waits for.
_WAIT_REPORT_S = 5.0
# Lines shown on the console unless --verbose: our own log lines and errors.
INTERESTING_OUTPUT = re.compile(
    r"(sac_distributed|jobs\.py|_loop\.py|server\.py|evaluation\.py|replay\.py|"
    r"Traceback|Error|error:|FATAL|Exception)"
)


class _Job:
    """A running child process with a thread that streams its output."""

    def __init__(
        self, spec: JobSpec, python: str, log_dir: str, console: TextIO, verbose: bool, lock
    ):
        self.spec = spec
        self.tail: Deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._log = open(os.path.join(log_dir, f"{spec.name}.log"), "a")
        self.process = subprocess.Popen(
            spec.argv(python),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            start_new_session=True,  # Ctrl-C reaches the launcher only; it relays SIGTERM
        )
        self._thread = threading.Thread(
            target=self._pump, args=(console, verbose, lock), daemon=True
        )
        self._thread.start()

    def _pump(self, console: TextIO, verbose: bool, lock) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            line = line.rstrip("\n")
            self._log.write(line + "\n")
            self.tail.append(line)
            if verbose or INTERESTING_OUTPUT.search(line):
                with lock:
                    console.write(f"[{self.spec.name}] {line}\n")
                    console.flush()
        self._log.flush()

    def finish_output(self, timeout: float = 5.0) -> None:
        self._thread.join(timeout)
        self._log.close()

    def signal(self, sig: int) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                pass


@dataclasses.dataclass
class LaunchResult:
    exit_code: int
    message: str
    exit_codes: Dict[str, Optional[int]]


class Supervisor:
    """Starts the jobs, watches them, and stops them together."""

    def __init__(
        self,
        specs: Sequence[JobSpec],
        log_dir: str,
        console: TextIO = sys.stdout,
        verbose: bool = False,
        python: str = sys.executable,
    ):
        """`verbose` streams every output line, not only ours and errors."""
        self._specs = list(specs)
        self._python = python
        self._log_dir = log_dir
        self._console = console
        self._verbose = verbose
        self._lock = threading.Lock()
        self._jobs: Dict[str, _Job] = {}
        self._stop_requested = threading.Event()

    def request_stop(self) -> None:
        self._stop_requested.set()

    def run(self, poll_s: float = 0.2) -> LaunchResult:
        os.makedirs(self._log_dir, exist_ok=True)
        for spec in self._specs:
            self._jobs[spec.name] = _Job(
                spec, self._python, self._log_dir, self._console, self._verbose, self._lock
            )
        try:
            return self._watch(poll_s)
        finally:
            self._stop_all()

    def _watch(self, poll_s: float) -> LaunchResult:
        learner_done_at: Optional[float] = None
        while True:
            failed = self._first_failure()
            if failed is not None:
                return self._failure(failed)
            if self._stop_requested.is_set():
                return self._result(0, "stopped on request (Ctrl-C / SIGTERM)")
            clients = [j for n, j in self._jobs.items() if n != SERVER]
            if all(j.process.poll() == 0 for j in clients):
                return self._result(0, "training finished; every job exited 0")
            learner = self._jobs[LEARNER].process
            if learner.poll() == 0 and learner_done_at is None:
                learner_done_at = time.monotonic()
                self._say(
                    f"learner finished; waiting for {self._running(clients)} to see its done "
                    f"flag and exit (up to {_SHUTDOWN_GRACE_S:.0f} s)"
                )
            if learner_done_at and time.monotonic() - learner_done_at > _SHUTDOWN_GRACE_S:
                waiting = [n for n, j in self._jobs.items() if j.process.poll() is None]
                return self._result(
                    1, f"learner finished but {waiting} did not exit within {_SHUTDOWN_GRACE_S}s"
                )
            if self._jobs[SERVER].process.poll() == 0:
                return self._failure(self._jobs[SERVER])
            time.sleep(poll_s)

    def _first_failure(self) -> Optional[_Job]:
        for job in self._jobs.values():
            code = job.process.poll()
            if code is not None and code != 0:
                return job
        return None

    def _failure(self, job: _Job) -> LaunchResult:
        code = job.process.poll()
        job.finish_output()
        tail = "\n".join(f"    {line}" for line in job.tail)
        message = (
            f"{job.spec.name} exited with code {code}; its last lines:\n{tail}\n"
            f"Full log: {os.path.join(self._log_dir, job.spec.name + '.log')}"
        )
        return self._result(1, message)

    def _result(self, exit_code: int, message: str) -> LaunchResult:
        codes = {name: job.process.poll() for name, job in self._jobs.items()}
        return LaunchResult(exit_code, message, codes)

    def _stop_all(self) -> None:
        """SIGTERM the clients and wait, then the server (it checkpoints on the way out)."""
        clients = [j for n, j in self._jobs.items() if n != SERVER]
        for job in clients:
            job.signal(signal.SIGTERM)
        self._wait_or_kill(clients, "to stop")
        server = self._jobs.get(SERVER)
        if server is not None:
            server.signal(signal.SIGTERM)
            self._wait_or_kill([server], "to write its replay checkpoint and stop")
        for job in self._jobs.values():
            job.finish_output()

    def _wait_or_kill(self, jobs: Sequence[_Job], what: str) -> None:
        """Waits up to the grace period, saying whom it waits for; then SIGKILL."""
        start = time.monotonic()
        next_report = start
        while self._running(jobs):
            now = time.monotonic()
            if now - start > _SHUTDOWN_GRACE_S:
                late = self._running(jobs)
                self._say(f"{late} did not exit within {_SHUTDOWN_GRACE_S:.0f} s: SIGKILL")
                for job in jobs:
                    job.signal(signal.SIGKILL)
                for job in jobs:
                    job.process.wait()
                return
            if now >= next_report:
                self._say(
                    f"waiting for {self._running(jobs)} {what} ({now - start:.0f} s of "
                    f"{_SHUTDOWN_GRACE_S:.0f} s before SIGKILL)"
                )
                next_report = now + _WAIT_REPORT_S
            time.sleep(0.1)

    @staticmethod
    def _running(jobs: Sequence[_Job]) -> str:
        return ", ".join(j.spec.name for j in jobs if j.process.poll() is None)

    def _say(self, text: str) -> None:
        with self._lock:
            self._console.write(f"sac-launch: {text}\n")
            self._console.flush()


def print_summary(root_dir: str, console: TextIO = sys.stdout) -> None:
    """Prints the first and last evaluation from the evaluator's results.csv."""
    path = paths.results_path(root_dir)
    if not os.path.exists(path):
        console.write("No evaluation results were written.\n")
        return
    try:
        points = plotting.read_results(path)
    except ConfigError as error:
        console.write(f"Could not read the evaluation results: {error}\n")
        return
    if not points:
        console.write("No evaluation results were written.\n")
        return
    first, last = points[0], points[-1]
    console.write(
        f"Eval return: {first.average_return:.1f} at train_step {first.train_step} -> "
        f"{last.average_return:.1f} at train_step {last.train_step} "
        f"({len(points)} evaluations, {path})\n"
    )
