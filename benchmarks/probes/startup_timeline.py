"""Where a short run's seconds go: one `sac-launch` to a target return, then its logs.

Runs sac-launch until the evaluator's first row at or above --target_return (or
--max_s), stops it as Ctrl-C would, and prints, in seconds since the launch, the
first log lines of each job and its milestones (server listening, warm-up, train
steps, evaluations). It explains the time_to_return figure of compare.py. The
timeline needs the local engine's per-job logs (root_dir/logs/<job>.log), so it
shows none for --launch_flags=--engine=threads, which logs to the console only.

    python benchmarks/probe.py startup_timeline --env_name=Pendulum-v1 --target_return=-200
"""

from __future__ import annotations

import argparse
import datetime
import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from typing import List, Optional, Sequence, Tuple

from benchmarks.bench.sac_launch import sac_launch_executable
from benchmarks.bench.time_to_return import read_points_so_far
from sac_distributed import paths, results

# absl's line prefix: I1126 14:02:57.123456 pid file:line] message
_ABSL = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+) +\d+ [^\]]*\] (.*)$")
MILESTONES = re.compile(
    r"listening|initial collect|replay holds|strategy|checkpoint|"
    r"train_step \d+:|Eval at"
)


def parse_line(line: str, year: int) -> Optional[Tuple[float, str]]:
    """(epoch seconds, message) of an absl log line; None for any other line."""
    m = _ABSL.match(line)
    if not m:
        return None
    month, day, hour, minute, second, micros, message = m.groups()
    stamp = datetime.datetime(
        year,
        int(month),
        int(day),
        int(hour),
        int(minute),
        int(second),
        int(micros.ljust(6, "0")[:6]),
    )
    return stamp.timestamp(), message


def first_row_at(results_path: str, target: float) -> Optional[results.EvalPoint]:
    points = read_points_so_far(results_path)
    return next((p for p in points if p.average_return >= target), None)


def timeline(root_dir: str, start: float, first: int = 3) -> List[str]:
    """Each job's first `first` lines and its milestones, as 'seconds  message'."""
    year = datetime.datetime.fromtimestamp(start).year
    out = []
    for log in sorted(glob.glob(os.path.join(root_dir, "logs", "*.log"))):
        with open(log, errors="replace") as f:
            parsed = [p for p in (parse_line(line, year) for line in f) if p]
        picked = parsed[:first] + [p for p in parsed[first:] if MILESTONES.search(p[1])]
        out.append(f"== {os.path.basename(log)}")
        out += [f"  {t - start:6.2f} s  {message[:110]}" for t, message in picked]
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env_name", default="Pendulum-v1")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target_return", type=float, default=-200.0)
    p.add_argument("--max_s", type=float, default=240.0, help="give up after this long")
    p.add_argument("--launch_flags", default="", help="extra sac-launch flags, spaced")
    args = p.parse_args(argv)
    root_dir = tempfile.mkdtemp(prefix="sac_timeline_")
    argv_launch = [
        sac_launch_executable(),
        f"--root_dir={root_dir}",
        f"--env_name={args.env_name}",
        f"--seed={args.seed}",
        *args.launch_flags.split(),
    ]
    start = time.time()
    with open(os.path.join(root_dir, "launch_output.txt"), "w") as log:
        proc = subprocess.Popen(
            argv_launch, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        reached = None
        while reached is None and proc.poll() is None and time.time() - start < args.max_s:
            reached = first_row_at(paths.results_path(root_dir), args.target_return)
            time.sleep(0.2)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait()
    if reached is None:
        print(f"No eval reached {args.target_return:g} within {args.max_s:g} s.")
    else:
        print(
            f"Eval return {reached.average_return:.1f} >= {args.target_return:g} at "
            f"{reached.wall_time - start:.1f} s (train step {reached.train_step}, env steps "
            f"{reached.env_steps}); seconds below count from the launch."
        )
    print("\n".join(timeline(root_dir, start)))
    shutil.rmtree(root_dir, ignore_errors=True)
    return 0 if reached else 1
