"""Mean greedy return over a window of env steps, per seed and per group.

One mark of a noisy curve (Walker2D swings by hundreds between evals) says
little; the mean of the evals over a window says more. Reads the
`<group>/seed<N>/results.csv` files that `learning.py` leaves under
OUT/runs/<env>; a group found under several --runs directories is merged
(e.g. seeds 0-2 in one sweep's output and 3-5 in another's).

    python benchmarks/mean_return.py \\
        --runs=benchmarks/results/learning/runs/Walker2DBulletEnv-v0 \\
        --runs=benchmarks/results/learning_walker_sb3_50k/runs/Walker2DBulletEnv-v0 \\
        --groups=ours-preset,sb3-preset --window=20000,50000,5000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from learning_report import mean_return, read_points


def seed_means(
    run_dirs: Sequence[str], group: str, window: Tuple[int, int, int]
) -> Dict[int, Optional[float]]:
    """{seed: mean return over the window} for every seed of `group` in `run_dirs`."""
    means: Dict[int, Optional[float]] = {}
    for runs in run_dirs:
        group_dir = os.path.join(runs, group)
        if not os.path.isdir(group_dir):
            continue
        for name in os.listdir(group_dir):
            path = os.path.join(group_dir, name, "results.csv")
            if not name.startswith("seed") or not os.path.exists(path):
                continue
            seed = int(name.removeprefix("seed"))
            if seed in means:
                raise SystemExit(f"{group} seed {seed} is in more than one --runs directory.")
            means[seed] = mean_return(read_points(path), *window)
    return means


def line(group: str, means: Dict[int, Optional[float]]) -> str:
    done = {s: m for s, m in sorted(means.items()) if m is not None}
    if not done:
        return f"{group}: no seed covers the window"
    values = list(done.values())
    per_seed = ", ".join(f"{s}: {m:.0f}" for s, m in done.items())
    short = [s for s, m in sorted(means.items()) if m is None]
    note = f"; too short for the window: seeds {short}" if short else ""
    return (
        f"{group}: {statistics.median(values):.0f} [{min(values):.0f}, {max(values):.0f}] "
        f"over {len(values)} seeds ({per_seed}){note}"
    )


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", action="append", required=True, help="OUT/runs/<env> (repeatable)")
    p.add_argument("--groups", required=True, help="comma-separated <system>-<variant> names")
    p.add_argument("--window", default="20000,50000,5000", help="start,stop,every in env steps")
    args = p.parse_args(argv)
    try:
        start, stop, every = (int(x) for x in args.window.split(","))
    except ValueError:
        p.error(f"--window must be three integers start,stop,every, got {args.window!r}")
    if every <= 0 or stop < start:
        p.error(f"--window needs every > 0 and stop >= start, got {args.window!r}")
    args.window = (start, stop, every)
    for runs in args.runs:
        if not os.path.isdir(runs):
            p.error(f"--runs={runs} is not a directory (expected OUT/runs/<env>)")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    start, stop, every = args.window
    print(f"mean greedy return at every {every} env steps from {start} to {stop}:")
    for group in args.groups.split(","):
        print(line(group, seed_means(args.runs, group, args.window)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
