"""Actor scaling mode: N actor processes against one server process, and its report.

For each N in --actor_counts (alternating over --repeats rounds), a fresh
`sac_distributed.bin.reverb_server` gets the policy weights, then N
`sac_distributed.bin.actor` processes run --actor_steps env steps each with
the NumPy collect policy (initial_collect_steps=0). The server's insert
count is polled; `steady` is the insert rate (in transitions) while all N
actors were stepping (from the last actor's first step to the first actor's
stop, read from their logs), `overall` is all transitions / (last stop -
first step).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Dict, List, Sequence, Tuple

import reverb
from absl import logging

from benchmarks.bench.experience import initial_policy_weights, inserted_items
from benchmarks.bench.fixtures import Bench
from benchmarks.bench.servers import measurement_flags, our_server_process
from benchmarks.bench.settings import Settings
from benchmarks.bench.timing import median
from sac_distributed import replay
from sac_distributed.config import Hyperparams
from sac_distributed.replay.variables import VariableContainer

ACTOR_START_MARK = "switching from random to the collect policy"  # logged at an actor's first step
ACTOR_STOP_MARK = "stopping (max_env_steps reached)"
ACTORS_TIMEOUT_S = 600.0
POLL_S = 0.25

Sample = Tuple[float, int]  # (monotonic time, transitions inserted so far)


def run_actor_scaling(s: Settings) -> Dict[str, object]:
    """Every actor count of --actor_counts, in alternating rounds; medians per count."""
    bench = Bench(s)
    hp = bench.hparams
    runs: Dict[str, List[Dict[str, float]]] = {}
    try:
        for round_index in range(s.repeats):
            for n in s.actor_counts:
                logging.info("Round %d/%d: %d actor process(es).", round_index + 1, s.repeats, n)
                result = _run_actors(bench, n, f"scaling_{n}_{round_index}")
                logging.info("%d actors: %s", n, result)
                runs.setdefault(str(n), []).append(result)
    finally:
        bench.close()
    summary = {n: {key: median([r[key] for r in rs]) for key in rs[0]} for n, rs in runs.items()}
    return {
        "mode": "actor_scaling",
        "actor_scaling": summary,
        "config": {
            "env_name": s.env_name,
            "actor_layers": list(hp.actor_fc_layer_params),
            "num_envs": s.num_envs,
            "actor_steps": s.actor_steps,
            "transitions_per_item": hp.transitions_per_item,
            "repeats": s.repeats,
            "cpus": os.cpu_count(),
        },
        "runs": runs,
    }


def _run_actors(bench: Bench, n: int, name: str) -> Dict[str, float]:
    """One server and `n` actors to the end; their steady and overall insert rates."""
    s, hp = bench.settings, bench.hparams
    root_dir = bench.tmpdir(name)
    with our_server_process(root_dir, s.env_name, hp, hp.replay_buffer_capacity) as server:
        client = server.connect()
        VariableContainer(client).push(initial_policy_weights(bench.specs, hp), 1)
        log_paths = [os.path.join(root_dir, f"actor_{task}.log") for task in range(n)]
        logs = [open(path, "w") for path in log_paths]
        procs = [
            subprocess.Popen(
                _actor_argv(s, hp, root_dir, server.address, task),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            for task, log in enumerate(logs)
        ]
        try:
            samples, started, stopped = _watch_actors(
                client, procs, log_paths, hp.transitions_per_item
            )
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
            for log in logs:
                log.close()
        _check_actors_ran(procs, log_paths, started, stopped)
    return {
        "steady_env_steps_per_s": _rate_between(
            samples, max(started.values()), min(stopped.values())
        ),
        "overall_env_steps_per_s": _rate_between(
            samples, min(started.values()), max(stopped.values())
        ),
        "transitions": float(samples[-1][1]),
    }


def _actor_argv(s: Settings, hp: Hyperparams, root_dir: str, address: str, task: int) -> List[str]:
    """`python -m sac_distributed.bin.actor` task `task`, for --actor_steps env steps."""
    return [
        sys.executable,
        "-m",
        "sac_distributed.bin.actor",
        f"--root_dir={root_dir}",
        f"--env_name={s.env_name}",
        f"--replay_buffer_server_address={address}",
        f"--variable_container_server_address={address}",
        f"--task={task}",
        f"--num_envs={s.num_envs}",
        f"--max_env_steps={s.actor_steps}",
        f"--seed={s.seed}",
        *measurement_flags(hp),
    ]


def _watch_actors(
    client: reverb.Client,
    procs: Sequence[subprocess.Popen],
    log_paths: Sequence[str],
    k: int,
) -> Tuple[List[Sample], Dict[int, float], Dict[int, float]]:
    """Polls the insert count and the actors' logs until they exit (or a deadline).

    Returns the samples and, per actor, when its log first showed its first
    step and its stop.
    """
    samples: List[Sample] = []
    started: Dict[int, float] = {}
    stopped: Dict[int, float] = {}
    deadline = time.monotonic() + ACTORS_TIMEOUT_S
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        now = time.monotonic()
        samples.append((now, k * inserted_items(client, replay.REPLAY_TABLE)))
        _read_marks(log_paths, now, started, stopped)
        time.sleep(POLL_S)
    now = time.monotonic()
    samples.append((now, k * inserted_items(client, replay.REPLAY_TABLE)))
    # An actor that started and stopped after the last poll is read here, not lost.
    _read_marks(log_paths, now, started, stopped)
    return samples, started, stopped


def _read_marks(
    log_paths: Sequence[str], now: float, started: Dict[int, float], stopped: Dict[int, float]
) -> None:
    """Records `now` for each actor whose log shows its first step or its stop."""
    for task, path in enumerate(log_paths):
        if task in stopped:
            continue
        with open(path) as f:
            text = f.read()
        if task not in started and ACTOR_START_MARK in text:
            started[task] = now
        if ACTOR_STOP_MARK in text:
            stopped[task] = now


def _check_actors_ran(
    procs: Sequence[subprocess.Popen],
    log_paths: Sequence[str],
    started: Dict[int, float],
    stopped: Dict[int, float],
) -> None:
    """Raises with an actor's log unless every actor started, stopped and exited 0."""
    failed = [i for i, p in enumerate(procs) if p.returncode != 0]
    if failed or len(started) < len(procs) or len(stopped) < len(procs):
        with open(log_paths[failed[0] if failed else 0]) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"actor(s) {failed} failed or never started/stopped:\n{tail}")


def _rate_between(samples: List[Sample], t0: float, t1: float) -> float:
    """Insert rate between the polls nearest to t0 and t1 (transitions/s)."""
    inside = [x for x in samples if t0 <= x[0] <= t1]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return float("nan")
    (a, x), (b, y) = inside[0], inside[-1]
    return (y - x) / (b - a)


def format_actor_scaling_table(result: Dict[str, object]) -> str:
    """The human-readable report: total and per-actor env steps/s per actor count."""
    c = result["config"]
    lines = [
        f"Actor processes against one server on {c['env_name']} (actor {c['actor_layers']}, "
        f"num_envs {c['num_envs']}, K={c['transitions_per_item']}, {c['actor_steps']} steps "
        f"each, {c['repeats']} round(s), median, {c['cpus']} CPUs)",
        f"{'actors':>6}{'steady total':>16}{'per actor':>12}{'overall total':>16}  env steps/s",
    ]
    for n, r in result["actor_scaling"].items():
        steady = r["steady_env_steps_per_s"]
        lines.append(
            f"{n:>6}{steady:>16.0f}{steady / int(n):>12.0f}{r['overall_env_steps_per_s']:>16.0f}"
        )
    return "\n".join(lines)
