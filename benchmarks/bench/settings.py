"""compare.py's command line, and the hyperparameters its measurements run with.

Every mode reads one frozen `Settings`; `preset_hparams` is the env preset
with the network and batch flags applied (what time_to_return trains), and
`throughput_hparams` strips from it whatever would block or interrupt a timed
window.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Dict, Optional, Sequence, Tuple

from benchmarks.bench import cgroups
from sac_distributed import replay
from sac_distributed.config import ActorConfig, Hyperparams, hyperparams_for

MODES = ("throughput", "time_to_return", "actor_scaling", "replay_shards")
NEVER = 10**9  # an interval (train steps) that a benchmark never reaches
# What an actor job does without --variable_update_interval.
_ACTOR_PULL_INTERVAL = next(
    f.default for f in dataclasses.fields(ActorConfig) if f.name == "variable_update_interval"
)

# Repeated pieces, in the order of one round: each stock piece right before ours.
# name -> (result key, unit)
PIECES: Dict[str, Tuple[str, str]] = {
    "raw_env": ("raw_env_steps_per_s", "env steps/s"),
    "stock_actor": ("stock_actor_env_steps_per_s", "env steps/s"),
    "actor": ("actor_env_steps_per_s", "env steps/s"),
    "stock_learner": ("stock_learner_steps_per_s", "train steps/s"),
    "stock_learner_multi": ("stock_learner_multi_steps_per_s", "train steps/s"),
    "learner": ("learner_steps_per_s", "train steps/s"),
    "learner_const_batch": ("learner_const_batch_steps_per_s", "train steps/s"),
    "stock_replay_insert": ("stock_replay_insert_per_s", "transitions/s"),
    "replay_insert": ("replay_insert_per_s", "transitions/s"),
    "stock_replay_sample": ("stock_replay_sample_per_s", "transitions/s"),
    "replay_sample": ("replay_sample_per_s", "transitions/s"),
}
# One-shot pieces (run once, after the rounds).
ONE_SHOT_PIECES = ("stock_server_rss", "server_rss")
# The smallest --server_cpus: the kernel's smallest CFS quota is 1 ms per 100 ms period.
MIN_SERVER_CPUS = 0.01
# Flags that must be >= 1.
_POSITIVE_INTS = (
    "num_envs",
    "repeats",
    "rss_items",
    "fill_items",
    "steps_per_call",
    "num_parallel_datasets",
    "actor_steps",
    "writers",
    "samplers",
)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Command-line options, parsed and checked."""

    mode: str
    env_name: str
    layers: Optional[Tuple[int, ...]]  # None: the env preset's
    batch_size: Optional[int]  # None: the env preset's
    num_envs: int
    variable_update_interval: int  # ours' actor: actor steps between weight pulls
    duration: float
    repeats: int
    rss_items: int
    fill_items: int
    steps_per_call: int
    only: Tuple[str, ...]
    server: str  # inprocess | subprocess
    settle_s: float
    seed: int
    max_minutes: float
    target_return: float
    num_actors: int
    launch_flags: Tuple[str, ...]
    transitions_per_item: Optional[int]  # None: the env preset's
    num_parallel_datasets: int
    max_in_flight: Optional[int]  # None: make_dataset's default
    actor_counts: Tuple[int, ...]
    actor_steps: int
    shard_counts: Tuple[int, ...]
    writers: int
    samplers: int
    server_cpus: Optional[float]  # None: shard servers uncapped


def all_pieces() -> Tuple[str, ...]:
    """Every name --only accepts."""
    return tuple(PIECES) + ONE_SHOT_PIECES


def parse_settings(argv: Sequence[str], description: str = "") -> Settings:
    """Parses `argv` (without the program name) into Settings."""
    p = argparse.ArgumentParser(description=description)
    _add_throughput_flags(p)
    _add_mode_flags(p)
    a = p.parse_args(argv)
    only = tuple(x.strip() for x in a.only.split(",") if x.strip())
    unknown = sorted(set(only) - set(all_pieces()))
    if unknown:
        p.error(f"--only: unknown pieces {unknown}; choose from {', '.join(all_pieces())}")
    for name in _POSITIVE_INTS:
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    if a.variable_update_interval is not None and a.variable_update_interval < 1:
        p.error(f"--variable_update_interval must be >= 1, got {a.variable_update_interval}")
    if a.duration <= 0 or a.max_minutes <= 0:
        p.error("--duration and --max_minutes must be > 0")
    shard_counts = _parse_shard_counts(p, a.shard_counts, a.writers, a.samplers)
    server_cpus = _parse_server_cpus(p, a.server_cpus, a.mode)
    return Settings(
        mode=a.mode,
        env_name=a.env_name or "Pendulum-v1",
        layers=_parse_layers(p, a.layers),
        batch_size=a.batch_size,
        num_envs=a.num_envs,
        variable_update_interval=a.variable_update_interval or _ACTOR_PULL_INTERVAL,
        duration=a.duration,
        repeats=a.repeats,
        rss_items=a.rss_items,
        fill_items=a.fill_items,
        steps_per_call=a.steps_per_call,
        only=only,
        server=a.server,
        settle_s=max(0.0, a.settle),
        seed=a.seed,
        max_minutes=a.max_minutes,
        target_return=a.target_return,
        num_actors=a.num_actors,
        launch_flags=tuple(a.launch_flags.split()),
        transitions_per_item=a.transitions_per_item,
        num_parallel_datasets=a.num_parallel_datasets,
        max_in_flight=a.max_in_flight,
        actor_counts=tuple(int(x) for x in a.actor_counts.split(",") if x.strip()),
        actor_steps=a.actor_steps,
        shard_counts=shard_counts,
        writers=a.writers,
        samplers=a.samplers,
        server_cpus=server_cpus,
    )


def _add_throughput_flags(p: argparse.ArgumentParser) -> None:
    """The mode, the setting every mode shares, and the throughput pieces' own."""
    p.add_argument("--mode", choices=MODES, default="throughput")
    p.add_argument("--env_name", default=None, help="gym or pybullet id (default Pendulum-v1)")
    p.add_argument("--layers", default=None, help="actor and critic MLP sizes, e.g. 256,256")
    p.add_argument("--batch_size", type=int, default=None, help="transitions per train step")
    p.add_argument("--num_envs", type=int, default=1, help="envs per actor (ours only)")
    p.add_argument(
        "--variable_update_interval",
        type=int,
        default=None,
        help="ours' actor: actor steps (of num_envs envs each) between weight pulls "
        "(default: the actor job's)",
    )
    p.add_argument("--duration", type=float, default=20.0, help="seconds per measurement")
    p.add_argument("--repeats", type=int, default=3, help="alternating rounds; median reported")
    p.add_argument("--rss_items", type=int, default=100_000, help="transitions for server_rss")
    p.add_argument("--fill_items", type=int, default=10_000, help="random steps pre-filled")
    p.add_argument("--steps_per_call", type=int, default=50, help="ours: SGD steps per call")
    p.add_argument("--only", default="", help="comma list of pieces: " + ", ".join(all_pieces()))
    p.add_argument(
        "--server",
        choices=("inprocess", "subprocess"),
        default="inprocess",
        help="where the replay servers of the throughput pieces run",
    )
    p.add_argument("--settle", type=float, default=1.0, help="idle seconds between pieces")
    p.add_argument("--seed", type=int, default=0)


def _add_mode_flags(p: argparse.ArgumentParser) -> None:
    """Ours' data-path knobs and the time_to_return, actor_scaling and replay_shards
    modes' flags."""
    p.add_argument("--max_minutes", type=float, default=15.0, help="time_to_return cap per run")
    p.add_argument("--target_return", type=float, default=-200.0)
    p.add_argument("--num_actors", type=int, default=1, help="time_to_return: ours' actors")
    p.add_argument("--launch_flags", default="", help="extra flags for sac-launch, spaced")
    p.add_argument(
        "--transitions_per_item", type=int, default=None, help="ours: K (default: env preset)"
    )
    p.add_argument(
        "--num_parallel_datasets",
        type=int,
        default=replay.DEFAULT_PARALLEL_DATASETS,
        help="ours: interleaved Reverb streams in make_dataset",
    )
    p.add_argument(
        "--max_in_flight", type=int, default=None, help="ours: items in flight per stream"
    )
    p.add_argument(
        "--actor_counts", default="1,2,4", help="actor_scaling: actor process counts to run"
    )
    p.add_argument(
        "--actor_steps", type=int, default=20_000, help="actor_scaling: --max_env_steps per actor"
    )
    p.add_argument(
        "--shard_counts", default="1,2,4", help="replay_shards: numbers of server processes"
    )
    p.add_argument(
        "--writers",
        type=int,
        default=16,
        help="replay_shards: writer processes (w -> shard w %% S)",
    )
    p.add_argument(
        "--samplers",
        type=int,
        default=4,
        help="replay_shards: sampler processes (j -> shard j %% S)",
    )
    p.add_argument(
        "--server_cpus",
        default=None,
        help="replay_shards: CPUs each shard server may use (a cgroup CFS quota, e.g. 0.2); "
        "default uncapped",
    )


def _parse_shard_counts(
    parser: argparse.ArgumentParser, text: str, writers: int, samplers: int
) -> Tuple[int, ...]:
    """--shard_counts as positive ints; every shard of the largest count needs a
    writer and a sampler, or its share of the totals would be missing."""
    try:
        counts = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        parser.error(f"--shard_counts must be comma-separated integers, got {text!r}")
    if not counts or min(counts) < 1:
        parser.error(f"--shard_counts must be positive numbers of servers, got {text!r}")
    if min(writers, samplers) < max(counts):
        parser.error(
            f"--writers={writers} and --samplers={samplers} must each be >= the largest "
            f"--shard_counts ({max(counts)}) so that every shard gets one; raise them or "
            "use fewer shards."
        )
    return counts


def _parse_server_cpus(
    parser: argparse.ArgumentParser, text: Optional[str], mode: str
) -> Optional[float]:
    """--server_cpus as a CPU count in [0.01, cores]; checks that cgroups can be made."""
    if text is None:
        return None
    if mode != "replay_shards":
        parser.error(f"--server_cpus applies to --mode=replay_shards only, not {mode}")
    try:
        cpus = float(text)
    except ValueError:
        parser.error(f"--server_cpus must be a number of CPUs such as 0.2, got {text!r}")
    cores = os.cpu_count() or 1
    if not MIN_SERVER_CPUS <= cpus <= cores:
        parser.error(
            f"--server_cpus must be between {MIN_SERVER_CPUS} and this machine's {cores} "
            f"CPUs, got {text!r}"
        )
    reason = cgroups.unavailable_reason()
    if reason:
        parser.error(f"--server_cpus={text}: {reason}")
    return cpus


def _parse_layers(
    parser: argparse.ArgumentParser, text: Optional[str]
) -> Optional[Tuple[int, ...]]:
    if not text:
        return None
    try:
        layers = tuple(int(x) for x in text.split(","))
    except ValueError:
        parser.error(f"--layers must be comma-separated integers, got {text!r}")
    if not layers or min(layers) < 1:
        parser.error(f"--layers must be positive sizes, got {text!r}")
    return layers


def preset_hparams(s: Settings) -> Hyperparams:
    """The env preset with the network sizes and batch given on the command line."""
    return hyperparams_for(
        s.env_name,
        {
            "batch_size": s.batch_size,
            "actor_fc_layer_params": s.layers,
            "critic_joint_fc_layer_params": s.layers,
            "transitions_per_item": s.transitions_per_item,
        },
    )


def throughput_hparams(s: Settings) -> Hyperparams:
    """Preset + flags, with nothing that blocks or interrupts a measurement.

    No SampleToInsertRatio (it would block inserts when nobody samples), no
    random warm-up for our actor (initial_collect_steps=0, so it uses the
    collect policy from its first step), and no policy export mid-measurement.
    """
    return dataclasses.replace(
        preset_hparams(s),
        samples_per_insert=None,
        initial_collect_steps=0,
        num_iterations=NEVER,
        policy_save_interval=NEVER,
    )
