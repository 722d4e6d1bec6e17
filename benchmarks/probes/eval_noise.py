"""How many evaluation episodes a greedy return needs: the noise of an N-episode mean.

Runs one exported policy for --episodes seeded episodes (sac-evaluate's path:
the SavedModel through TF-Agents) and reports, for each N in --sizes, the
standard deviation of the mean of N episodes (start states are the only
randomness of a greedy policy), both from the per-episode spread (std/sqrt(N))
and from disjoint blocks of N episodes. The last line is JSON; --output also
writes it to a file.

    python benchmarks/probe.py eval_noise --policy_dir=/tmp/run --episodes=100 \\
        --output=benchmarks/results/learning/eval_noise_Pendulum-v1.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from typing import List, Optional, Sequence

import sac_distributed  # noqa: F401  (selects tf-keras before TensorFlow is imported)

# isort: split

from sac_distributed.tools import inspect_policy


def block_means_std(returns: Sequence[float], size: int) -> Optional[float]:
    """Std of the means of consecutive disjoint blocks of `size` episodes."""
    means = [
        statistics.fmean(returns[i : i + size]) for i in range(0, len(returns) - size + 1, size)
    ]
    return statistics.stdev(means) if len(means) >= 2 else None


def noise_table(returns: Sequence[float], sizes: Sequence[int]) -> dict:
    spread = statistics.stdev(returns)
    return {
        "episodes": len(returns),
        "mean": statistics.fmean(returns),
        "std": spread,
        "min": min(returns),
        "max": max(returns),
        "std_of_mean": {
            str(n): {
                "from_spread": spread / math.sqrt(n),
                "from_blocks": block_means_std(returns, n),
            }
            for n in sizes
        },
    }


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--policy_dir", required=True, help="SavedModel dir or a run's root_dir")
    p.add_argument("--env_name", default=None, help="default: from run_info.json")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sizes", default="1,3,5,10,20", help="episode counts to report")
    p.add_argument("--output", default=None, help="also write the JSON here")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    report = inspect_policy.evaluate(
        args.policy_dir, args.episodes, env_name=args.env_name, seed=args.seed
    )
    table = {"env_name": report.env_name, "policy_dir": report.policy_dir}
    table.update(noise_table(report.stats.returns, sizes))
    for n in sizes:
        s = table["std_of_mean"][str(n)]
        blocks = "-" if s["from_blocks"] is None else f"{s['from_blocks']:.1f}"
        print(f"{n:3d} episodes: std of the mean {s['from_spread']:.1f} (blocks: {blocks})")
    line = json.dumps(table)
    if args.output:
        with open(args.output, "w") as f:
            f.write(line + "\n")
    print(line)
    return 0
