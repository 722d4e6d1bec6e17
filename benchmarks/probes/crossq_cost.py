"""The cost of one CrossQ update against one SAC update, at several critic widths.

Both learners (`SacLearner`, `CrossQLearner`, built by `registry.make_learner`
as the learner job builds them) run in this process on one constant batch of
an env preset's size (no sampling: only the update's own cost differs), with
the preset's actor and two hidden critic layers of each --widths size. CrossQ
is run with its own settings (actor every third step), so its steps/s is the
average over a full actor cycle; --steps_per_call should be a multiple of 3.

Rounds alternate over every (algorithm, width) pair; the median per pair is
reported, and its median ratio to SAC at the preset's width in the same round.

    python benchmarks/probe.py crossq_cost --env_name=HalfCheetahBulletEnv-v0 \\
        --out=benchmarks/results/per_step_cost/crossq_widths_HalfCheetahBulletEnv-v0
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

import benchmarks.bench  # noqa: F401  (imports sac_distributed first: it selects Keras 2)
from sac_distributed import replay
from sac_distributed.algorithm import registry
from sac_distributed.algorithm import strategy as strategy_lib
from sac_distributed.config import hyperparams_for
from sac_distributed.envs import loader as env_loader

_CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
Pair = Tuple[str, int]  # (algorithm, critic width)


def _constant_batches(specs, batch_size: int):
    """An endless iterator over one random Transition batch."""
    layout = replay.row_layout(specs)
    rows = np.random.default_rng(1).uniform(-1, 1, (batch_size, layout.width)).astype(np.float32)
    experience = replay.to_transition(tf.constant(rows), layout)
    return iter(tf.data.Dataset.from_tensors(experience).repeat())


def _learner(env_name: str, specs, algorithm: str, width: int):
    hparams = hyperparams_for(
        env_name, {"algorithm": algorithm, "critic_joint_fc_layer_params": (width, width)}
    )
    strategy = strategy_lib.make_strategy("default")
    return registry.make_learner(specs, hparams, strategy, tempfile.mkdtemp(), seed=0), hparams


def measure(args: argparse.Namespace) -> Tuple[Dict[Pair, List[float]], int]:
    """Steps/s per (algorithm, width), one value per round; and the batch size."""
    specs = env_loader.specs_for(args.env_name)
    pairs: List[Pair] = [(a, w) for w in args.widths for a in ("sac", "crossq")]
    built = {pair: _learner(args.env_name, specs, *pair) for pair in pairs}
    batch_size = next(iter(built.values()))[1].batch_size
    data = _constant_batches(specs, batch_size)
    n = args.steps_per_call
    for pair, (learner, _) in built.items():  # trace and warm up
        started = time.perf_counter()
        learner.step(data, n)
        logging.info("%s: first call (tracing) %.1f s", pair, time.perf_counter() - started)
    clock = _CLOCKS[args.clock]
    rates: Dict[Pair, List[float]] = {pair: [] for pair in pairs}
    for round_ in range(args.rounds):
        for pair, (learner, _) in built.items():
            start = clock()
            for _ in range(args.calls):
                learner.step(data, n)
            rates[pair].append(args.calls * n / (clock() - start))
            logging.info("round %d %s: %.2f steps/%s-s", round_, pair, rates[pair][-1], args.clock)
    return rates, batch_size


def summarize(rates: Dict[Pair, List[float]], base: Pair) -> List[dict]:
    """One row per (algorithm, width): median steps/s, ms per update, ratio to `base`."""
    rows = []
    for (algorithm, width), values in rates.items():
        ratio = statistics.median(r / b for r, b in zip(values, rates[base]))
        median = statistics.median(values)
        rows.append(
            dict(
                algorithm=algorithm,
                critic_width=width,
                median_steps_per_sec=round(median, 2),
                ms_per_update=round(1000.0 / median, 2),
                ratio_to_base=round(ratio, 3),
                rounds=[round(v, 2) for v in values],
            )
        )
    return rows


def write(out: str, rows: List[dict], meta: dict) -> None:
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump({**meta, "rows": rows}, f, indent=2)
    with open(out + ".csv", "w", newline="") as f:
        fields = [k for k in rows[0] if k != "rounds"]
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env_name", default="HalfCheetahBulletEnv-v0", help="its preset's sizes")
    p.add_argument("--widths", default="256,512,1024,2048", help="critic hidden widths")
    p.add_argument("--steps_per_call", type=int, default=30, help="updates per traced call")
    p.add_argument("--calls", type=int, default=2, help="calls per pair and round")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    p.add_argument("--clock", choices=tuple(_CLOCKS), default="wall", help="wall or CPU seconds")
    p.add_argument("--out", default="", help="write OUT.json and OUT.csv")
    args = p.parse_args(argv)
    args.widths = [int(w) for w in args.widths.split(",")]
    logging.set_verbosity(logging.INFO)
    rates, batch_size = measure(args)
    base = ("sac", args.widths[0])
    rows = summarize(rates, base)
    for row in rows:
        logging.info(
            "%-6s width %5d: %7.2f steps/s, %7.2f ms/update, %.3f x SAC-%d",
            row["algorithm"],
            row["critic_width"],
            row["median_steps_per_sec"],
            row["ms_per_update"],
            row["ratio_to_base"],
            base[1],
        )
    if args.out:
        meta = dict(
            env_name=args.env_name,
            batch_size=batch_size,
            clock=args.clock,
            base=f"sac-{base[1]}",
            cpu_count=os.cpu_count(),
            tf_intra_op_threads=tf.config.threading.get_intra_op_parallelism_threads(),
            args={k: v for k, v in vars(args).items() if k != "out"},
        )
        write(args.out, rows, meta)
    return 0
