"""SGD steps/s of the prioritized-replay and XLA-compiled updates against the uniform one.

All run `SacLearner` in this process on one constant batch (no sampling, so
only the update's own cost differs), with an env preset's network and batch
sizes:

  uniform      `SacLearner.step`: SacAgent's own update;
  per          `SacLearner.step_prioritized`: importance weights on the critic
               loss, per-item priorities gathered in the traced loop;
  per+updates  the same, plus handing each call's priorities to a
               `PriorityUpdater` whose thread sends them to a real in-process
               Reverb server holding the batch's items (what the learner job
               adds: the NumPy conversion and a thread competing for the CPU);
  xla          `SacLearner.step`'s loop with SacAgent's update compiled by
               XLA (`tf.function(jit_compile=True)`), to see whether fusing
               its many small ops pays on this CPU (not in the default --modes).

Modes alternate over --rounds rounds of --calls calls of --steps_per_call
steps each; the median per mode is reported, and its median ratio to the
uniform mode of the same round. --clock=cpu counts this process's CPU
seconds (all threads) instead of wall seconds: on a shared, loaded machine
that measures the update's cost far more steadily than wall time does. The
numbers are indicative only.

    python benchmarks/probe.py per_step_cost --env_name=Pendulum-v1
    python benchmarks/probe.py per_step_cost --env_name=HalfCheetahBulletEnv-v0 --modes=uniform,xla
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from typing import Dict, List, NamedTuple, Optional, Sequence

import numpy as np
import reverb
import tensorflow as tf
from absl import logging

import benchmarks.bench  # noqa: F401  (imports sac_distributed first: it selects Keras 2)
from sac_distributed import replay
from sac_distributed.algorithm import strategy as strategy_lib
from sac_distributed.algorithm.sac import learner as sac_learner
from sac_distributed.config import hyperparams_for
from sac_distributed.envs import loader as env_loader
from sac_distributed.replay import priorities

MODES = ("uniform", "per", "per+updates", "xla")
DEFAULT_MODES = ("uniform", "per", "per+updates")
_CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


class SampleInfo(NamedTuple):
    """The per-item sample facts the prioritized dataset yields (replay/dataset.py)."""

    key: tf.Tensor
    shard: tf.Tensor
    probability: tf.Tensor
    replay_size: tf.Tensor


def _server_with_items(hparams, specs, items: int) -> reverb.Server:
    """A prioritized replay table holding `items` items of random rows."""
    table = reverb.Table(
        name=replay.REPLAY_TABLE,
        sampler=replay.replay_sampler(hparams),
        remover=reverb.selectors.Fifo(),
        max_size=items,
        rate_limiter=reverb.rate_limiters.MinSize(1),
        signature=replay.transition_signature(specs, hparams.transitions_per_item),
    )
    server = reverb.Server([table], port=None)
    writer = replay.TransitionWriter(server.localhost_client(), hparams.transitions_per_item)
    width = replay.row_layout(specs).width
    rows = np.random.default_rng(0).uniform(-1, 1, (items * hparams.transitions_per_item, width))
    for row in rows.astype(np.float32):
        writer.write_row(row)
        writer.throttle()
    writer.close()
    return server


def _batch(specs, hparams, keys: np.ndarray):
    """One constant (Transition, SampleInfo) batch with unequal probabilities."""
    layout = replay.row_layout(specs)
    rng = np.random.default_rng(1)
    rows = rng.uniform(-1, 1, (hparams.batch_size, layout.width)).astype(np.float32)
    experience = replay.to_transition(tf.constant(rows), layout)
    n = len(keys)
    info = SampleInfo(
        key=tf.constant(keys, tf.uint64),
        shard=tf.zeros([n], tf.int32),
        probability=tf.constant(rng.uniform(0.5, 2.0, n) / (10 * n), tf.float64),
        replay_size=tf.fill([n], tf.constant(10 * n, tf.int64)),
    )
    return experience, info


def _rate(fn, calls: int, steps_per_call: int, clock) -> float:
    start = clock()
    for _ in range(calls):
        fn()
    return calls * steps_per_call / (clock() - start)


def xla_steps(learner: sac_learner.SacLearner):
    """`fn(iterator, num_steps)`: `num_steps` of SacAgent's update in a tf.while_loop,
    each step one XLA-compiled call (the iterator cannot be compiled); the last losses."""
    agent = learner.agent

    def update(experience):
        info = agent._train(experience, weights=None)  # noqa: SLF001
        return info.loss, info.extra.critic_loss, info.extra.actor_loss, info.extra.alpha_loss

    compiled = tf.function(update, jit_compile=True, autograph=False)

    def steps(iterator, num_steps):
        zero = tf.constant(0.0)
        start = (tf.constant(0), (zero, zero, zero, zero))
        body = lambda i, _: (i + 1, compiled(next(iterator)))  # noqa: E731
        return tf.while_loop(lambda i, _: i < num_steps, body, start)[1]

    return tf.function(steps, autograph=False)


def measure(args: argparse.Namespace) -> Dict[str, List[float]]:
    """Steps/s per mode, one value per round."""
    specs = env_loader.specs_for(args.env_name)
    hparams = hyperparams_for(args.env_name, {"prioritized_replay": True})
    items_per_batch = hparams.batch_size // hparams.transitions_per_item
    server = _server_with_items(hparams, specs, max(1000, items_per_batch))
    client = server.localhost_client()
    sampled = client.sample(replay.REPLAY_TABLE, num_samples=items_per_batch)
    keys = np.array([int(s[0].info.key) for s in sampled], np.uint64)
    experience, info = _batch(specs, hparams, keys)
    strategy = strategy_lib.make_strategy("default")
    learner = sac_learner.SacLearner(specs, hparams, strategy, tempfile.mkdtemp(), seed=0)
    uniform = iter(tf.data.Dataset.from_tensors(experience).repeat())
    prioritized = iter(tf.data.Dataset.from_tensors((experience, info)).repeat())
    updater = priorities.PriorityUpdater([f"localhost:{server.port}"])
    n = args.steps_per_call
    xla = xla_steps(learner) if "xla" in args.modes else None

    def with_updates():
        _, update = learner.step_prioritized(prioritized, n)
        updater.submit(*update)

    calls = {
        "uniform": lambda: learner.step(uniform, n),
        "per": lambda: learner.step_prioritized(prioritized, n),
        "per+updates": with_updates,
        "xla": lambda: xla(uniform, tf.constant(n)),
    }
    for mode in args.modes:  # trace and warm up
        started = time.perf_counter()
        calls[mode]()
        logging.info("%s: first call (tracing) %.1f s", mode, time.perf_counter() - started)
    rates: Dict[str, List[float]] = {mode: [] for mode in args.modes}
    for round_ in range(args.rounds):
        for mode in args.modes:
            rates[mode].append(_rate(calls[mode], args.calls, n, _CLOCKS[args.clock]))
            logging.info("round %d %s: %.1f steps/%s-s", round_, mode, rates[mode][-1], args.clock)
    updater.close()
    logging.info("priority updates sent %d, dropped %d", updater.sent, updater.dropped)
    server.stop()
    return rates


def parse_modes(parser: argparse.ArgumentParser, text: str) -> tuple:
    """The modes to run, uniform first; exits with a usage error on an unknown one."""
    named = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in named if m not in MODES]
    if unknown:
        parser.error(f"--modes: unknown {', '.join(unknown)}; choose from {', '.join(MODES)}")
    return ("uniform", *(m for m in MODES if m in named and m != "uniform"))


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env_name", default="Pendulum-v1", help="the preset's sizes are used")
    p.add_argument("--steps_per_call", type=int, default=100, help="SGD steps per traced call")
    p.add_argument("--calls", type=int, default=5, help="calls per mode and round")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per mode")
    p.add_argument("--clock", choices=tuple(_CLOCKS), default="wall", help="wall or CPU seconds")
    p.add_argument("--json", default="", help="also write the medians to this file")
    p.add_argument(
        "--modes",
        default=",".join(DEFAULT_MODES),
        help=f"comma list of {', '.join(MODES)} (uniform is always run: the ratios' base)",
    )
    args = p.parse_args(argv)
    args.modes = parse_modes(p, args.modes)
    logging.set_verbosity(logging.INFO)
    rates = measure(args)
    medians = {mode: statistics.median(values) for mode, values in rates.items()}
    # Each round ran the modes back to back: its ratios share the machine's load then.
    ratios = {
        mode: statistics.median(r / u for r, u in zip(values, rates["uniform"]))
        for mode, values in rates.items()
    }
    for mode in args.modes:
        logging.info(
            "%-12s median %7.1f steps/%s-s; median ratio to uniform in the same round %.2f",
            mode,
            medians[mode],
            args.clock,
            ratios[mode],
        )
    if args.json:
        with open(args.json, "w") as f:
            result = {
                "env_name": args.env_name,
                "clock": args.clock,
                "median_steps_per_sec": medians,
            }
            json.dump({**result, "median_ratio_to_uniform": ratios, "rounds": rates}, f, indent=2)
    return 0
