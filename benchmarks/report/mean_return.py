"""Mean greedy return over a window of env steps, per seed and per group.

One mark of a noisy curve (Walker2D swings by hundreds between evals) says
little; the mean of the evals over a window says more. Reads the
`<group>/seed<N>/results.csv` files that `learning.py` leaves under
OUT/runs/<env>; a group found under several --runs directories is merged
(e.g. seeds 0-2 in one sweep's output and 3-5 in another's).

    python benchmarks/learning_report.py mean_return \\
        --runs=benchmarks/results/learning/runs/Walker2DBulletEnv-v0 \\
        --runs=benchmarks/results/learning_walker_sb3_50k/runs/Walker2DBulletEnv-v0 \\
        --groups=ours-preset,sb3-preset --window=20000,50000,5000 --versus=sb3-preset

With --versus=GROUP it also compares every other group with that one, seed means
against seed means: how many of the pairs favour the other group (a tie counts
half) and the one-sided Mann-Whitney p of that many or more under the null that
both groups' seeds come from one distribution (exact, from the count of
orderings; six seeds against six need 29 of 36 pairs for p <= 0.05).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import statistics
from typing import Dict, List, Optional, Sequence, Tuple

from benchmarks.learning_report import mean_return, read_points


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


def pairs_favouring(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Mann-Whitney U of xs over ys: pairs with x > y, ties counted half."""
    return sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in xs for y in ys)


@functools.cache
def _orderings(u: int, m: int, n: int) -> int:
    """Interleavings of m xs and n ys in which exactly u pairs have x above y."""
    if u < 0 or u > m * n:
        return 0
    if m == 0 or n == 0:
        return 1 if u == 0 else 0
    # The largest value is an x (above all n ys) or a y (above no x).
    return _orderings(u - n, m - 1, n) + _orderings(u, m, n - 1)


def one_sided_p(xs: Sequence[float], ys: Sequence[float]) -> float:
    """P(U >= observed U) when xs and ys come from one distribution (no ties)."""
    m, n = len(xs), len(ys)
    observed = math.ceil(pairs_favouring(xs, ys))
    tail = sum(_orderings(u, m, n) for u in range(observed, m * n + 1))
    return tail / math.comb(m + n, m)


def versus_line(group: str, means: Dict[int, Optional[float]], base: str, base_means) -> str:
    xs = [m for m in means.values() if m is not None]
    ys = [m for m in base_means.values() if m is not None]
    if not xs or not ys:
        return f"{group} vs {base}: a group has no seed that covers the window"
    return (
        f"{group} vs {base}: {pairs_favouring(xs, ys):g} of {len(xs) * len(ys)} pairs favour "
        f"{group} (one-sided Mann-Whitney p = {one_sided_p(xs, ys):.2g})"
    )


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", action="append", required=True, help="OUT/runs/<env> (repeatable)")
    p.add_argument("--groups", required=True, help="comma-separated <system>-<variant> names")
    p.add_argument("--window", default="20000,50000,5000", help="start,stop,every in env steps")
    p.add_argument("--versus", default=None, help="a group of --groups to compare the others with")
    args = p.parse_args(argv)
    if args.versus is not None and args.versus not in args.groups.split(","):
        p.error(f"--versus={args.versus} is not one of --groups ({args.groups})")
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
    means = {g: seed_means(args.runs, g, args.window) for g in args.groups.split(",")}
    for group, group_means in means.items():
        print(line(group, group_means))
    if args.versus is not None:
        for group, group_means in means.items():
            if group != args.versus:
                print(versus_line(group, group_means, args.versus, means[args.versus]))
    return 0
