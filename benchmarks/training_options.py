"""Learning with and without the training options, on the same machine.

Runs `sac-launch` once per option set and round (alternating the sets, so
that a busy spell hits all of them alike), reads `eval/results.csv`, and
reports for each set: the wall time and train_step of the first greedy
evaluation at or above --target_return, the best and the last return. The
last line is JSON.

    python benchmarks/training_options.py --repeats=2
    python benchmarks/training_options.py --sets="base=;n3=--n_step=3" --env_name=Pendulum-v1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Sequence

if __package__ in (None, ""):  # run as a file: the repo root, so that `benchmarks` imports
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from benchmarks.bench.sac_launch import parse_named_flags, sac_launch_executable  # noqa: E402
from benchmarks.bench.timing import median_time  # noqa: E402
from sac_distributed.tools import plotting  # noqa: E402

DEFAULT_SETS = "base=;n_step_3=--n_step=3;normalized=--normalize_observations"


def run_once(env_name: str, flags: Sequence[str], target: float, timeout_s: float) -> dict:
    """One sac-launch run to the end; its evaluation summary."""
    root = tempfile.mkdtemp(prefix="sac_options_")
    argv = [sac_launch_executable(), f"--root_dir={root}", f"--env_name={env_name}", *flags]
    start = time.time()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-3000:]}")
        points = plotting.read_results(plotting.results_path(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    reached = next((p for p in points if p.average_return >= target), None)
    return {
        "seconds_to_target": None if reached is None else reached.wall_time - start,
        "train_step_at_target": None if reached is None else reached.train_step,
        "best_return": max(p.average_return for p in points),
        "last_return": points[-1].average_return,
        "run_seconds": time.time() - start,
    }


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env_name", default="Pendulum-v1")
    p.add_argument("--sets", default=DEFAULT_SETS, help="name=flags;name=flags")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--target_return", type=float, default=-200.0)
    p.add_argument("--timeout_s", type=float, default=900.0)
    args = p.parse_args(argv)
    sets = parse_named_flags(args.sets, "--sets")
    runs: Dict[str, List[dict]] = {name: [] for name in sets}
    for round_index in range(args.repeats):
        for name, flags in sets.items():
            result = run_once(args.env_name, flags, args.target_return, args.timeout_s)
            runs[name].append(result)
            print(f"round {round_index + 1} {name}: {json.dumps(result)}", flush=True)
    summary = {
        name: {
            "median_seconds_to_target": median_time([r["seconds_to_target"] for r in results]),
            "median_train_step_at_target": median_time(
                [r["train_step_at_target"] for r in results]
            ),
            "best_returns": [round(r["best_return"], 1) for r in results],
            "last_returns": [round(r["last_return"], 1) for r in results],
        }
        for name, results in runs.items()
    }
    for name, s in summary.items():
        print(f"{name}: {s}")
    print(json.dumps({"env_name": args.env_name, "target": args.target_return, "sets": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
