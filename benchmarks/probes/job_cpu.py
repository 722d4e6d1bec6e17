"""Where a run's CPU goes: CPU seconds of each job of one `sac-launch` run.

Runs `sac-launch` with the flags after `--` to the end and, once a second,
reads the user+system CPU time of every process below it. Each process is
named by the job module it runs (`sac_distributed.bin.<job>`, the task index
appended for actors); the last reading of each process counts. Prints JSON
(CPU seconds per job, the run's wall seconds, and its learner's last
"steps/s" figures) and writes it to --out when given:

    python benchmarks/probe.py job_cpu --out=/tmp/cpu.json -- \\
        --root_dir=/tmp/run --env_name=HalfCheetahBulletEnv-v0 --num_iterations=8000 \\
        --samples_per_insert=256 --eval_interval=2500 --num_eval_episodes=10 --wait_for_eval

A process that ends between two readings loses its last second, so compare
jobs that run for minutes, not seconds.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from typing import Dict, Iterable, List, Optional, Tuple

import psutil

from benchmarks.bench.sac_launch import sac_launch_executable

_JOB = re.compile(r"sac_distributed\.bin\.(\w+)")
_TASK = re.compile(r"--task(?:_id)?=(\d+)")
_STEPS_PER_S = re.compile(r"([0-9.]+) steps/s")


def job_name(cmdline: Iterable[str]) -> Optional[str]:
    """'learner', 'actor0', ... for a job's command line; None for anything else."""
    text = " ".join(cmdline)
    job = _JOB.search(text)
    if job is None:
        return None
    task = _TASK.search(text) if job.group(1) == "actor" else None
    return job.group(1) + (task.group(1) if task else "")


def cpu_by_job(readings: Dict[int, Tuple[str, float]]) -> Dict[str, float]:
    """Sums the last CPU reading of each process (pid -> (job, CPU s)) per job."""
    totals: Dict[str, float] = {}
    for job, cpu in readings.values():
        totals[job] = round(totals.get(job, 0.0) + cpu, 2)
    return dict(sorted(totals.items()))


def _read(root: psutil.Process, readings: Dict[int, Tuple[str, float]]) -> None:
    try:
        below = root.children(recursive=True)
    except psutil.Error:
        return
    for process in below:
        try:
            with process.oneshot():
                job = job_name(process.cmdline())
                times = process.cpu_times()
        except psutil.Error:
            continue
        if job is not None:
            readings[process.pid] = (job, times.user + times.system)


def run(launch_flags: List[str], log_path: str, interval_s: float = 1.0) -> Dict[str, object]:
    readings: Dict[int, Tuple[str, float]] = {}
    started = time.monotonic()
    with open(log_path, "w") as log:
        launch = subprocess.Popen(
            [sac_launch_executable(), *launch_flags], stdout=log, stderr=subprocess.STDOUT
        )
        root = psutil.Process(launch.pid)
        while launch.poll() is None:
            _read(root, readings)
            time.sleep(interval_s)
    with open(log_path) as log:
        rates = [float(m.group(1)) for line in log for m in [_STEPS_PER_S.search(line)] if m]
    return {
        "exit_code": launch.returncode,
        "wall_s": round(time.monotonic() - started, 1),
        "cpu_s": cpu_by_job(readings),
        "learner_steps_per_s": rates,
    }


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], epilog="then: -- <sac-launch flags>"
    )
    parser.add_argument("--out", help="also write the JSON here")
    parser.add_argument("--log", default="job_cpu.log", help="sac-launch's output")
    if "--" not in argv:
        if "-h" in argv or "--help" in argv:
            parser.parse_args(argv)  # prints the help and exits
        sys.exit("Usage: probe.py job_cpu [--out=FILE] [--log=FILE] -- <sac-launch flags>")
    split = argv.index("--")
    args = parser.parse_args(argv[:split])
    result = run(argv[split + 1 :], args.log)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0 if result["exit_code"] == 0 else 1
