"""Typed configuration: SAC hyperparameters, per-environment presets, job configs.

Every job (server, actor, learner, evaluator) gets one frozen dataclass that is
validated when it is built, so a bad flag fails before any process connects to
anything. All jobs share `Hyperparams`: the environment name and the network
sizes in it determine the Reverb table signatures, so building every job from
the same flags and presets guarantees that the signatures agree.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Dict, Mapping, Optional, Tuple

from sac_distributed.errors import ConfigError

DEFAULT_ENV_NAME = "Pendulum-v1"
DEFAULT_PORT = 8008
STRATEGIES = ("default", "mirrored", "tpu")
# Who starts the jobs: sac-launch's own Supervisor (a process each), a Ray cluster, or
# sac-launch as threads of its own process (thread_launch.py).
ENGINES = ("local", "ray", "threads")
MAX_N_STEP = 100
MAX_SEED = 2**32 - 1  # TensorFlow's and NumPy's global seeds are 32-bit


LEARNING_RATE_SCHEDULES = ("constant", "linear")
NETWORK_INITS = ("glorot", "torch")
CRITIC_LOSSES = ("squared", "huber")
# The learner's update: TF-Agents' SacAgent, or CrossQ (algorithm/crossq.py).
ALGORITHMS = ("sac", "crossq")
# CrossQ's published learning rate (Bhatt et al. 2024), its default for all three
# optimizers where the flags name none (the presets' rates are tuned for SAC).
CROSSQ_LEARNING_RATE = 1e-3
# The bounds clip_policy_log_std holds the actor's log std in (TF-Agents'
# sac_agent.std_clip_transform and SB3's SAC actor use the same).
POLICY_LOG_STD_RANGE = (-20.0, 2.0)


@dataclasses.dataclass(frozen=True)
class Hyperparams:
    """SAC hyperparameters, named as in the TF-Agents SAC Minitaur tutorial."""

    initial_collect_steps: int = 10_000  # random-policy steps before training
    replay_buffer_capacity: int = 1_000_000  # transitions kept (FIFO eviction)
    batch_size: int = 256  # transitions per SGD step
    critic_learning_rate: float = 3e-4  # Adam, both critics
    actor_learning_rate: float = 3e-4  # Adam, policy network
    alpha_learning_rate: float = 3e-4  # Adam, entropy temperature
    target_update_tau: float = 0.005  # Polyak factor for target critics
    target_update_period: int = 1  # train steps between target updates
    gamma: float = 0.99  # discount
    reward_scale_factor: float = 1.0  # multiplies rewards in the critic target
    actor_fc_layer_params: Tuple[int, ...] = (256, 256)  # policy MLP
    critic_joint_fc_layer_params: Tuple[int, ...] = (256, 256)  # critic MLP
    policy_save_interval: int = 5_000  # train steps between SavedModel exports
    num_iterations: int = 1_000_000  # train steps in total
    eval_interval: int = 10_000  # train steps between evaluations
    num_eval_episodes: int = 10  # episodes per evaluation
    # The learner pauses at every eval_interval until the evaluator has written
    # that step's row to root_dir/eval/results.csv, so an evaluation falls on
    # every multiple, as in a single-process loop (benchmarks). Off: the
    # evaluator takes the newest weights when it is free and skips the rest.
    wait_for_eval: bool = False
    # Replay sampling budget: average samples per inserted transition, held by
    # Reverb's SampleToInsertRatio (batch_size = one update per env step).
    # None or 0: MinSize, i.e. actors run free.
    samples_per_insert: Optional[float] = None
    # Consecutive transitions per replay item (one flat float32 row each). The
    # server's per-item overhead (~1.4 KB) is paid once per item, so K=8 cuts
    # memory per transition ~4x and sampling cost per transition; but the K
    # rows of a sampled item are consecutive steps, i.e. correlated, unless an
    # actor steps num_envs > 1 envs (their rows interleave). Must divide
    # batch_size; capacity and warm-up sizes stay in transitions.
    transitions_per_item: int = 1
    # Train on clip((obs - mean) / std) with running statistics kept by the
    # learner and sent to actors with the weights (see normalization.py).
    normalize_observations: bool = False
    # Rewards summed over n steps per replay transition (n-step returns; 1:
    # one-step SAC). Off-policy without correction, as in Acme's n-step adders.
    n_step: int = 1
    # The policy entropy the learned temperature steers to. None: TF-Agents'
    # default, -dim(A)/2; the SAC paper (and SB3) use -dim(A).
    target_entropy: Optional[float] = None
    # Prioritized replay (Schaul et al. 2016; Ape-X): items are sampled with
    # probability ~ priority ** priority_exponent, new items enter at the
    # highest priority set so far, the learner sets priorities to |TD error|
    # and weights the critic loss by (N * P(i)) ** -importance_sampling_exponent,
    # normalized by the batch's largest weight.
    prioritized_replay: bool = False
    priority_exponent: float = 0.6  # alpha: 0 samples uniformly, 1 fully by priority
    importance_sampling_exponent: float = 0.4  # beta: 0 no correction, 1 full (Ape-X: 0.4)
    # How the three learning rates change over training: "constant", or "linear",
    # from the given rate at train step 0 down to 0 at num_iterations (SB3's
    # `lin_` schedules, used by rl-baselines3-zoo), which damps late updates.
    learning_rate_schedule: str = "constant"
    # How the actor's and critics' Dense layers start: "glorot" (TF-Agents':
    # Glorot-uniform kernels, zero biases) or "torch" (PyTorch's nn.Linear
    # default, which SB3 trains with: kernels and biases uniform in
    # +-1/sqrt(fan_in), smaller outputs at the start).
    network_init: str = "glorot"
    # Polyak averaging of the policy: with tau > 0 the policy that actors act
    # with, the evaluator scores and exports hold is an average of the trained
    # actor's weights, avg = (1 - tau) * avg + tau * actor after every train step
    # (about the last 1/tau steps). SAC itself trains the actor as before. 0: off.
    policy_averaging_tau: float = 0.0
    # Clip the actor's log std to POLICY_LOG_STD_RANGE before exp, as SB3 and
    # TF-Agents' std_clip_transform do. False: TF-Agents' default, exp unclipped.
    clip_policy_log_std: bool = False
    # Adam's epsilon for the three optimizers (Keras' default 1e-7; PyTorch's,
    # which SB3 trains with, is 1e-8).
    adam_epsilon: float = 1e-7
    # The policy's log-probability corrects for tanh with log(1 - tanh(u)^2 + eps).
    # 0: TF-Agents' exact correction. SB3 adds 1e-6, which caps the entropy cost
    # of a saturated action (about 13.8 nats per dimension at most).
    squash_log_prob_epsilon: float = 0.0
    # Layer normalization in the critics' hidden layers (Dense, LayerNorm, ReLU),
    # which bounds the features Q is read from (Ball et al. 2023, RLPD). False:
    # TF-Agents' CriticNetwork, plain Dense and ReLU.
    critic_layer_norm: bool = False
    # The per-row loss on each critic's TD error: "squared" (TF-Agents' SAC and
    # SB3: squared difference) or "huber" (quadratic within 1 of the target,
    # linear beyond, as DQN uses), which bounds how far one surprising row, a
    # fall the critic did not foresee, pulls a batch's gradient.
    critic_loss: str = "squared"
    # The learner's update: "sac" (TF-Agents' SacAgent, target critics) or
    # "crossq" (Bhatt et al. 2024: batch-renormalized actor and critics, no
    # target critics, (s, a) and (s', a') in one critic pass, Adam beta1 0.5,
    # the actor updated every third step; algorithm/crossq.py). Replay, actors
    # and the evaluator are the same for both.
    algorithm: str = "sac"

    @property
    def policy_log_std_range(self) -> Optional[Tuple[float, float]]:
        """The bounds of the actor's log std, None where it is left unclipped."""
        return POLICY_LOG_STD_RANGE if self.clip_policy_log_std else None

    def __post_init__(self) -> None:
        object.__setattr__(self, "actor_fc_layer_params", tuple(self.actor_fc_layer_params))
        object.__setattr__(
            self, "critic_joint_fc_layer_params", tuple(self.critic_joint_fc_layer_params)
        )
        for name in (
            "replay_buffer_capacity",
            "batch_size",
            "target_update_period",
            "policy_save_interval",
            "num_iterations",
            "eval_interval",
            "num_eval_episodes",
            "transitions_per_item",
            "n_step",
        ):
            _require_positive_int(name, getattr(self, name))
        _require(
            isinstance(self.initial_collect_steps, int) and self.initial_collect_steps >= 0,
            f"initial_collect_steps must be an integer >= 0, got {self.initial_collect_steps!r}.",
        )
        for name in ("critic_learning_rate", "actor_learning_rate", "alpha_learning_rate"):
            _require_positive_number(name, getattr(self, name))
        _require(
            self.learning_rate_schedule in LEARNING_RATE_SCHEDULES,
            f"learning_rate_schedule must be one of {', '.join(LEARNING_RATE_SCHEDULES)}, "
            f"got {self.learning_rate_schedule!r}.",
        )
        _require(
            self.critic_loss in CRITIC_LOSSES,
            f"critic_loss must be one of {', '.join(CRITIC_LOSSES)}, got {self.critic_loss!r}.",
        )
        _check_algorithm(self)
        _require(
            self.network_init in NETWORK_INITS,
            f"network_init must be one of {', '.join(NETWORK_INITS)}, got {self.network_init!r}.",
        )
        _require(
            _is_number(self.policy_averaging_tau) and 0.0 <= self.policy_averaging_tau < 1.0,
            "policy_averaging_tau must be in [0, 1) (0: off; 0.001 averages about the last "
            f"1000 train steps), got {self.policy_averaging_tau!r}.",
        )
        _require(
            0.0 < self.target_update_tau <= 1.0,
            f"target_update_tau must be in (0, 1], got {self.target_update_tau!r}.",
        )
        _require(0.0 <= self.gamma <= 1.0, f"gamma must be in [0, 1], got {self.gamma!r}.")
        _require(
            _is_number(self.adam_epsilon) and self.adam_epsilon > 0,
            f"adam_epsilon must be a number > 0 (Keras: 1e-7, PyTorch: 1e-8), "
            f"got {self.adam_epsilon!r}.",
        )
        _require(
            _is_number(self.squash_log_prob_epsilon) and 0 <= self.squash_log_prob_epsilon < 1,
            "squash_log_prob_epsilon must be a number in [0, 1) (0: exact, as TF-Agents; "
            f"SB3: 1e-6), got {self.squash_log_prob_epsilon!r}.",
        )
        for name in (
            "normalize_observations",
            "prioritized_replay",
            "wait_for_eval",
            "clip_policy_log_std",
            "critic_layer_norm",
        ):
            _require(
                isinstance(getattr(self, name), bool),
                f"{name} must be true or false, got {getattr(self, name)!r}.",
            )
        _require(
            _is_number(self.priority_exponent) and self.priority_exponent >= 0,
            f"priority_exponent must be a number >= 0 (0: uniform sampling; typical 0.6), "
            f"got {self.priority_exponent!r}.",
        )
        _require(
            _is_number(self.importance_sampling_exponent)
            and 0 <= self.importance_sampling_exponent <= 1,
            "importance_sampling_exponent must be in [0, 1] (0: no correction, 1: full; "
            f"typical 0.4), got {self.importance_sampling_exponent!r}.",
        )
        _require(
            self.n_step <= MAX_N_STEP,
            f"n_step ({self.n_step}) is above {MAX_N_STEP}: returns over that many steps "
            "are mostly the behaviour policy's, not the learned one's (typical: 1 to 5).",
        )
        _require(
            self.target_entropy is None
            or (
                isinstance(self.target_entropy, (int, float)) and math.isfinite(self.target_entropy)
            ),
            f"target_entropy must be a finite number or unset, got {self.target_entropy!r}.",
        )
        if self.samples_per_insert == 0:
            object.__setattr__(self, "samples_per_insert", None)
        if self.samples_per_insert is not None:
            validate_rate_limit(self.samples_per_insert, None)
        _require(
            math.isfinite(self.reward_scale_factor),
            f"reward_scale_factor must be finite, got {self.reward_scale_factor!r}.",
        )
        for name in ("actor_fc_layer_params", "critic_joint_fc_layer_params"):
            layers = getattr(self, name)
            _require(
                len(layers) > 0 and all(isinstance(u, int) and u > 0 for u in layers),
                f"{name} must be a non-empty list of positive layer sizes, got {layers!r}.",
            )
        _require(
            self.batch_size <= self.replay_buffer_capacity,
            f"batch_size ({self.batch_size}) exceeds replay_buffer_capacity "
            f"({self.replay_buffer_capacity}); raise the capacity or lower the batch.",
        )
        _require(
            self.initial_collect_steps <= self.replay_buffer_capacity,
            f"initial_collect_steps ({self.initial_collect_steps}) exceeds "
            f"replay_buffer_capacity ({self.replay_buffer_capacity}): the learner would "
            "wait forever for a table that can never fill. Lower one or raise the other.",
        )

        k = self.transitions_per_item
        _require(
            self.batch_size % k == 0,
            f"batch_size ({self.batch_size}) must be a multiple of transitions_per_item "
            f"({k}): the learner samples batch_size / transitions_per_item items per step.",
        )
        _require(
            self.min_replay_items <= self.replay_capacity_items,
            f"replay_buffer_capacity ({self.replay_buffer_capacity}) holds "
            f"{self.replay_capacity_items} items of {k} transitions, fewer than the "
            f"{self.min_replay_items} items the learner waits for (initial_collect_steps / "
            "transitions_per_item); raise the capacity or lower transitions_per_item.",
        )

    @property
    def min_replay_size(self) -> int:
        """Transitions the replay table must hold before the learner may sample."""
        return max(self.initial_collect_steps, self.batch_size, 1)

    @property
    def min_replay_items(self) -> int:
        """`min_replay_size` in replay items (rounded up)."""
        return -(-self.min_replay_size // self.transitions_per_item)

    @property
    def replay_capacity_items(self) -> int:
        """The replay table's max_size: whole items of transitions_per_item transitions."""
        return self.replay_buffer_capacity // self.transitions_per_item


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


def validate_rate_limit(samples_per_insert: float, error_buffer: Optional[float]) -> None:
    """Raises ConfigError unless Reverb would accept this SampleToInsertRatio."""
    _require(
        isinstance(samples_per_insert, (int, float))
        and math.isfinite(samples_per_insert)
        and samples_per_insert > 0,
        f"samples_per_insert must be a finite number > 0 (or 0 for no ratio), got "
        f"{samples_per_insert!r}. "
        "It is the average number of times each transition is sampled (e.g. "
        "batch_size * train steps per env step).",
    )
    if error_buffer is None:
        return
    floor = max(1.0, samples_per_insert)
    _require(
        math.isfinite(error_buffer) and error_buffer >= floor,
        f"samples_per_insert_error_buffer={error_buffer!r} is too small for "
        f"samples_per_insert={samples_per_insert}: Reverb requires it to be at least "
        f"max(1, samples_per_insert) = {floor}, or sampling and inserting can block "
        "each other forever. Omit it to use a safe default.",
    )


def default_error_buffer(samples_per_insert: float, hparams: Hyperparams) -> float:
    """An error buffer that Reverb accepts and that rarely blocks a learner step.

    It allows the learner to run ahead by a few batches and the actors to run
    ahead by a tenth of the warm-up size, and never falls below Reverb's floor.
    """
    floor = max(1.0, samples_per_insert)
    return max(floor, 4.0 * hparams.batch_size, 0.1 * hparams.min_replay_size * samples_per_insert)


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
        _require(
            self.hparams.algorithm != "crossq" or self.strategy == "default",
            f"--algorithm=crossq runs under --strategy=default only, got {self.strategy!r}: "
            "its batch statistics would be each replica's own, unsynchronized.",
        )
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
    variable_update_interval: Optional[int] = None  # None: ActorConfig's default
    # The servers' SampleToInsertRatio tolerance; None: ServerConfig's derived one.
    samples_per_insert_error_buffer: Optional[float] = None
    strategy: Optional[str] = None  # the learner's; None: LearnerConfig's default
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
        _require_positive_int("num_actors", self.num_actors)
        _require(0 <= self.port <= 65535, f"port must be in [0, 65535], got {self.port}.")
        _require_positive_number("connect_timeout_s", self.connect_timeout_s)
        _require_positive_number("shard_probe_interval_s", self.shard_probe_interval_s)
        _require_seed(self.seed)
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


def _check_algorithm(hparams: Hyperparams) -> None:
    """Refuses an unknown algorithm, and the options the CrossQ learner cannot follow."""
    _require(
        hparams.algorithm in ALGORITHMS,
        f"algorithm must be one of {', '.join(ALGORITHMS)}, got {hparams.algorithm!r}.",
    )
    if hparams.algorithm != "crossq":
        return
    refused = {
        "prioritized_replay": (
            hparams.prioritized_replay,
            "its update computes no per-item TD errors for the priorities",
        ),
        "policy_averaging_tau": (
            hparams.policy_averaging_tau != 0,
            "an average of batch-renormalized weights has no running statistics to match",
        ),
        "critic_layer_norm": (
            hparams.critic_layer_norm,
            "its critics are batch-renormalized; a layer norm on top is not CrossQ",
        ),
        "normalize_observations": (
            hparams.normalize_observations,
            "its networks batch-renormalize their inputs themselves",
        ),
        "learning_rate_schedule": (
            hparams.learning_rate_schedule != "constant",
            "its actor steps every third train step, so a schedule over num_iterations "
            "would decay the actor's rate a third as far",
        ),
    }
    for name, (asked, why) in refused.items():
        _require(
            not asked,
            f"--algorithm=crossq does not support {name}={getattr(hparams, name)!r}: {why}. "
            f"Leave {name} at its default, or use --algorithm=sac.",
        )
    _require(
        hparams.batch_size >= 2,
        f"--algorithm=crossq needs batch_size >= 2 (batch statistics), got {hparams.batch_size}.",
    )


def validate_address(name: str, address: str) -> None:
    """Raises ConfigError unless `address` looks like host:port."""
    host, sep, port = address.rpartition(":")
    ok = bool(sep) and bool(host) and port.isdigit() and 0 < int(port) < 65536
    _require(
        ok,
        f"--{name}={address!r} is not a host:port address (for example localhost:8008).",
    )


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


def parse_env_kwargs(text: Optional[str]) -> Dict[str, Any]:
    """`--env_kwargs` as a dict; raises ConfigError unless it is a JSON object."""
    if not text:
        return {}
    example = """e.g. --env_kwargs='{"goal_radius": 0.1}'"""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"--env_kwargs={text!r} is not JSON ({e.msg}): give a JSON object, {example}."
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"--env_kwargs={text!r} is a JSON {type(value).__name__}, not an object: give "
            f"keyword arguments as an object, {example}."
        )
    return value


def _require_env_name(env_name: str) -> None:
    _require(
        isinstance(env_name, str) and bool(env_name.strip()),
        "env_name must be a gym or pybullet environment id such as Pendulum-v1.",
    )


def _require_seed(seed: Optional[int]) -> None:
    _require(
        seed is None
        or (isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= MAX_SEED),
        f"seed must be an integer in [0, {MAX_SEED}] or unset, got {seed!r}.",
    )


def _require_positive_int(name: str, value: Any) -> None:
    _require(
        isinstance(value, int) and not isinstance(value, bool) and value > 0,
        f"{name} must be a positive integer, got {value!r}.",
    )


def _require_positive_number(name: str, value: Any) -> None:
    _require(_is_number(value) and value > 0, f"{name} must be a number > 0, got {value!r}.")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


# --- presets (after the validators they use) ---------------------------------

# Small tables (and Pendulum's samples_per_insert) keep K=1: memory is no issue
# there, and independent samples matter more than sampling cost.
_TUTORIAL = Hyperparams(
    initial_collect_steps=10_000,
    replay_buffer_capacity=10_000,
    num_iterations=100_000,
    eval_interval=10_000,
    num_eval_episodes=20,
    policy_save_interval=5_000,
)
# K=8: a million transitions fit in ~0.4 GB of server memory instead of ~4 GB.
_LOCOMOTION = Hyperparams(
    replay_buffer_capacity=1_000_000, num_iterations=1_000_000, transitions_per_item=8
)
_SMALL_CONTROL = Hyperparams(
    initial_collect_steps=1_000,
    replay_buffer_capacity=100_000,
    batch_size=128,
    actor_fc_layer_params=(64, 64),
    critic_joint_fc_layer_params=(64, 64),
    critic_learning_rate=1e-3,
    actor_learning_rate=1e-3,
    alpha_learning_rate=1e-3,
    num_iterations=8_000,
    eval_interval=1_000,
    num_eval_episodes=10,  # a 5-episode mean of Pendulum varies by +-36 (eval_noise.py)
    policy_save_interval=5_000,
    samples_per_insert=128.0,  # one update of batch 128 per env step
)

# rl-baselines3-zoo's learning rate, discount and target-update rate for its PyBullet
# walkers (hyperparams/sac.yml).
_ZOO_UPDATES = dict(
    critic_learning_rate=7.3e-4,
    actor_learning_rate=7.3e-4,
    alpha_learning_rate=7.3e-4,
    gamma=0.98,
    target_update_tau=0.02,
)

PRESETS: Mapping[str, Hyperparams] = {
    "MinitaurBulletEnv-v0": _TUTORIAL,
    "HalfCheetahBulletEnv-v0": _LOCOMOTION,
    # rl-baselines3-zoo's learning rate, gamma, tau and net sizes (not gSDE or the
    # time feature): median greedy return at 100k env steps 674 over 6 seeds (609 over
    # the first 3), against 271 with _LOCOMOTION over 3 (README Results;
    # benchmarks/results/learning/).
    "AntBulletEnv-v0": dataclasses.replace(
        _LOCOMOTION,
        **_ZOO_UPDATES,
        actor_fc_layer_params=(400, 300),
        critic_joint_fc_layer_params=(400, 300),
    ),
    # rl-baselines3-zoo trains all four PyBullet walkers with one setting.
    "HopperBulletEnv-v0": _LOCOMOTION,
    # The zoo's learning rate, gamma and tau and SB3's target entropy -dim(A), on
    # 256x256 nets: greedy return at 300k env steps 2107, 1642 and 2032 on seeds
    # 0-2, against 1307, 729 and 997 with _LOCOMOTION (the zoo: 1682); 706 [392,
    # 1525] at 100k against _LOCOMOTION's 817 [783, 842] (the zoo: 313). The target
    # entropy alone did not help (978 on seed 0). README Results;
    # benchmarks/results/learning_walker_300k/.
    "Walker2DBulletEnv-v0": dataclasses.replace(
        _LOCOMOTION,
        **_ZOO_UPDATES,
        target_entropy=-6.0,
    ),
    # n-step returns, a longer horizon, the Huber critic loss and policy averaging
    # over about 200 train steps: over 30 seeds x 30k env steps 29 reached 1000
    # and 27 held it (>= 80 % of later evals >= 900). n-step 3 and gamma 0.995
    # alone held 7 of 10; over 10 seeds each, the Huber loss alone (7), the averaging
    # alone (8; 14 of 20), and prioritized replay, target entropy -1, tau 0.01 with
    # actor lr 3e-4, linear learning-rate decay, observation normalization and
    # PyTorch's network start, alone or paired (6 to 8), held less; layer-normalized
    # critics held 3; over 5 seeds, 0.5 or 2 SGD steps per env step, target entropy
    # -3 or 0, tau 0.02 and 256x256 nets held 0 to 3 (README Results;
    # benchmarks/results/learning/).
    "InvertedPendulumBulletEnv-v0": dataclasses.replace(
        _SMALL_CONTROL,
        num_iterations=30_000,
        n_step=3,
        gamma=0.995,
        critic_loss="huber",
        policy_averaging_tau=0.005,
    ),
    "Pendulum-v1": _SMALL_CONTROL,
    # Gymnasium's MuJoCo v5 walkers: SB3's SAC defaults, which rl-baselines3-zoo keeps for
    # its MuJoCo envs (learning rate 3e-4, batch 256, gamma 0.99, tau 0.005, 256x256 nets,
    # 10k random steps) and SAC's target entropy -dim(A) (TF-Agents' default is -dim(A)/2),
    # as CleanRL's and the SimbaV2 authors' SAC baselines use them.
    **{
        name: dataclasses.replace(_LOCOMOTION, target_entropy=-float(action_dims))
        for name, action_dims in (
            ("HalfCheetah-v5", 6),
            ("Hopper-v5", 3),
            ("Walker2d-v5", 6),
            ("Ant-v5", 8),
        )
    },
}
GENERIC_PRESET = Hyperparams()
# An env without a preset also gets, where no flag sets them, values scaled to the
# run's length (generic_defaults): a tenth of num_iterations as warm-up and between
# evaluations (at most this), and one update per env step.
GENERIC_MAX_INTERVAL = 10_000


def generic_defaults(base: Hyperparams, given: Mapping[str, Any]) -> Dict[str, Any]:
    """For an env without a preset: the values that `given` (the flags) leaves unset,
    scaled to the run's length.

    The presets' runs make about one SGD step per env step; so does
    samples_per_insert = batch_size. A tenth of the run as random warm-up and
    ten evaluations per run suit a 3,000-step first try and a 1M-step run alike.
    """
    run = {k: given.get(k, getattr(base, k)) for k in _GENERIC_INPUTS}
    if not all(_is_number(v) and v > 0 for v in run.values()):
        return {}  # Hyperparams' own checks name the bad value
    tenth = max(1, int(run["num_iterations"]) // 10)
    derived = dict(
        samples_per_insert=float(run["batch_size"]),
        initial_collect_steps=min(
            GENERIC_MAX_INTERVAL,
            int(run["replay_buffer_capacity"]),
            max(int(run["batch_size"]), tenth),
        ),
        eval_interval=min(GENERIC_MAX_INTERVAL, tenth),
    )
    return {k: v for k, v in derived.items() if k not in given}


_GENERIC_INPUTS = ("num_iterations", "batch_size", "replay_buffer_capacity")


def describe_generic_defaults(env_name: str, hparams: Hyperparams) -> str:
    """One line for a launcher's banner: what an env without a preset runs with."""
    spi = hparams.samples_per_insert
    rate = "no rate limit (samples_per_insert=0)"
    if spi:
        rate = f"samples_per_insert={spi:g} ({spi / hparams.batch_size:g} SGD steps per env step)"
    return (
        f"no preset for {env_name}: generic defaults for {hparams.num_iterations} train "
        f"steps: {hparams.initial_collect_steps} random warm-up env steps, an evaluation every "
        f"{hparams.eval_interval} train steps, " + rate + "; each has a flag of the same name"
    )


def hyperparams_for(env_name: str, overrides: Optional[Mapping[str, Any]] = None) -> Hyperparams:
    """Returns the preset for `env_name` with every non-None override applied
    (an env without a preset: GENERIC_PRESET, then `generic_defaults`)."""
    base = PRESETS.get(env_name, GENERIC_PRESET)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    if given.get("algorithm") == "crossq":  # its own rates unless the flags name others
        rates = ("critic_learning_rate", "actor_learning_rate", "alpha_learning_rate")
        base = dataclasses.replace(base, **{name: CROSSQ_LEARNING_RATE for name in rates})
    unknown = set(given) - {f.name for f in dataclasses.fields(Hyperparams)}
    _require(not unknown, f"Unknown hyperparameters: {sorted(unknown)}.")
    try:
        if env_name not in PRESETS:
            given = {**generic_defaults(base, given), **given}
        return dataclasses.replace(base, **given)
    except TypeError as e:  # e.g. a string where a number belongs
        raise ConfigError(f"Invalid hyperparameter value: {e}") from e
