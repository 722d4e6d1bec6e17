"""The chaos run's supervisor loop: start, kill, restart, poll, record (see chaos.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from typing import Dict, List, Optional

from benchmarks.bench.chaos import (
    CLIENT_EXIT_GRACE_S,
    COUNTS_EVERY_S,
    LAST_KILL_FRACTION,
    LEDGER_FILE,
    POLL_S,
    REPLAY_WRITTEN,
    SIGNALS,
    TERM_GRACE_S,
    ChaosSettings,
    Kill,
    Ledger,
    make_specs,
    newest_complete_replay_checkpoint,
    newest_learner_checkpoint,
    read_replay_checkpoint,
)
from sac_distributed import paths
from sac_distributed.launchers.job_definitions import LEARNER, JobSpec, is_server
from sac_distributed.runtime import port_in_use

_TRAIN_STEP = re.compile(r"train_step (\d+): loss")
_RESTORED = re.compile(r"Replay restored from (\S+)\.")
_RECOVERY_LIMIT_S = 600.0


# What an actor and the evaluator log when they stop because the learner published its
# done flag; the learner still saves metrics and exits after that, so they may exit first.
_RUN_FINISHED_LINES = ("stopping (learner finished)", "evaluator done.")


def _says_the_run_finished(proc: _Proc) -> bool:
    """Whether this incarnation's own log says it stopped at the end of the run."""
    with open(proc.log_path, errors="replace") as f:
        f.seek(proc.log_offset)
        text = f.read()
    return any(line in text for line in _RUN_FINISHED_LINES)


def shard_of(job: str) -> int:
    return int(job.rpartition("_")[2]) if job != "server" else 0


class _Proc:
    """One incarnation of a job: its process and where its part of the log starts."""

    def __init__(self, spec: JobSpec, settings: ChaosSettings, log_path: str):
        self.spec = spec
        self.log_path = log_path
        self.log_offset = os.path.getsize(log_path) if os.path.exists(log_path) else 0
        self.read_to = self.log_offset
        env = dict(os.environ)
        if settings.source_dir:
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (settings.source_dir, env.get("PYTHONPATH", "")) if p
            )
        with open(log_path, "a") as log:
            self.process = subprocess.Popen(
                spec.argv(settings.python),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # signals go to the job's group, as in the supervisor
                cwd=settings.source_dir or None,
                env=env,
            )
        self.started = time.time()
        self.booked = False  # its exit is in the ledger

    def new_lines(self) -> List[str]:
        """Complete log lines written since the last call."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.read_to)
                data = f.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        self.read_to += end
        return data[:end].decode("utf-8", "replace").splitlines()

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass


class ChaosRun:
    """Runs one chaos run to its end; `run()` returns the ledger's path."""

    def __init__(self, settings: ChaosSettings):
        self.settings = settings
        self.root = settings.launch.root_dir
        os.makedirs(settings.out_dir, exist_ok=True)
        os.makedirs(paths.log_dir(self.root), exist_ok=True)
        self.ledger = Ledger(os.path.join(settings.out_dir, LEDGER_FILE))
        self.specs, self.ports, self.addresses = make_specs(settings)
        self.procs: Dict[str, _Proc] = {}
        self.down: Dict[str, dict] = {}  # job -> {"kill": record, "exited": t, "restart_at": t}
        self.learner_step: Optional[int] = None
        self.learner_step_wall = 0.0
        self.first_step_wall = 0.0
        self.recoveries: Dict[str, dict] = {}  # server job -> open recovery record
        self.last_restart_wall = 0.0
        self.next_counts = 0.0
        self.num_iterations = settings.launch.hparams.num_iterations

    # --- starting and stopping ---------------------------------------------------------

    def _start(self, spec: JobSpec, event: str) -> None:
        proc = _Proc(
            spec, self.settings, os.path.join(paths.log_dir(self.root), f"{spec.name}.log")
        )
        self.procs[spec.name] = proc
        self.ledger.write(
            event,
            job=spec.name,
            pid=proc.process.pid,
            log_offset=proc.log_offset,
            argv=spec.argv(self.settings.python) if event == "start" else None,
        )

    def _start_all(self) -> None:
        servers = [s for s in self.specs if is_server(s.name)]
        for spec in servers:
            self._start(spec, "start")
        deadline = time.monotonic() + 600
        while not all(port_in_use(self.ports[s.name]) for s in servers):
            if time.monotonic() > deadline or any(
                self.procs[s.name].process.poll() is not None for s in servers
            ):
                raise RuntimeError(f"the servers did not start; see {paths.log_dir(self.root)}")
            time.sleep(POLL_S)
        for spec in self.specs:
            if not is_server(spec.name):
                self._start(spec, "start")

    def stop_everything(self) -> None:
        """SIGKILL whatever still runs (an error path; the normal end is `_finish`)."""
        for proc in self.procs.values():
            if proc.process.poll() is None:
                proc.signal(signal.SIGKILL)
                proc.process.wait()

    # --- the loop ----------------------------------------------------------------------

    def run(self) -> str:
        ledger = self.ledger
        ledger.write(
            "run",
            root_dir=self.root,
            addresses=list(self.addresses),
            num_iterations=self.num_iterations,
            kills=[k.__dict__ for k in self.settings.kills],
            min_kills=self.settings.min_kills,
            jobs=[s.name for s in self.specs],
            transitions_per_item=self.settings.launch.hparams.transitions_per_item,
        )
        # The first counts call imports Reverb and TensorFlow: minutes on a loaded
        # machine, long enough for a tiny run to finish before the loop looked at it.
        # Paid here, before any job starts.
        import reverb  # noqa: F401

        from sac_distributed import replay  # noqa: F401

        try:
            self._start_all()
            finished = self._loop()
            self._finish(finished)
        finally:
            self.stop_everything()
            ledger.close()
        return ledger.path

    def _loop(self) -> bool:
        kills: List[Kill] = list(self.settings.kills)
        give_up = time.monotonic() + self.settings.max_run_s
        while time.monotonic() < give_up:
            self._scan_logs()
            self._poll_counts()
            if self._check_exits():
                return True
            self._restart_due()
            self._escalate_terms()
            if kills and self._kill_due(kills[0]):
                self._fire(kills.pop(0))
            time.sleep(POLL_S)
        self.ledger.write("gave_up", after_s=self.settings.max_run_s, kills_left=len(kills))
        return False

    def _kill_due(self, kill: Kill) -> bool:
        if self.down or self.learner_step is None:
            return False
        if self.learner_step_wall <= self.last_restart_wall:  # not trained since the restart
            return False
        if self.learner_step < kill.at_step:
            return False
        if self.learner_step >= LAST_KILL_FRACTION * self.num_iterations:
            return False
        return time.time() >= max(self.last_restart_wall, self.first_step_wall) + kill.after_s

    def _fire(self, kill: Kill) -> None:
        proc = self.procs[kill.job]
        before = dict(
            job=kill.job,
            signal=kill.signal,
            pid=proc.process.pid,
            learner_step_logged=self.learner_step,
            learner_checkpoint=newest_learner_checkpoint(self.root),
            counts=self._read_counts(),
        )
        proc.signal(SIGNALS[kill.signal])
        record = self.ledger.write("kill", **before)
        self.down[kill.job] = {
            "kill": record,
            "exited": None,
            "kill_mono": time.monotonic(),
            "delay": kill.restart_delay_s,
        }

    def _check_exits(self) -> bool:
        """Books exits; True when the learner finished (exit 0, not killed)."""
        finished = False
        for name, proc in self.procs.items():
            code = proc.process.poll()
            if code is None:
                continue
            entry = self.down.get(name)
            if entry is not None:
                if entry["exited"] is None:
                    entry["exited"] = time.monotonic()
                    self.ledger.write(
                        "exit",
                        job=name,
                        code=code,
                        killed=True,
                        after_s=round(entry["exited"] - entry["kill_mono"], 2),
                    )
                continue
            if proc.booked:
                finished = finished or (name == LEARNER and code == 0)
                continue
            proc.booked = True
            if name == LEARNER and code == 0:
                self.ledger.write("exit", job=name, code=code, killed=False)
                finished = True
                continue
            if code == 0 and (self._learner_done() or _says_the_run_finished(proc)):
                self.ledger.write("exit", job=name, code=code, killed=False)
                continue
            # A job died on its own: the supervisor restarts it; the checks count it.
            self.ledger.write("crash", job=name, code=code)
            self.down[name] = {
                "kill": None,
                "exited": time.monotonic(),
                "kill_mono": time.monotonic(),
                "delay": 1.0,
            }
        return finished

    def _learner_done(self) -> bool:
        learner = self.procs[LEARNER].process
        return learner.poll() == 0 and LEARNER not in self.down

    def _restart_due(self) -> None:
        for name, entry in list(self.down.items()):
            if entry["exited"] is None or time.monotonic() < entry["exited"] + entry["delay"]:
                continue
            del self.down[name]
            spec = next(s for s in self.specs if s.name == name)
            extra = {}
            if is_server(name):
                shard = shard_of(name)
                path = newest_complete_replay_checkpoint(self.root, shard)
                counts = read_replay_checkpoint(path, _replay_table()) if path else None
                extra = dict(restore_expected=path, restore_expected_counts=counts)
            if name == LEARNER:
                extra = dict(learner_checkpoint=newest_learner_checkpoint(self.root))
            self._start(spec, "restart")
            self.ledger.write("restart_info", job=name, **extra)
            self.last_restart_wall = time.time()
            if is_server(name):
                self.recoveries[name] = dict(
                    job=name,
                    kill_wall=entry["kill"]["wall"] if entry["kill"] else None,
                    restart_wall=time.time(),
                    base=extra["restore_expected_counts"],
                    listening=None,
                    first_insert=None,
                    first_sample=None,
                )

    def _escalate_terms(self) -> None:
        for name, entry in self.down.items():
            kill = entry["kill"]
            if kill is None or kill["signal"] != "TERM" or entry["exited"] is not None:
                continue
            if time.monotonic() - entry["kill_mono"] > TERM_GRACE_S and not entry.get("escalated"):
                entry["escalated"] = True
                self.procs[name].signal(signal.SIGKILL)
                self.ledger.write("escalated", job=name, after_s=TERM_GRACE_S)

    # --- what the jobs say ---------------------------------------------------------------

    def _scan_logs(self) -> None:
        for name, proc in self.procs.items():
            for line in proc.new_lines():
                if name == LEARNER:
                    match = _TRAIN_STEP.search(line)
                    if match:
                        self._learner_progress(int(match.group(1)))
                elif is_server(name):
                    self._server_line(name, line)

    def _learner_progress(self, step: int) -> None:
        if self.learner_step is None:
            self.first_step_wall = time.time()
            self.ledger.write("first_train_step", step=step)
        self.learner_step, self.learner_step_wall = step, time.time()

    def _server_line(self, name: str, line: str) -> None:
        if REPLAY_WRITTEN in line:
            path = line.split(REPLAY_WRITTEN, 1)[1].rsplit(" (", 1)[0]
            self.ledger.write(
                "replay_checkpoint",
                job=name,
                path=path,
                counts=read_replay_checkpoint(path, _replay_table()),
            )
        match = _RESTORED.search(line)
        if match:
            self.ledger.write(
                "replay_restored",
                job=name,
                path=match.group(1),
                counts=read_replay_checkpoint(match.group(1), _replay_table()),
            )

    def _read_counts(self) -> List[dict]:
        from sac_distributed.tools import status

        shards = status.read_shards(self.addresses)
        return [
            None
            if not s.up
            else dict(
                size=s.replay.size,
                inserts=s.replay.inserts,
                samples=s.replay.samples,
                max_size=s.replay.max_size,
            )
            for s in shards
        ]

    def _poll_counts(self) -> None:
        now = time.monotonic()
        if not self.recoveries and now < self.next_counts:
            return
        self.next_counts = now + COUNTS_EVERY_S
        counts = self._read_counts()
        self.ledger.write("counts", shards=counts)
        for name, rec in list(self.recoveries.items()):
            self._track_recovery(name, rec, counts[shard_of(name)])

    def _track_recovery(self, name: str, rec: dict, counts: Optional[dict]) -> None:
        """From a server restart to its first new insert and first new sample."""
        now = time.time()
        if counts is not None and rec["listening"] is None:
            rec["listening"] = now
        base = rec["base"] or {"inserts": 0, "samples": 0}
        if counts is not None:
            if rec["first_insert"] is None and counts["inserts"] > base["inserts"]:
                rec["first_insert"] = now
            if rec["first_sample"] is None and counts["samples"] > base["samples"]:
                rec["first_sample"] = now
        done = rec["first_insert"] is not None and rec["first_sample"] is not None
        if done or now - rec["restart_wall"] > _RECOVERY_LIMIT_S or self._learner_done():
            del self.recoveries[name]
            self.ledger.write("server_recovery", **rec)

    # --- the end -----------------------------------------------------------------------

    def _finish(self, learner_finished: bool) -> None:
        """Clients exit on the learner's done flag; then final counts; then the servers."""
        deadline = time.monotonic() + CLIENT_EXIT_GRACE_S
        clients = [n for n in self.procs if not is_server(n)]
        while time.monotonic() < deadline:
            self._scan_logs()
            self._check_exits()
            self._restart_due()
            running = [n for n in clients if self.procs[n].process.poll() is None or n in self.down]
            if not running:
                break
            time.sleep(POLL_S)
        for name in clients:
            proc = self.procs[name]
            if proc.process.poll() is None:
                self.ledger.write("stopped_at_end", job=name, signal="TERM")
                proc.signal(signal.SIGTERM)
        for name in clients:
            self._wait(name)
        for rec in list(self.recoveries.values()):
            self.ledger.write("server_recovery", **rec)
        self.recoveries.clear()
        self.ledger.write(
            "final_counts", shards=self._read_counts(), learner_finished=learner_finished
        )
        for name in self.procs:
            if is_server(name):
                self.procs[name].signal(signal.SIGTERM)
        for name in self.procs:
            if is_server(name):
                self._wait(name)
        self._scan_logs()
        self.ledger.write("end")

    def _wait(self, name: str) -> None:
        proc = self.procs[name]
        try:
            proc.process.wait(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.signal(signal.SIGKILL)
            proc.process.wait()
            self.ledger.write("escalated", job=name, after_s=TERM_GRACE_S)
        if not proc.booked:
            proc.booked = True
            self.ledger.write("exit", job=name, code=proc.process.returncode, at_end=True)


def _replay_table() -> str:
    from sac_distributed.replay.signatures import REPLAY_TABLE

    return REPLAY_TABLE
