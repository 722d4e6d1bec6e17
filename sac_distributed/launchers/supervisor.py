"""Local supervisor: servers, actors, learner and evaluator as separate OS processes.

What each job runs comes from `job_definitions` (portable, shared with other
launchers); this module only runs them on this machine. `Supervisor` starts
each job with `python -m sac_distributed.bin.<job>`,
streams their output with a `[name]` prefix (full logs go to
root_dir/logs/<name>.log), and ends the run when:
  * the learner exits 0: actors and evaluator exit on their own once they see
    the learner's done flag; then the servers (one per replay shard) are
    stopped with SIGTERM (each checkpoints its replay on the way out);
  * any job exits non-zero: the run stops and reports which job, its exit code
    and its last log lines;
  * Ctrl-C / SIGTERM: every job gets SIGTERM, stragglers SIGKILL after a grace.

Given the servers' ports, the supervisor starts the clients only once every
server listens (a server that fails to start is reported as itself, not as
clients that time out waiting for it), and can run a last look at the servers
(`before_servers_stop`, e.g. their replay counters) once the clients are gone.
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
from typing import Any, Callable, Deque, Dict, Mapping, Optional, Sequence, TextIO, Tuple

from sac_distributed import paths
from sac_distributed.errors import ConfigError
from sac_distributed.launchers.job_definitions import LEARNER, JobSpec, is_server, server_names
from sac_distributed.results import read_results
from sac_distributed.runtime import port_in_use

_TAIL_LINES = 20
_SHUTDOWN_GRACE_S = 60.0
# While jobs shut down, the launcher says every this many seconds whom it waits for.
_WAIT_REPORT_S = 5.0
# Lines shown on the console unless --verbose: our own log lines and errors
# (jobs/__init__.py and replay/__init__.py log as "__init__.py:<line>]"; the loops'
# pieces as actor_*.py, learner_*.py and eval_wait.py).
INTERESTING_OUTPUT = re.compile(
    r"(sac_distributed|__init__\.py:\d+\]|_loop\.py|server\.py|evaluation\.py|"
    r"actor_\w+\.py|learner_\w+\.py|eval_wait\.py|"
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
    # status.ShardCounts of each replay shard, read once the clients had stopped.
    shards: Tuple[Any, ...] = ()


class Supervisor:
    """Starts the jobs, watches them, and stops them together."""

    def __init__(
        self,
        specs: Sequence[JobSpec],
        log_dir: str,
        console: TextIO = sys.stdout,
        verbose: bool = False,
        python: str = sys.executable,
        server_ports: Optional[Mapping[str, int]] = None,
        server_start_timeout_s: float = 300.0,
        before_servers_stop: Optional[Callable[[], None]] = None,
    ):
        """`verbose` streams every output line, not only ours and errors.

        `server_ports` (server job name -> its port on this host): the clients
        start once every one of them listens; a server that does not listen
        within `server_start_timeout_s` fails the run. Without it every job
        starts at once (the clients wait for the servers themselves).
        `before_servers_stop` runs after the clients stopped, while the
        servers still serve.
        """
        self._specs = list(specs)
        self._server_ports = dict(server_ports or {})
        self._server_start_timeout_s = server_start_timeout_s
        self._before_servers_stop = before_servers_stop
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
        """Runs the jobs to the end; the result's exit codes are those after the stop."""
        try:
            result = self._start_and_watch(poll_s)
        finally:
            self._stop_all()
        codes = {name: job.process.poll() for name, job in self._jobs.items()}
        return dataclasses.replace(result, exit_codes=codes)

    def _start_and_watch(self, poll_s: float) -> LaunchResult:
        for spec in self._specs:
            if spec.name in self._server_ports:
                self._start(spec)
        not_ready = self._wait_for_servers(poll_s)
        if not_ready is not None:
            return not_ready
        for spec in self._specs:
            if spec.name not in self._jobs:
                self._start(spec)
        return self._watch(poll_s)

    def _start(self, spec: JobSpec) -> None:
        self._jobs[spec.name] = _Job(
            spec, self._python, self._log_dir, self._console, self._verbose, self._lock
        )

    def _failed_or_stopped(self) -> Optional[LaunchResult]:
        """The run's result if a job failed or a stop was requested, else None."""
        failed = self._first_failure()
        if failed is not None:
            return self._failure(failed)
        if self._stop_requested.is_set():
            return self._result(0, "stopped on request (Ctrl-C / SIGTERM)")
        return None

    def _wait_for_servers(self, poll_s: float) -> Optional[LaunchResult]:
        """Waits until every server of `server_ports` listens; a result if the run must end."""
        deadline = time.monotonic() + self._server_start_timeout_s
        while True:
            ended = self._failed_or_stopped()
            if ended is not None:
                return ended
            waiting = [n for n, port in self._server_ports.items() if not port_in_use(port)]
            if not waiting:
                return None
            exited = [n for n in waiting if self._jobs[n].process.poll() is not None]
            if exited:
                return self._failure(self._jobs[exited[0]])
            if time.monotonic() > deadline:
                ports = ", ".join(f"{n} (port {self._server_ports[n]})" for n in waiting)
                return self._result(
                    1,
                    f"{ports} did not listen within {self._server_start_timeout_s:.0f} s; see "
                    f"their logs in {self._log_dir}",
                )
            time.sleep(poll_s)

    def _watch(self, poll_s: float) -> LaunchResult:
        learner_done_at: Optional[float] = None
        while True:
            ended = self._failed_or_stopped()
            if ended is not None:
                return ended
            clients = [j for n, j in self._jobs.items() if not is_server(n)]
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
            stopped = [j for n, j in self._jobs.items() if is_server(n) and j.process.poll() == 0]
            if stopped:  # a server never exits on its own before the learner is done
                return self._failure(stopped[0])
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
        """SIGTERM the clients and wait, then the servers (they checkpoint on the way out)."""
        clients = [j for n, j in self._jobs.items() if not is_server(n)]
        for job in clients:
            job.signal(signal.SIGTERM)
        self._wait_or_kill(clients, "to stop")
        servers = [j for n, j in self._jobs.items() if is_server(n)]
        if self._before_servers_stop is not None and clients:
            try:
                self._before_servers_stop()
            except Exception as error:  # noqa: BLE001  (a report must not keep servers up)
                self._say(f"could not read the servers before stopping them: {error}")
        for job in servers:
            job.signal(signal.SIGTERM)
        its = "its replay checkpoint" if len(servers) == 1 else "their replay checkpoints"
        self._wait_or_kill(servers, f"to write {its} and stop")
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
        points = read_results(path)
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


def print_shards(
    shards: Sequence[Any], exit_codes: Mapping[str, Optional[int]], console: TextIO = sys.stdout
) -> None:
    """One line per replay shard: what it held, took in and gave out at the end, and its exit.

    `shards` are `status.ShardCounts` in shard order (empty when the run ended
    before the clients started: nothing is printed then).
    """
    for index, (shard, name) in enumerate(zip(shards, server_names(len(shards)))):
        code = exit_codes.get(name)
        ended = "" if code is None else f"; exit code {code}"
        if shard.replay is None:
            console.write(
                f"Replay shard {index} ({name}, {shard.address}): did not answer at the end "
                f"({shard.error}){ended}\n"
            )
            continue
        r, k = shard.replay, shard.replay.transitions_per_item
        console.write(
            f"Replay shard {index} ({name}, {shard.address}): {k * r.size} of {k * r.max_size} "
            f"transitions stored, {k * r.inserts} inserted, {k * r.samples} sampled{ended}\n"
        )
