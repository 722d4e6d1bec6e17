"""`LaunchConfig`: a whole run, from which a launcher builds every job's config."""

from __future__ import annotations

import dataclasses
from typing import Optional

from sac_distributed.config.checks import (
    _is_number,
    _require,
    _require_env_name,
    _require_positive_int,
    _require_positive_number,
    _require_seed,
    parse_env_kwargs,
    validate_address,
)
from sac_distributed.config.hyperparams import DEFAULT_ENV_NAME, Hyperparams
from sac_distributed.config.jobs import _require_num_replay_shards
from sac_distributed.config.presets import hyperparams_for, variable_update_interval_for

# Who starts the jobs: sac-launch's own Supervisor (a process each), a Ray cluster, or
# sac-launch as threads of its own process (thread_launch.py).
ENGINES = ("local", "ray", "threads")


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """A whole run: what `job_definitions.make_run_configs` needs to build every
    job's config, and which engine starts the jobs (the local launcher starts them
    as OS processes on this machine; the Ray engine as Ray actors on a cluster)."""

    root_dir: str
    env_name: str = DEFAULT_ENV_NAME
    hparams: Optional[Hyperparams] = None  # None: the env's preset; given to every job
    num_actors: int = 1
    port: int = 0  # 0 picks a free port
    connect_timeout_s: float = 300.0  # how long clients wait for the server
    shard_probe_interval_s: float = 15.0  # how often clients ping a lost replay shard
    seed: Optional[int] = None  # for the learner, actors (each its own) and evaluator
    num_envs: Optional[int] = None  # per actor; None: ActorConfig's default
    # None: ActorConfig's default, or GENERIC_VARIABLE_UPDATE_INTERVAL for an env
    # without a preset.
    variable_update_interval: Optional[int] = None
    # The servers' SampleToInsertRatio tolerance; None: ServerConfig's derived one.
    samples_per_insert_error_buffer: Optional[float] = None
    strategy: Optional[str] = None  # the learner's; None: LearnerConfig's default
    checkpoint_interval: Optional[int] = None  # the learner's; None: LearnerConfig's default
    engine: str = "local"  # one of ENGINES
    num_replay_shards: int = 1  # Reverb servers sharing the replay (the first holds the variables)
    # The Ray engine only (ray_launch.py):
    ray_address: Optional[str] = None  # "auto", host:port or ray://host:port; None: a local Ray
    learner_gpus: float = 0.0  # GPUs the learner's Ray actor asks for
    actor_cpus: float = 1.0  # CPUs each actor's Ray actor asks for
    max_restarts: int = 3  # times Ray restarts each job after its process dies
    # JSON object of keyword arguments for the env's factory or make ("": none).
    env_kwargs: str = ""

    def __post_init__(self) -> None:
        _require_env_name(self.env_name)
        parse_env_kwargs(self.env_kwargs)
        if self.hparams is None:
            object.__setattr__(self, "hparams", hyperparams_for(self.env_name))
        interval = variable_update_interval_for(self.env_name, self.variable_update_interval)
        object.__setattr__(self, "variable_update_interval", interval)
        _require_positive_int("num_actors", self.num_actors)
        _require(0 <= self.port <= 65535, f"port must be in [0, 65535], got {self.port}.")
        _require_positive_number("connect_timeout_s", self.connect_timeout_s)
        _require_positive_number("shard_probe_interval_s", self.shard_probe_interval_s)
        _require_seed(self.seed)
        if self.checkpoint_interval is not None:
            _require_positive_int("checkpoint_interval", self.checkpoint_interval)
        _require_num_replay_shards(self.num_replay_shards, self.hparams)
        self._check_engine()

    def _check_engine(self) -> None:
        _require(self.engine in ENGINES, f"engine must be one of {ENGINES}, got {self.engine!r}.")
        ray_options = dict(
            ray_address=self.ray_address is not None,
            learner_gpus=self.learner_gpus != 0.0,
            actor_cpus=self.actor_cpus != 1.0,
            max_restarts=self.max_restarts != 3,
        )
        given = [f"--{name}" for name, set_ in ray_options.items() if set_]
        _require(
            self.engine == "ray" or not given,
            f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} only to a Ray "
            "cluster: add --engine=ray.",
        )
        if self.ray_address not in (None, "auto"):
            validate_address("ray_address", self.ray_address.removeprefix("ray://"))
        _require(
            _is_number(self.learner_gpus) and self.learner_gpus >= 0,
            f"learner_gpus must be a number >= 0, got {self.learner_gpus!r}.",
        )
        _require(  # Ray places actors of 0 or a fraction of a CPU
            _is_number(self.actor_cpus) and self.actor_cpus >= 0,
            f"actor_cpus must be a number >= 0, got {self.actor_cpus!r}.",
        )
        _require(
            isinstance(self.max_restarts, int)
            and not isinstance(self.max_restarts, bool)
            and self.max_restarts >= -1,
            f"max_restarts must be an integer >= 0 (-1: no limit), got {self.max_restarts!r}.",
        )
