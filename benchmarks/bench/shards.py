"""Replay shards mode: inserts/s and samples/s with 1, 2, 4 replay server processes.

For each S in --shard_counts (alternating over --repeats rounds), S
`python -m sac_distributed.bin.reverb_server --num_replay_shards=S
--replay_shard=i` processes start fresh. Then:

  insert phase  --writers writer processes (bench.shard_worker), writer w on
                shard w % S, each a TransitionWriter writing as fast as it can
                for --duration s; the rate is the servers' own insert count.
  sample phase  --samplers processes, sampler j drawing batches from shard
                j % S through replay.make_dataset on that shard alone; the
                rate is the sum of what they drew.

Before the shard counts, each round also measures one writer against one
idle server: the rate a writer reaches when nothing else slows it. During
every window the CPU time of each server, of the workers and of the whole
machine is read from /proc, so the report shows where the time went: a
server-bound run has writers far below their unhindered rate and a machine
with idle CPU left; a machine-bound one has every core busy.

With --server_cpus=X each shard's server runs in its own cgroup with a CFS
quota of X CPUs (bench.cgroups), as if each shard had a machine of X CPUs to
itself; the report then gives each server's CPU use as a share of X and how
often the quota ran out, and a server at its cap on a machine with CPU left
is what held the inserts back.

The worker processes start once (their TensorFlow import is slow) and are
reused by every window. No learner runs here: a learner over all shards needs
a make_dataset that samples from several servers.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import reverb
from absl import logging

import sac_distributed
from benchmarks.bench.cgroups import CpuCap
from benchmarks.bench.experience import inserted_items
from benchmarks.bench.fixtures import Bench, LearnerLoopDriver
from benchmarks.bench.servers import ServerProcess, our_server_process
from benchmarks.bench.settings import Settings
from benchmarks.bench.timing import lead_in_for, median, timed_rate
from sac_distributed import replay
from sac_distributed.config import ClientConfig, Hyperparams

WORKER_START_TIMEOUT_S = 600.0  # many TensorFlow imports at once on a busy machine
REPLY_TIMEOUT_S = 180.0  # a prepare (connect, trace a dataset) or a window's wrap-up
COMMAND_MARGIN_S = 1.0  # from sending a window's times to its lead-in start
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Above this share of all cores busy, the machine (not one server) caps the rates.
MACHINE_BOUND_BUSY = 0.9
# Writers that alone would insert this many times what the servers took are held back.
SERVER_BOUND_OFFERED = 1.5
# A capped server using at least this share of its --server_cpus is at its cap.
SERVER_AT_CAP = 0.9


class Worker:
    """A bench.shard_worker child process and its JSON request/reply lines."""

    def __init__(self, s: Settings, hp: Hyperparams, index: int, log_path: str):
        self._log_path = log_path
        self._log = open(log_path, "w")
        argv = [
            sys.executable,
            "-m",
            "benchmarks.bench.shard_worker",
            f"--env_name={s.env_name}",
            f"--transitions_per_item={hp.transitions_per_item}",
            f"--seed={s.seed + index}",
        ]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
            env=_worker_env(),
        )

    def send(self, request: Dict[str, object]) -> None:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def receive(self, timeout_s: float = REPLY_TIMEOUT_S) -> Dict[str, object]:
        """The next reply; raises with the worker's log if it fails or dies."""
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if ready else ""
        reply = json.loads(line) if line else {"error": f"no reply within {timeout_s:.0f} s"}
        if "error" in reply:
            with open(self._log_path) as f:
                tail = f.read()[-2000:]
            raise RuntimeError(f"Worker {self.proc.pid}: {reply['error']}\n--- its log ---\n{tail}")
        return reply

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.send({"cmd": "exit"})
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def _worker_env() -> Dict[str, str]:
    """This environment, with benchmarks and the sac_distributed this process uses importable."""
    bench_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(sac_distributed.__file__)))
    env = dict(os.environ)
    paths = [bench_root, package_root, env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


class Usage(NamedTuple):
    """Counters read at one moment of a window."""

    time: float
    inserted: Tuple[int, ...]  # items each server accepted since it started
    server_cpu_s: Tuple[float, ...]
    worker_cpu_s: Tuple[float, ...]
    machine_busy_ticks: int
    machine_ticks: int
    # (CFS periods, throttled periods) of each capped server's cgroup; () uncapped
    server_throttling: Tuple[Tuple[int, int], ...] = ()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def machine_cpu_ticks() -> Tuple[int, int]:
    """(busy, total) ticks of all CPUs since boot, from /proc/stat; idle and iowait
    count as not busy."""
    with open("/proc/stat") as f:
        values = [int(x) for x in f.readline().split()[1:9]]
    return sum(values) - values[3] - values[4], sum(values)


def _snapshot(
    servers: Sequence[ServerProcess],
    clients: Sequence[reverb.Client],
    workers: Sequence[Worker],
    caps: Sequence[CpuCap],
) -> Usage:
    busy, total = machine_cpu_ticks()
    return Usage(
        time=time.monotonic(),
        inserted=tuple(inserted_items(c, replay.REPLAY_TABLE) for c in clients),
        server_cpu_s=tuple(process_cpu_seconds(x.proc.pid) for x in servers),
        worker_cpu_s=tuple(process_cpu_seconds(w.proc.pid) for w in workers),
        machine_busy_ticks=busy,
        machine_ticks=total,
        server_throttling=tuple(cap.throttling() for cap in caps),
    )


def usage_between(
    a: Usage,
    b: Usage,
    k: int,
    worker_rates: Sequence[float],
    server_cpus: Optional[float] = None,
) -> Dict[str, float]:
    """Rates and CPU use over one window, from the counters at its ends.

    With `server_cpus` (each server's cap) it adds `server_cpu_of_cap`, the
    servers' mean CPU use over their cap, and `server_throttled`, the share of
    their CFS periods in which the quota ran out.
    """
    dt = b.time - a.time
    server_cores = [(y - x) / dt for x, y in zip(a.server_cpu_s, b.server_cpu_s)]
    usage = {
        "server_inserts_per_s": k * (sum(b.inserted) - sum(a.inserted)) / dt,
        "workers_per_s": float(sum(worker_rates)),
        "slowest_worker_per_s": float(min(worker_rates)),
        "fastest_worker_per_s": float(max(worker_rates)),
        "server_cpu_cores": sum(server_cores),
        "busiest_server_cpu_cores": max(server_cores),
        "worker_cpu_cores": (sum(b.worker_cpu_s) - sum(a.worker_cpu_s)) / dt,
        "machine_cpu_busy": (b.machine_busy_ticks - a.machine_busy_ticks)
        / max(b.machine_ticks - a.machine_ticks, 1),
    }
    if server_cpus is not None:
        usage["server_cpu_of_cap"] = sum(server_cores) / len(server_cores) / server_cpus
        periods = sum(y[0] - x[0] for x, y in zip(a.server_throttling, b.server_throttling))
        throttled = sum(y[1] - x[1] for x, y in zip(a.server_throttling, b.server_throttling))
        usage["server_throttled"] = throttled / max(periods, 1)
    return usage


def _window(
    workers: Sequence[Worker],
    prepares: Sequence[Dict[str, object]],
    run_cmd: str,
    servers: Sequence[ServerProcess],
    clients: Sequence[reverb.Client],
    s: Settings,
    k: int,
    caps: Sequence[CpuCap] = (),
) -> Dict[str, float]:
    """Prepares every worker, runs them all through one timed window, reads the usage."""
    for worker, request in zip(workers, prepares):
        worker.send(request)
    for worker in workers:
        worker.receive()
    start = time.monotonic() + COMMAND_MARGIN_S + lead_in_for(s.duration)
    end = start + s.duration
    for worker in workers:
        worker.send({"cmd": run_cmd, "start": start, "end": end})
    _sleep_until(start)
    a = _snapshot(servers, clients, workers, caps)
    _sleep_until(end)
    b = _snapshot(servers, clients, workers, caps)
    rates = [float(worker.receive()["per_s"]) for worker in workers]
    return usage_between(a, b, k, rates, caps[0].cpus if caps else None)


def _sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.monotonic()))


class Shards(NamedTuple):
    """The running shard servers of one measurement, their clients and CPU caps."""

    servers: List[ServerProcess]
    clients: List[reverb.Client]
    caps: List[CpuCap]  # one per server, or none when uncapped


@contextlib.contextmanager
def _shard_servers(
    root_dir: str, s: Settings, hp: Hyperparams, n: int, server_cpus: Optional[float] = None
) -> Iterator[Shards]:
    """`n` server processes, shard i of n each, started together; stopped (SIGKILL) after.

    Capacity is n x the preset's, so that each shard holds the preset's full
    capacity once the server divides it by --num_replay_shards. With
    `server_cpus`, each server joins its own CPU-capped cgroup once it answers
    (its start-up runs uncapped); the cgroups are removed after the servers
    are stopped, on errors too.
    """
    with contextlib.ExitStack() as stack:
        servers, caps = [], []
        for i in range(n):
            if server_cpus is not None:
                name = f"sac_bench_{os.getpid()}_{os.path.basename(root_dir)}_{i}"
                caps.append(stack.enter_context(CpuCap(server_cpus, name)))
            shard_dir = os.path.join(root_dir, f"shard_{i}")
            os.makedirs(shard_dir, exist_ok=True)
            flags = [f"--num_replay_shards={n}", f"--replay_shard={i}"]
            capacity = hp.replay_buffer_capacity * n
            server = our_server_process(shard_dir, s.env_name, hp, capacity, flags)
            servers.append(stack.enter_context(server))
        clients = [server.connect() for server in servers]
        for cap, server in zip(caps, servers):
            cap.add(server.proc.pid)
        yield Shards(servers, clients, caps)


def _measure_writer_alone(bench: Bench, workers: Sequence[Worker], name: str) -> Dict[str, float]:
    """One writer against one idle, uncapped server: a writer's unhindered insert rate."""
    s, hp = bench.settings, bench.hparams
    with _shard_servers(bench.tmpdir(name), s, hp, 1) as (servers, clients, _):
        prepare = [{"cmd": "prepare_writer", "address": servers[0].address}]
        usage = _window(workers[:1], prepare, "write", servers, clients, s, hp.transitions_per_item)
    return {
        "inserts_per_s": usage["server_inserts_per_s"],
        "server_cpu_cores": usage["server_cpu_cores"],
        "writer_cpu_cores": usage["worker_cpu_cores"],
        "machine_cpu_busy": usage["machine_cpu_busy"],
    }


def _measure_shards(bench: Bench, workers: Sequence[Worker], n: int, name: str) -> Dict[str, float]:
    """`n` shards: the insert phase, then the sample phase on what it wrote."""
    s, hp = bench.settings, bench.hparams
    k = hp.transitions_per_item
    with _shard_servers(bench.tmpdir(name), s, hp, n, s.server_cpus) as shards:
        servers, clients, caps = shards
        addresses = [server.address for server in servers]
        writes = [{"cmd": "prepare_writer", "address": addresses[w % n]} for w in range(s.writers)]
        insert = _window(workers[: s.writers], writes, "write", servers, clients, s, k, caps)
        samples = [
            {"cmd": "prepare_sampler", "address": addresses[j % n], "batch_size": hp.batch_size}
            for j in range(s.samplers)
        ]
        sample = _window(workers[: s.samplers], samples, "sample", servers, clients, s, k, caps)
        learner_steps_per_s = _learner_steps_per_s(bench, addresses, name)
    result = {
        "inserts_per_s": insert["server_inserts_per_s"],
        "writers_reported_inserts_per_s": insert["workers_per_s"],
        "slowest_writer_inserts_per_s": insert["slowest_worker_per_s"],
        "insert_server_cpu_cores": insert["server_cpu_cores"],
        "insert_busiest_server_cpu_cores": insert["busiest_server_cpu_cores"],
        "insert_writer_cpu_cores": insert["worker_cpu_cores"],
        "insert_machine_cpu_busy": insert["machine_cpu_busy"],
        "samples_per_s": sample["workers_per_s"],
        "sample_server_cpu_cores": sample["server_cpu_cores"],
        "sample_sampler_cpu_cores": sample["worker_cpu_cores"],
        "sample_machine_cpu_busy": sample["machine_cpu_busy"],
        "learner_steps_per_s": learner_steps_per_s,
    }
    if caps:
        result["insert_server_cpu_of_cap"] = insert["server_cpu_of_cap"]
        result["insert_server_throttled"] = insert["server_throttled"]
        result["sample_server_cpu_of_cap"] = sample["server_cpu_of_cap"]
    return result


def _learner_steps_per_s(bench: Bench, addresses: Sequence[str], name: str) -> float:
    """SGD steps/s of a LearnerLoop sampling from every shard (variables on the first),
    on what the insert phase wrote, with no writer or sampler running."""
    client_config = ClientConfig(",".join(addresses), addresses[0])
    driver = LearnerLoopDriver(bench, client_config, name=f"learner_{name}")
    return timed_rate(driver.step)(bench.settings.duration)


def _start_workers(bench: Bench) -> List[Worker]:
    """max(--writers, --samplers) worker processes, each past its start-up."""
    s = bench.settings
    logs = bench.tmpdir("workers")
    count = max(s.writers, s.samplers)
    logging.info("Starting %d worker processes.", count)
    workers: List[Worker] = []
    try:
        for i in range(count):
            workers.append(Worker(s, bench.hparams, i, os.path.join(logs, f"worker_{i}.log")))
        for worker in workers:
            worker.receive(WORKER_START_TIMEOUT_S)
    except BaseException:
        for worker in workers:
            worker.close()
        raise
    return workers


def run_replay_shards(s: Settings) -> Dict[str, object]:
    """Every shard count of --shard_counts in alternating rounds; medians per count."""
    bench = Bench(s)
    load_before = os.getloadavg()[0]
    alone: List[Dict[str, float]] = []
    runs: Dict[str, List[Dict[str, float]]] = {}
    workers: List[Worker] = []
    try:
        workers = _start_workers(bench)
        for r in range(s.repeats):
            logging.info("Round %d/%d: one writer, one idle server.", r + 1, s.repeats)
            alone.append(_measure_writer_alone(bench, workers, f"alone_{r}"))
            for n in s.shard_counts:
                logging.info("Round %d/%d: %d shard(s).", r + 1, s.repeats, n)
                result = _measure_shards(bench, workers, n, f"shards_{n}_{r}")
                logging.info("%d shard(s): %s", n, result)
                runs.setdefault(str(n), []).append(result)
    finally:
        for worker in workers:
            worker.close()
        bench.close()
    return summarize(s, bench.hparams, alone, runs, load_before)


def summarize(
    s: Settings,
    hp: Hyperparams,
    alone: List[Dict[str, float]],
    runs: Dict[str, List[Dict[str, float]]],
    load_before: float,
) -> Dict[str, object]:
    """Medians per shard count, speed-ups over the fewest shards, and the limit read."""
    writer_alone = {key: median([a[key] for a in alone]) for key in alone[0]}
    summary = {n: {key: median([r[key] for r in rs]) for key in rs[0]} for n, rs in runs.items()}
    base = summary[str(min(s.shard_counts))]
    for r in summary.values():
        r["insert_speedup"] = r["inserts_per_s"] / base["inserts_per_s"]
        r["sample_speedup"] = r["samples_per_s"] / base["samples_per_s"]
        if "learner_steps_per_s" in r:
            r["learner_speedup"] = r["learner_steps_per_s"] / base["learner_steps_per_s"]
        r["per_writer_inserts_per_s"] = r["inserts_per_s"] / s.writers
        r["offered_load"] = s.writers * writer_alone["inserts_per_s"] / r["inserts_per_s"]
        r["insert_limit"] = insert_limit(
            r["insert_machine_cpu_busy"], r["offered_load"], r.get("insert_server_cpu_of_cap")
        )
    return {
        "mode": "replay_shards",
        "replay_shards": summary,
        "writer_alone": writer_alone,
        "config": {
            "env_name": s.env_name,
            "transitions_per_item": hp.transitions_per_item,
            "batch_size": hp.batch_size,
            "writers": s.writers,
            "samplers": s.samplers,
            "server_cpus": s.server_cpus,
            "duration": s.duration,
            "repeats": s.repeats,
            "shard_capacity": hp.replay_buffer_capacity,
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
        },
        "runs": {"writer_alone": alone, **runs},
    }


def insert_limit(
    machine_cpu_busy: float, offered_load: float, server_cpu_of_cap: Optional[float] = None
) -> str:
    """What capped the insert rate, as far as CPU use and the writers' rates tell.

    "machine": every core was (nearly) busy, so more servers cannot help.
    "server": CPU was left, and either the servers used at least SERVER_AT_CAP
    of their --server_cpus cap (`server_cpu_of_cap`; None when uncapped), so
    they could not have gone faster, or the writers together would have
    inserted SERVER_BOUND_OFFERED times more had each run at its unhindered rate.
    "writers": neither; the writers did not offer much more than was taken.
    """
    if machine_cpu_busy >= MACHINE_BOUND_BUSY:
        return "machine"
    if server_cpu_of_cap is not None and server_cpu_of_cap >= SERVER_AT_CAP:
        return "server"
    if offered_load >= SERVER_BOUND_OFFERED:
        return "server"
    return "writers"


def format_replay_shards_table(result: Dict[str, object]) -> str:
    """The human-readable report: rates, speed-ups and CPU use per shard count."""
    c, alone = result["config"], result["writer_alone"]
    cap = c.get("server_cpus")
    capped = f"each server capped at {cap:g} CPU" if cap else "servers uncapped"
    lines = [
        f"Replay shards on {c['env_name']} (K={c['transitions_per_item']}, {c['writers']} "
        f"writer and {c['samplers']} sampler processes, batch {c['batch_size']}, "
        f"{c['duration']:g} s windows, {c['repeats']} round(s), median, {c['cpus']} CPUs, "
        f"load {c['load_average_before']:.1f} before, {capped})",
        f"One writer, idle server: {alone['inserts_per_s']:.0f} inserts/s (server "
        f"{alone['server_cpu_cores']:.2f} cores, writer {alone['writer_cpu_cores']:.2f}, "
        f"machine {100 * alone['machine_cpu_busy']:.0f}% busy)",
        f"{'shards':>6}{'inserts/s':>11}{'x':>6}{'/writer':>9}{'offered':>9}"
        f"{'server cpu':>12}{'of cap':>8}{'thrott':>8}{'writer cpu':>12}{'busy':>6}{'limit':>9}"
        f"{'samples/s':>11}{'x':>6}{'server cpu':>12}{'busy':>6}{'SGD/s':>8}{'x':>6}",
    ]
    for n, r in result["replay_shards"].items():
        lines.append(
            f"{n:>6}{r['inserts_per_s']:>11.0f}{r['insert_speedup']:>6.2f}"
            f"{r['per_writer_inserts_per_s']:>9.0f}{r['offered_load']:>9.2f}"
            f"{r['insert_server_cpu_cores']:>12.2f}"
            f"{_percent(r.get('insert_server_cpu_of_cap')):>8}"
            f"{_percent(r.get('insert_server_throttled')):>8}"
            f"{r['insert_writer_cpu_cores']:>12.2f}"
            f"{100 * r['insert_machine_cpu_busy']:>5.0f}%{r['insert_limit']:>9}"
            f"{r['samples_per_s']:>11.0f}{r['sample_speedup']:>6.2f}"
            f"{r['sample_server_cpu_cores']:>12.2f}{100 * r['sample_machine_cpu_busy']:>5.0f}%"
            f"{r.get('learner_steps_per_s', float('nan')):>8.0f}"
            f"{r.get('learner_speedup', float('nan')):>6.2f}"
        )
    lines.append(
        "inserts and samples in transitions/s; cpu in cores (all shards, all writers); "
        "offered = writers x one writer's idle-server rate / inserts; of cap = a server's "
        "cpu / --server_cpus (mean over shards), thrott = share of its CFS periods that "
        "hit the cap; SGD/s = a learner sampling batches from all shards, alone on the "
        "machine"
    )
    return "\n".join(lines)


def _percent(share: Optional[float]) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"
