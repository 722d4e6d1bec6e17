"""One frozen config per job (server, actor, learner, evaluator) and the clients' addresses.

Each is validated when it is built, so a bad flag fails before any process
connects to anything.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Tuple

from sac_distributed.config.checks import (
    _require,
    _require_env_name,
    _require_positive_int,
    _require_positive_number,
    _require_seed,
    parse_env_kwargs,
    validate_address,
    validate_rate_limit,
)
from sac_distributed.config.hyperparams import Hyperparams, default_error_buffer

DEFAULT_PORT = 8008
STRATEGIES = ("default", "mirrored", "tpu")


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """The Reverb server job: replay table + variable container table."""

    env_name: str
    hparams: Hyperparams
    root_dir: str
    port: int = DEFAULT_PORT
    samples_per_insert_error_buffer: Optional[float] = None  # None: derived, always valid
    stats_interval_s: float = 30.0  # seconds between table-size log lines
    replay_checkpoint_interval_s: float = 600.0  # 0 disables periodic replay checkpoints
    replay_checkpoints_to_keep: int = 2  # older ones are the fallback for a damaged newest
    replay_start_empty: bool = False  # start empty when no replay checkpoint is readable
    # Servers that share the replay (each an ordinary sac-reverb-server); this
    # one holds 1/num_replay_shards of replay_buffer_capacity and of the warm-up.
    num_replay_shards: int = 1
    replay_shard: int = 0  # this server's index among them (its own replay checkpoints)
    # JSON object of keyword arguments for the env's factory or make ("": none).
    env_kwargs: str = ""

    def __post_init__(self) -> None:
        _require_env_name(self.env_name)
        parse_env_kwargs(self.env_kwargs)
        _require(0 <= self.port <= 65535, f"port must be in [0, 65535], got {self.port}.")
        _require_positive_number("stats_interval_s", self.stats_interval_s)
        _require_num_replay_shards(self.num_replay_shards, self.hparams)
        _require(
            isinstance(self.replay_shard, int) and 0 <= self.replay_shard < self.num_replay_shards,
            f"replay_shard must be in [0, {self.num_replay_shards - 1}] (num_replay_shards="
            f"{self.num_replay_shards}), got {self.replay_shard!r}.",
        )
        _require(
            self.replay_checkpoint_interval_s >= 0,
            "replay_checkpoint_interval_s must be >= 0 (0 disables periodic checkpoints), "
            f"got {self.replay_checkpoint_interval_s}.",
        )
        _require_positive_int("replay_checkpoints_to_keep", self.replay_checkpoints_to_keep)
        spi = self.hparams.samples_per_insert
        if spi is not None:
            validate_rate_limit(spi, self.samples_per_insert_error_buffer)
        else:
            _require(
                self.samples_per_insert_error_buffer is None,
                "samples_per_insert_error_buffer only applies together with "
                "--samples_per_insert; set both or neither.",
            )

    @property
    def error_buffer(self) -> Optional[float]:
        """The SampleToInsertRatio error buffer, or None with the MinSize limiter."""
        spi = self.hparams.samples_per_insert
        if spi is None:
            return None
        if self.samples_per_insert_error_buffer is not None:
            return self.samples_per_insert_error_buffer
        return default_error_buffer(spi, self.hparams)


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    """Addresses and connection policy shared by every client job.

    `replay_buffer_server_address` is one host:port, or several separated by
    commas: one per replay shard, in shard order (`replay_addresses`).
    """

    replay_buffer_server_address: str = f"localhost:{DEFAULT_PORT}"
    variable_container_server_address: str = f"localhost:{DEFAULT_PORT}"
    connect_timeout_s: float = 300.0  # how long to wait for the server before failing
    # Seconds between pings of a replay shard that stopped answering (sharded replay).
    shard_probe_interval_s: float = 15.0

    def __post_init__(self) -> None:
        addresses = self.replay_addresses
        for address in addresses:
            validate_address("replay_buffer_server_address", address)
        duplicates = sorted({a for a in addresses if addresses.count(a) > 1})
        _require(
            not duplicates,
            f"--replay_buffer_server_address names {', '.join(duplicates)} more than once: "
            "give each replay shard's host:port once.",
        )
        validate_address(
            "variable_container_server_address", self.variable_container_server_address
        )
        _require_positive_number("connect_timeout_s", self.connect_timeout_s)
        _require_positive_number("shard_probe_interval_s", self.shard_probe_interval_s)

    @property
    def replay_addresses(self) -> Tuple[str, ...]:
        """The replay shards' host:port addresses, in shard order."""
        return tuple(a.strip() for a in self.replay_buffer_server_address.split(","))

    @property
    def num_replay_shards(self) -> int:
        return len(self.replay_addresses)


@dataclasses.dataclass(frozen=True)
class ActorConfig:
    """An actor job: collects experience into the replay table."""

    env_name: str
    hparams: Hyperparams
    root_dir: str
    client: ClientConfig = dataclasses.field(default_factory=ClientConfig)
    task: int = 0  # actor index, used for logs, summaries and seeds
    # Take the lowest index no running actor of root_dir holds instead of `task`
    # (replicas that all run one command: docker compose --scale, a Deployment).
    claim_task: bool = False
    num_envs: int = 1  # environments stepped together with one batched policy call
    variable_update_interval: int = 1_000  # actor steps between weight pulls
    max_env_steps: Optional[int] = None  # stop after this many env steps (None: until done)
    summary_interval_s: float = 10.0  # seconds between throughput summaries
    seed: Optional[int] = None
    # JSON object of keyword arguments for the env's factory or make ("": none).
    env_kwargs: str = ""

    def __post_init__(self) -> None:
        _require_env_name(self.env_name)
        parse_env_kwargs(self.env_kwargs)
        _require(self.task >= 0, f"task must be >= 0, got {self.task}.")
        _require(
            not (self.claim_task and self.task),
            f"--claim_task picks the actor's index itself; leave --task={self.task} out, "
            "or drop --claim_task.",
        )
        _require_positive_int("num_envs", self.num_envs)
        _require_positive_int("variable_update_interval", self.variable_update_interval)
        if self.max_env_steps is not None:
            _require_positive_int("max_env_steps", self.max_env_steps)
        _require_positive_number("summary_interval_s", self.summary_interval_s)
        _require_seed(self.seed)

    @property
    def task_seed(self) -> Optional[int]:
        """This actor's own seed: actors given one --seed still explore differently."""
        return None if self.seed is None else self.seed + 1000 * self.task


@dataclasses.dataclass(frozen=True)
class LearnerConfig:
    """The learner job: trains SAC on replay samples and publishes weights."""

    env_name: str
    hparams: Hyperparams
    root_dir: str
    client: ClientConfig = dataclasses.field(default_factory=ClientConfig)
    strategy: str = "default"  # default | mirrored | tpu
    tpu: Optional[str] = None  # TPU address for --strategy=tpu
    steps_per_call: int = 50  # SGD steps per tf.function call
    variable_push_interval: int = 100  # train steps between weight pushes
    checkpoint_interval: int = 10_000  # train steps between checkpoints
    max_checkpoints_to_keep: int = 3
    summary_interval: int = 1_000  # train steps between TensorBoard summaries
    seed: Optional[int] = None  # seeds network initialisation (Python, NumPy, TF)
    # JSON object of keyword arguments for the env's factory or make ("": none).
    env_kwargs: str = ""

    def __post_init__(self) -> None:
        _require_env_name(self.env_name)
        parse_env_kwargs(self.env_kwargs)
        _require(
            self.strategy in STRATEGIES,
            f"strategy must be one of {STRATEGIES}, got {self.strategy!r}.",
        )
        _require(
            self.strategy != "tpu" or bool(self.tpu),
            "--strategy=tpu needs --tpu=<address> (e.g. grpc://10.0.0.2:8470 or a TPU name).",
        )
        _check_strategy_for_algorithm(self.hparams.algorithm, self.strategy)
        for name in (
            "steps_per_call",
            "variable_push_interval",
            "checkpoint_interval",
            "max_checkpoints_to_keep",
            "summary_interval",
        ):
            _require_positive_int(name, getattr(self, name))
        _require_seed(self.seed)


@dataclasses.dataclass(frozen=True)
class EvaluatorConfig:
    """The evaluator job: runs the greedy policy with the container's weights."""

    env_name: str
    hparams: Hyperparams
    root_dir: str
    client: ClientConfig = dataclasses.field(default_factory=ClientConfig)
    poll_interval_s: float = 1.0  # seconds between checks of the learner's train_step
    seed: Optional[int] = None
    # JSON object of keyword arguments for the env's factory or make ("": none).
    env_kwargs: str = ""

    def __post_init__(self) -> None:
        _require_env_name(self.env_name)
        parse_env_kwargs(self.env_kwargs)
        _require_positive_number("poll_interval_s", self.poll_interval_s)
        _require_seed(self.seed)


def _require_num_replay_shards(num_shards: Any, hparams: Hyperparams) -> None:
    """Each shard must hold at least one item and its share of a batch."""
    _require_positive_int("num_replay_shards", num_shards)
    items = hparams.replay_capacity_items
    _require(
        items // num_shards
        >= max(1, hparams.batch_size // hparams.transitions_per_item // num_shards),
        f"num_replay_shards={num_shards} leaves each shard {items // num_shards} items of the "
        f"replay's {items} (replay_buffer_capacity / transitions_per_item): too few to sample "
        "a batch from. Use fewer shards or a larger --replay_buffer_capacity.",
    )


def _check_strategy_for_algorithm(algorithm: str, strategy: str) -> None:
    """The strategy the algorithm's registry entry can train under."""
    # Imported here: the registry's entries are loaded on first use (hyperparams.py).
    from sac_distributed.algorithm import registry

    registry.get(algorithm).check_strategy(strategy)
