"""Throughput mode: every selected piece in alternating rounds, and its report.

All pieces are set up first; then each round measures every piece for
--duration seconds in `settings.PIECES` order (each stock piece right before
ours), --repeats times, so a slow spell of the machine hits both sides. The
report keeps each piece's median and derives the speed-ups from them; the
server memory pieces run once, after the rounds.
"""

from __future__ import annotations

import os
import time
from typing import Dict, List, Optional

from absl import logging

from benchmarks.bench import experience, servers
from benchmarks.bench.fixtures import Bench
from benchmarks.bench.pieces import SETUPS
from benchmarks.bench.settings import PIECES, Settings, all_pieces
from benchmarks.bench.timing import Measure, median
from sac_distributed.config import Hyperparams

REQUIRED_KEYS = (
    "raw_env_steps_per_s",
    "stock_actor_env_steps_per_s",
    "actor_env_steps_per_s",
    "stock_learner_steps_per_s",
    "learner_steps_per_s",
    "replay_insert_per_s",
    "replay_sample_per_s",
    "server_rss_mb",
)
# One-shot results of the report (key, unit), after the rounds' medians.
_SINGLE_VALUES = (
    ("stock_server_rss_mb", "MiB"),
    ("stock_server_bytes_per_transition", "bytes"),
    ("server_rss_mb", "MiB"),
    ("server_bytes_per_transition", "bytes"),
    ("transition_payload_bytes", "bytes"),
    ("variable_push_bytes", "bytes"),
    ("actor_speedup", "x"),
    ("actor_fraction_of_raw_env", ""),
    ("stock_actor_fraction_of_raw_env", ""),
    ("learner_speedup", "x"),
    ("data_path_fraction", ""),
    ("replay_insert_speedup", "x"),
    ("replay_sample_speedup", "x"),
)


def run_throughput(s: Settings) -> Dict[str, object]:
    """Sets every selected piece up, then measures them in alternating rounds."""
    selected = s.only or all_pieces()
    bench = Bench(s)
    try:
        measures = {}
        for name in (n for n in PIECES if n in selected):
            logging.info("Setting up %s.", name)
            measures[name] = SETUPS[name](bench)
        runs = _measure_rounds(s, measures)
        one_shot = _measure_server_memory(bench, selected)
        if "variable_push_bytes" not in bench.extras:
            weights = experience.initial_policy_weights(bench.specs, bench.hparams)
            bench.extras["variable_push_bytes"] = sum(w.nbytes for w in weights)
        payload = experience.transition_payload_bytes(bench.specs)
    finally:
        bench.close()
    return summarize(s, bench.hparams, runs, one_shot, bench.extras, payload)


def _measure_rounds(s: Settings, measures: Dict[str, Measure]) -> Dict[str, List[float]]:
    """--repeats rounds of every measure in turn; result key -> one value per round."""
    runs: Dict[str, List[float]] = {}
    for round_index in range(s.repeats):
        for name, measure in measures.items():
            time.sleep(s.settle_s)
            value = measure(s.duration)
            runs.setdefault(PIECES[name][0], []).append(value)
            logging.info("Round %d/%d %s: %.1f", round_index + 1, s.repeats, name, value)
    return runs


def _measure_server_memory(bench: Bench, selected: tuple) -> Dict[str, Dict[str, float]]:
    """The one-shot pieces: each server's memory after --rss_items transitions."""
    s, hp = bench.settings, bench.hparams
    one_shot: Dict[str, Dict[str, float]] = {}
    if "stock_server_rss" in selected:
        one_shot["stock_server"] = servers.measure_stock_server_rss(
            bench.tmpdir("rss_stock_server"),
            hp.replay_buffer_capacity,
            s.rss_items,
            bench.stock_trajectories,
        )
    if "server_rss" in selected:
        one_shot["server"] = servers.measure_server_rss(
            bench.tmpdir("rss_server"), s.env_name, hp, s.rss_items, bench.our_rows
        )
    return one_shot


def summarize(
    s: Settings,
    hp: Hyperparams,
    runs: Dict[str, List[float]],
    one_shot: Dict[str, Dict[str, float]],
    extras: Dict[str, float],
    payload_bytes: int,
) -> Dict[str, object]:
    """Medians of the rounds plus derived numbers, as the JSON report."""
    result: Dict[str, object] = {key: None for key in REQUIRED_KEYS}
    result.update({key: median(values) for key, values in runs.items()})
    for prefix in ("server", "stock_server"):
        rss = one_shot.get(prefix)
        if rss:
            result[f"{prefix}_rss_mb"] = rss["rss_mb"]
            result[f"{prefix}_rss_before_mb"] = rss["rss_before_mb"]
            result[f"{prefix}_bytes_per_transition"] = rss["bytes_per_transition"]
    result["transition_payload_bytes"] = payload_bytes
    result["variable_push_bytes"] = extras.get("variable_push_bytes")
    result.update(derived_ratios(result))
    result["config"] = {
        "env_name": s.env_name,
        "actor_layers": list(hp.actor_fc_layer_params),
        "critic_layers": list(hp.critic_joint_fc_layer_params),
        "batch_size": hp.batch_size,
        "num_envs": s.num_envs,
        "variable_update_interval": s.variable_update_interval,
        "steps_per_call": s.steps_per_call,
        "duration_s": s.duration,
        "repeats": s.repeats,
        "fill_items": s.fill_items,
        "rss_items": s.rss_items,
        "transitions_per_item": hp.transitions_per_item,
        "num_parallel_datasets": s.num_parallel_datasets,
        "max_in_flight": s.max_in_flight,
        "server": s.server,
        "cpus": os.cpu_count(),
    }
    result["runs"] = runs
    return result


def derived_ratios(r: Dict[str, object]) -> Dict[str, Optional[float]]:
    """Speed-ups of ours over stock, and the learner's data-wait share."""

    def ratio(a: str, b: str) -> Optional[float]:
        x, y = r.get(a), r.get(b)
        return float(x) / float(y) if x and y else None

    fed_over_const = ratio("learner_steps_per_s", "learner_const_batch_steps_per_s")
    return {
        "actor_speedup": ratio("actor_env_steps_per_s", "stock_actor_env_steps_per_s"),
        "actor_fraction_of_raw_env": ratio("actor_env_steps_per_s", "raw_env_steps_per_s"),
        "stock_actor_fraction_of_raw_env": ratio(
            "stock_actor_env_steps_per_s", "raw_env_steps_per_s"
        ),
        "learner_speedup": ratio("learner_steps_per_s", "stock_learner_steps_per_s"),
        # Share of a train step spent waiting for data: 1 - fed rate / compute-only rate.
        "data_path_fraction": None if fed_over_const is None else max(0.0, 1.0 - fed_over_const),
        "replay_insert_speedup": ratio("replay_insert_per_s", "stock_replay_insert_per_s"),
        "replay_sample_speedup": ratio("replay_sample_per_s", "stock_replay_sample_per_s"),
    }


def format_throughput_table(result: Dict[str, object]) -> str:
    """The human-readable report."""
    c = result["config"]
    lines = [
        f"sac_distributed vs stock TF-Agents on {c['env_name']}: actor {c['actor_layers']}, "
        f"critic {c['critic_layers']}, batch {c['batch_size']}, num_envs {c['num_envs']}, "
        f"weight pull every {c.get('variable_update_interval', '?')} actor steps, "
        f"{c['duration_s']:g} s x {c['repeats']} rounds, {c['server']} servers, "
        f"{c['cpus']} CPUs",
        f"{'measurement':<34}{'median':>12}{'min':>12}{'max':>12}  unit",
    ]
    runs = result["runs"]
    for key, unit in PIECES.values():
        if key in runs:
            v = runs[key]
            lines.append(f"{key:<34}{median(v):>12.1f}{min(v):>12.1f}{max(v):>12.1f}  {unit}")
    for key, unit in _SINGLE_VALUES:
        if result.get(key) is not None:
            lines.append(f"{key:<34}{result[key]:>12.3f}{'':>24}  {unit}")
    return "\n".join(lines)
