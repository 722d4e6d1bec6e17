"""Chaos over a run: seeded kills of any job, restarts as a supervisor would, a ledger.

`ChaosRun` starts every job of one run as the processes `sac-launch` starts
(the argv of `job_definitions.job_specs(make_run_configs(...))`, with a few
job-config fields set for a short run: see `ChaosSettings.job_overrides`), then
works through a seeded `Schedule` of kills: each sends SIGKILL or SIGTERM to a
job's process group (server and learner included), waits until the process
has exited, waits a short seeded delay and starts the same argv again, as a
Kubernetes restart loop or Ray's `max_restarts` would. The run ends when the
learner exits 0 at num_iterations; clients still running then are stopped,
the servers' final counts are read, and the servers are stopped (each writes
its replay checkpoint).

The ledger (`ledger.jsonl` in the output directory, one JSON object a line,
each with `t`, seconds since the start, and `wall`, seconds since the epoch)
records every start, kill, exit and restart, the learner's newest checkpoint
at each kill, every replay checkpoint a server wrote (read from its own
files: the replay table's insert and delete counts), the replay counters the
tool polls from each shard (`tools.status.read_shards`), each recovery after
a server restart, and the final counts. `chaos_checks` reads the ledger and
the jobs' logs and decides whether the run kept its promises.

Kills are gated so that each hits a run that trains: kill k fires once its
seeded interval has passed since the previous restart, the learner has
logged a train step since then, and (optionally) the learner has reached
kill k's seeded fraction of num_iterations.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import random
import signal
import sys
import time
import zlib
from typing import Dict, List, Optional, Sequence, Tuple

from sac_distributed import paths
from sac_distributed.config import LaunchConfig
from sac_distributed.launchers import job_definitions
from sac_distributed.launchers.job_definitions import JobSpec, is_server

LEDGER_FILE = "ledger.jsonl"
SIGNALS = {"KILL": signal.SIGKILL, "TERM": signal.SIGTERM}
KINDS = ("server", "learner", "actor", "evaluator")
# How long a SIGTERMed job may take to finish its final work before SIGKILL (the
# README's grace period for the server and learner).
TERM_GRACE_S = 120.0
# After the learner finished: how long actors and evaluator get to see its done flag.
CLIENT_EXIT_GRACE_S = 120.0
POLL_S = 0.25  # the loop's period; replay counters are read this often while recovering
COUNTS_EVERY_S = 2.0  # replay counters are read this often otherwise
REPLAY_WRITTEN = "Replay checkpoint written to "
LAST_KILL_FRACTION = 0.95


def kind_of(job: str) -> str:
    """'server', 'learner', 'actor' or 'evaluator' for a job name."""
    if is_server(job):
        return "server"
    return "actor" if job.startswith("actor_") else job


@dataclasses.dataclass(frozen=True)
class Kill:
    """One planned kill: whom, how, when (gates), and how long the job stays down."""

    job: str
    signal: str  # "KILL" or "TERM"
    after_s: float  # seconds after the previous restart (or the first train step)
    at_step: int  # the learner must have logged this train step (0: no gate)
    restart_delay_s: float  # seconds between the exit and the restart


def make_schedule(
    seed: int,
    jobs: Sequence[str],
    plan: Sequence[Tuple[str, str]],
    interval_s: Tuple[float, float],
    restart_delay_s: Tuple[float, float],
    num_iterations: int,
    step_span: Optional[Tuple[float, float]],
) -> List[Kill]:
    """The kills of `plan`, each (job name or kind, 'KILL' / 'TERM' / 'ANY'), made concrete.

    A kind picks one of its jobs at random; 'ANY' a signal. With `step_span`
    (fractions of num_iterations) kill k also waits for the k-th of sorted
    seeded train steps in that span, so a short run cannot finish before its
    kills are done. Everything is drawn from `random.Random(seed)`.
    """
    rng = random.Random(seed)
    steps = [0] * len(plan)
    if step_span is not None:
        lo, hi = step_span
        steps = sorted(int(rng.uniform(lo, hi) * num_iterations) for _ in plan)
    kills = []
    for (who, sig), step in zip(plan, steps):
        candidates = [j for j in jobs if j == who or kind_of(j) == who]
        if not candidates:
            raise ValueError(f"no job called or of kind {who!r} among {list(jobs)}")
        kills.append(
            Kill(
                job=rng.choice(candidates),
                signal=rng.choice(sorted(SIGNALS)) if sig == "ANY" else sig,
                after_s=round(rng.uniform(*interval_s), 1),
                at_step=step,
                restart_delay_s=round(rng.uniform(*restart_delay_s), 1),
            )
        )
    return kills


def random_plan(seed: int, num_kills: int) -> List[Tuple[str, str]]:
    """`num_kills` (kind, signal) pairs: every kind with both signals first (while
    they last, in seeded order), then kinds and signals drawn at random."""
    rng = random.Random(seed + 1)
    pairs = [(kind, sig) for kind in KINDS for sig in sorted(SIGNALS)]
    rng.shuffle(pairs)
    while len(pairs) < num_kills:
        pairs.append((rng.choice(KINDS), rng.choice(sorted(SIGNALS))))
    return pairs[:num_kills]


@dataclasses.dataclass(frozen=True)
class ChaosSettings:
    """What one chaos run does; `benchmarks/chaos.py` fills it from its flags."""

    launch: LaunchConfig
    out_dir: str
    kills: Tuple[Kill, ...]
    # Job-config fields set for the run ({job kind: {field: value}}), e.g. the
    # servers' replay_checkpoint_interval_s; applied with dataclasses.replace.
    job_overrides: Dict[str, Dict[str, object]]
    python: str = sys.executable
    source_dir: Optional[str] = None  # jobs import sac_distributed from here (PYTHONPATH)
    max_run_s: float = 3600.0  # the whole run gives up (and fails) after this
    # Kills the checks require (None: all of them); no kill fires once the learner
    # has logged LAST_KILL_FRACTION of num_iterations, so a fast learner may leave some.
    min_kills: Optional[int] = None


class Ledger:
    """Appends JSON lines, each stamped with `t` (s since start) and `wall` (epoch s)."""

    def __init__(self, path: str):
        self.path = path
        self.start = time.time()
        self._file = open(path, "a")

    def write(self, event: str, **fields) -> dict:
        now = time.time()
        record = {"event": event, "t": round(now - self.start, 3), "wall": now, **fields}
        self._file.write(json.dumps(record, sort_keys=True) + "\n")
        self._file.flush()
        return record

    def close(self) -> None:
        self._file.close()


def read_ledger(path: str) -> List[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def make_specs(settings: ChaosSettings) -> Tuple[List[JobSpec], Dict[str, int], List[str]]:
    """The run's JobSpecs (job_definitions' argv), each server's port and the addresses."""
    launch = settings.launch
    ports = job_definitions.shard_ports(launch.port, launch.num_replay_shards)
    configs = job_definitions.make_run_configs(launch, ports)
    over = settings.job_overrides

    def replaced(config, kind):
        return dataclasses.replace(config, **over[kind]) if over.get(kind) else config

    configs = job_definitions.RunConfigs(
        servers=tuple(replaced(s, "server") for s in configs.servers),
        learner=replaced(configs.learner, "learner"),
        actors=tuple(replaced(a, "actor") for a in configs.actors),
        evaluator=replaced(configs.evaluator, "evaluator"),
    )
    specs = job_definitions.job_specs(configs)
    names = job_definitions.server_names(len(ports))
    return specs, dict(zip(names, ports)), configs.learner.client.replay_addresses


def read_replay_checkpoint(path: str, table: str) -> Optional[dict]:
    """A replay checkpoint's counters for `table`, read from its tables.tfrecord.

    Returns {inserts, deletes, samples, items, max_size} in Reverb items, or
    None when the files are gone (a later checkpoint tidied it away). The
    records are ZLIB-compressed TFRecords: decompressed and framed here
    (length, crc, data, crc) rather than through a TensorFlow dataset.
    """
    from reverb.cc.checkpointing import checkpoint_pb2

    try:
        with open(os.path.join(path, "tables.tfrecord"), "rb") as f:
            raw = zlib.decompressobj().decompress(f.read())
    except (OSError, zlib.error):
        return None
    offset = 0
    while offset + 12 <= len(raw):
        length = int.from_bytes(raw[offset : offset + 8], "little")
        data = raw[offset + 12 : offset + 12 + length]
        offset += 12 + length + 4
        proto = checkpoint_pb2.PriorityTableCheckpoint.FromString(data)
        if proto.table_name == table:
            limiter = proto.rate_limiter
            return {
                "inserts": int(limiter.insert_count),
                "deletes": int(limiter.delete_count),
                "samples": int(limiter.sample_count),
                "items": int(limiter.insert_count - limiter.delete_count),
                "max_size": int(proto.max_size),
            }
    return None


def newest_complete_replay_checkpoint(root_dir: str, shard: int) -> Optional[str]:
    """The checkpoint a restarting server will restore: the newest with Reverb's DONE
    file, among the kept ones and those finished in `.writing` (adopted on start)."""
    directory = paths.replay_checkpoint_dir(root_dir, shard)
    found = glob.glob(os.path.join(directory, "*", "DONE"))
    found += glob.glob(os.path.join(directory, paths.REPLAY_WRITING_DIR, "*", "DONE"))
    found = [os.path.dirname(p) for p in found if paths.REPLAY_UNREADABLE_DIR not in p]
    return max(found, key=os.path.basename, default=None)


def newest_learner_checkpoint(root_dir: str) -> Optional[int]:
    """The train step of the newest learner checkpoint with an index file."""
    steps = []
    for index in glob.glob(paths.checkpoint_index_pattern(root_dir)):
        name = os.path.basename(index)[: -len(".index")]
        number = name.rpartition("-")[2]
        if number.isdigit():
            steps.append(int(number))
    return max(steps, default=None)
