"""--engine=threads: every job of a run as a thread of the launcher's own process.

Acme calls this a local multi-threaded launch. The jobs are the functions the
binaries run (`jobs.run_server`, `run_learner`, `run_actor`, `run_evaluator`),
and they talk to the Reverb servers over gRPC on localhost, as with the local
engine. What changes is the start-up: TensorFlow, Reverb and TF-Agents are
imported once instead of once per process (3.4-3.6 s of CPU each on the
2-core machine), which matters on runs that take seconds to minutes.

What a process per job gives is lost: there is one console log instead of
logs/<job>.log; an exception in any job ends the whole run (its traceback is
logged and the run exits 1); and one job cannot be killed and restarted
alone. For those, and for anything long, use the local engine.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, TextIO

from absl import logging

from sac_distributed import jobs
from sac_distributed.errors import StoppedWhileWaitingError
from sac_distributed.launchers.job_definitions import EVALUATOR, LEARNER, RunConfigs, server_names
from sac_distributed.launchers.supervisor import LaunchResult
from sac_distributed.runtime import port_in_use

# How long clients get to stop, and the learner's peers to see its done flag.
GRACE_S = 60.0
_POLL_S = 0.2


@dataclasses.dataclass
class _Job:
    name: str
    target: Callable[[], Any]
    thread: Optional[threading.Thread] = None
    error: Optional[BaseException] = None
    finished: bool = False

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.target()
        except StoppedWhileWaitingError as stopped:  # a stop signal, not a failure
            logging.info("%s: %s", self.name, stopped)
        except BaseException as error:  # noqa: BLE001  (reported by the watcher)
            logging.error("%s failed:\n%s", self.name, traceback.format_exc())
            self.error = error
        finally:
            self.finished = True

    def why(self) -> str:
        return f"{type(self.error).__name__}: {self.error}"

    @property
    def exit_code(self) -> Optional[int]:
        if not self.finished:
            return None
        return 1 if self.error is not None else 0


class ThreadRun:
    """Starts the servers, then the clients, as threads; watches them; stops them
    together (clients first, then the servers, which write their replay checkpoints)."""

    def __init__(
        self,
        configs: RunConfigs,
        ports: List[int],
        should_stop: Callable[[], bool],
        console: TextIO = sys.stdout,
        before_servers_stop: Optional[Callable[[], None]] = None,
        server_start_timeout_s: float = 300.0,
    ):
        self._ports = dict(zip(server_names(len(configs.servers)), ports))
        self._should_stop = should_stop
        self._console = console
        self._before_servers_stop = before_servers_stop
        self._server_start_timeout_s = server_start_timeout_s
        self._servers_stop = threading.Event()
        self._clients_stop = threading.Event()
        self._servers = [
            _Job(
                name, _bind(jobs.run_server, c, self._servers_stop.is_set, self._servers_stop.wait)
            )
            for name, c in zip(self._ports, configs.servers)
        ]
        client_stop = self._clients_stop.is_set
        self._clients = [_Job(LEARNER, _bind(jobs.run_learner, configs.learner, client_stop))]
        self._clients += [
            _Job(f"actor_{c.task}", _bind(jobs.run_actor, c, client_stop)) for c in configs.actors
        ]
        self._clients.append(
            _Job(EVALUATOR, _bind(jobs.run_evaluator, configs.evaluator, client_stop))
        )

    def run(self) -> LaunchResult:
        try:
            for job in self._servers:
                job.start()
            result = self._wait_for_servers()
            if result is not None:
                return result
            for job in self._clients:
                job.start()
            return self._watch()
        finally:
            self._stop_all()

    def _wait_for_servers(self) -> Optional[LaunchResult]:
        deadline = time.monotonic() + self._server_start_timeout_s
        while True:
            failed = self._first_failure(self._servers)
            if failed is not None:
                return self._result(1, f"{failed.name} failed to start: {failed.why()}")
            if self._should_stop():
                return self._result(0, "stopped on request (Ctrl-C / SIGTERM)")
            waiting = [n for n, port in self._ports.items() if not port_in_use(port)]
            if not waiting:
                return None
            if time.monotonic() > deadline:
                return self._result(
                    1, f"{waiting} did not listen within {self._server_start_timeout_s:.0f} s"
                )
            time.sleep(_POLL_S)

    def _watch(self) -> LaunchResult:
        learner = self._clients[0]
        learner_done_at: Optional[float] = None
        while True:
            if self._should_stop():
                return self._result(0, "stopped on request (Ctrl-C / SIGTERM)")
            failed = self._first_failure(self._servers + self._clients)
            if failed is not None:
                return self._result(1, f"{failed.name} failed: {failed.why()} (traceback above)")
            if any(job.finished for job in self._servers):
                return self._result(1, "a replay server stopped before the learner finished")
            if all(job.finished for job in self._clients):
                return self._result(0, "training finished; every job returned")
            if learner.finished and learner_done_at is None:
                learner_done_at = time.monotonic()
                self._say(f"learner finished; waiting up to {GRACE_S:.0f} s for the others")
            if learner_done_at is not None and time.monotonic() - learner_done_at > GRACE_S:
                late = [j.name for j in self._clients if not j.finished]
                return self._result(1, f"learner finished but {late} did not return in time")
            time.sleep(_POLL_S)

    @staticmethod
    def _first_failure(job_list: List[_Job]) -> Optional[_Job]:
        return next((j for j in job_list if j.error is not None), None)

    def _stop_all(self) -> None:
        self._clients_stop.set()
        self._join(self._clients, "clients")
        if self._before_servers_stop is not None and any(j.thread for j in self._clients):
            try:
                self._before_servers_stop()
            except Exception as error:  # noqa: BLE001  (a report must not keep servers up)
                self._say(f"could not read the servers before stopping them: {error}")
        self._servers_stop.set()
        self._join(self._servers, "servers (writing their replay checkpoints)")

    def _join(self, job_list: List[_Job], what: str) -> None:
        deadline = time.monotonic() + GRACE_S
        for job in job_list:
            if job.thread is not None:
                job.thread.join(max(0.0, deadline - time.monotonic()))
        late = [j.name for j in job_list if j.thread is not None and j.thread.is_alive()]
        if late:
            self._say(f"{late} did not stop within {GRACE_S:.0f} s; leaving them to the exit")

    def _result(self, exit_code: int, message: str) -> LaunchResult:
        codes: Dict[str, Optional[int]] = {
            j.name: j.exit_code for j in self._servers + self._clients
        }
        return LaunchResult(exit_code, message, codes)

    def _say(self, text: str) -> None:
        print(f"sac-launch: {text}", file=self._console, flush=True)


def _bind(fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    return lambda: fn(*args)
