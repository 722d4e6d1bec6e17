"""Stock TF-Agents SAC vs sac_distributed, measured in one process on one machine.

Throughput mode (default) measures each piece for --duration seconds, alternating
stock and ours (stock, ours, stock, ours, ...) for --repeats rounds, and reports
the median of the rounds:

    python benchmarks/compare.py --env_name=HalfCheetahBulletEnv-v0 --layers=256,256 \
        --batch_size=256 --num_envs=1 --duration=20 --repeats=3

Time-to-return mode measures the wall-clock time until the greedy policy's
average eval return reaches --target_return (default -200 on Pendulum-v1):
ours by running `sac-launch` as a subprocess and watching
root_dir/eval/results.csv, stock by running the TF-Agents tutorial loop
in-process (collect one step, train one step, evaluate every eval_interval):

    python benchmarks/compare.py --mode=time_to_return --max_minutes=10 --repeats=1

Actor-scaling mode runs 1, 2, 4 (--actor_counts) actor processes against one
server process and reports the env steps/s they insert together:

    python benchmarks/compare.py --mode=actor_scaling --actor_steps=20000

Replay-shards mode runs 1, 2, 4 (--shard_counts) server processes, each a
shard, with --writers writer processes and then --samplers sampler
processes spread over them, and reports total inserts/s and samples/s with
the CPU use of servers, workers and machine:

    python benchmarks/compare.py --mode=replay_shards --writers=16 --duration=20

A readable table goes to stdout and the LAST stdout line is one JSON object.
Everything else (TensorFlow, Reverb, pybullet chatter, progress) goes to stderr.
See benchmarks/README.md for what each number means; the pieces live in
benchmarks/bench/ (one module per mode, see bench/__init__.py).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Callable, Dict, Sequence, TextIO, Tuple

from absl import logging

if __package__ in (None, ""):  # run as a file: the repo root, so that `benchmarks` imports
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from benchmarks.bench.actor_scaling import format_actor_scaling_table, run_actor_scaling  # noqa: E402
from benchmarks.bench.settings import Settings, parse_settings  # noqa: E402
from benchmarks.bench.shards import format_replay_shards_table, run_replay_shards  # noqa: E402
from benchmarks.bench.throughput import format_throughput_table, run_throughput  # noqa: E402
from benchmarks.bench.time_to_return import format_time_to_return_table, run_time_to_return  # noqa: E402

Report = Dict[str, object]
# --mode -> (run it, format its table)
MODES: Dict[str, Tuple[Callable[[Settings], Report], Callable[[Report], str]]] = {
    "throughput": (run_throughput, format_throughput_table),
    "time_to_return": (run_time_to_return, format_time_to_return_table),
    "actor_scaling": (run_actor_scaling, format_actor_scaling_table),
    "replay_shards": (run_replay_shards, format_replay_shards_table),
}


def reserve_stdout_for_report() -> TextIO:
    """Sends fd 1 to stderr so C-level chatter (pybullet, TF) cannot follow the JSON.

    Returns a text stream on the original stdout for the report.
    """
    sys.stdout.flush()
    report = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    return report


def main(argv: Sequence[str]) -> int:
    settings = parse_settings(argv, description=__doc__.split("\n\n")[0])
    report = reserve_stdout_for_report()
    logging.set_verbosity(logging.INFO)
    run, format_table = MODES[settings.mode]
    result = run(settings)
    report.write(format_table(result) + "\n")
    report.write(json.dumps(result, default=float) + "\n")
    report.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
