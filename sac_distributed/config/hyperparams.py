"""`Hyperparams`: the hyperparameters every job shares, validated when built.

The environment name and the network sizes in it determine the Reverb table
signatures, so every job built from the same flags and presets agrees on them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Tuple

from sac_distributed.config.checks import (
    _is_number,
    _require,
    _require_positive_int,
    _require_positive_number,
    validate_rate_limit,
)

DEFAULT_ENV_NAME = "Pendulum-v1"
MAX_N_STEP = 100
MAX_FRAME_STACK = 16

LEARNING_RATE_SCHEDULES = ("constant", "linear")
NETWORK_INITS = ("glorot", "torch")
CRITIC_LOSSES = ("squared", "huber")
CONV_DTYPES = ("float32", "bfloat16")
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
    # learner and sent to actors with the weights (algorithm/sac/normalization.py).
    normalize_observations: bool = False
    # Rewards summed over n steps per replay transition (n-step returns; 1:
    # one-step SAC). Off-policy without correction, as in Acme's n-step adders.
    n_step: int = 1
    # The policy entropy the learned temperature steers to. None:
    # target_entropy_per_action_dim x dim(A) (below).
    target_entropy: Optional[float] = None
    # The target entropy per action dimension where target_entropy is unset:
    # -0.5 is TF-Agents' default (-dim(A)/2); -1 the SAC paper's and SB3's
    # (-dim(A)), which an env without a preset trains with (presets.py).
    target_entropy_per_action_dim: float = -0.5
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
    # The learner's update, a name in sac_distributed.algorithm.registry: "sac"
    # (TF-Agents' SacAgent, target critics) or "crossq" (Bhatt et al. 2024:
    # batch-renormalized actor and critics, no target critics, (s, a) and (s', a')
    # in one critic pass, Adam beta1 0.5, the actor updated every third step;
    # algorithm/crossq/). Replay, actors and the evaluator are the same for all.
    algorithm: str = "sac"
    # Camera observations (envs/pixels.py): an env observing one uint8 image
    # trains on its last frame_stack frames, stacked along the channels (DrQ,
    # DrQ-v2: 3); ignored for vector observations. action_repeat plays each
    # action that many env steps, rewards summed (1: off; DrQ: 4 on cheetah-run,
    # 2 on walker-walk, 8 on cartpole); step counts stay in policy steps.
    frame_stack: int = 3
    action_repeat: int = 1
    # The entropy temperature alpha before the first update (TF-Agents' and SB3's 1;
    # DrQ and SAC-AE start pixel SAC at 0.1). Learned from there.
    initial_alpha: float = 1.0
    # What the learner's conv encoder computes in (camera observations only):
    # float32, or bfloat16 on float32 weights (1.45x the updates/s on these 2-core
    # AVX512-BF16 CPUs, benchmarks/results/pixel_update_cost/). Actors and exports: float32.
    conv_dtype: str = "float32"
    # Act on [-1, 1]: the env's Box actions are rescaled to its bounds inside its step
    # (envs/actions.py), so the critics see [-1, 1] actions and the log-probabilities
    # and entropy target are measured there, as in SB3 (its policies act on [-1, 1]).
    # Exported policies act in the env's own bounds. False: the policy squashes
    # straight to the env's bounds (TF-Agents). An env on [-1, 1] is the same either way.
    rescale_actions: bool = False
    # For ablation studies of CrossQ only: names from algorithm/crossq/config.py's
    # ABLATIONS, each turning one of its pieces back to SAC's. Empty: as published.
    crossq_ablations: Tuple[str, ...] = ()

    @property
    def initial_log_alpha(self) -> float:
        """log(initial_alpha): where the learned log temperature starts."""
        return math.log(self.initial_alpha)

    def target_entropy_for(self, action_dims: int) -> float:
        """The target entropy of a policy over `action_dims` action dimensions."""
        if self.target_entropy is not None:
            return float(self.target_entropy)
        return self.target_entropy_per_action_dim * action_dims

    @property
    def policy_log_std_range(self) -> Optional[Tuple[float, float]]:
        """The bounds of the actor's log std, None where it is left unclipped."""
        return POLICY_LOG_STD_RANGE if self.clip_policy_log_std else None

    def __post_init__(self) -> None:
        object.__setattr__(self, "actor_fc_layer_params", tuple(self.actor_fc_layer_params))
        object.__setattr__(
            self, "critic_joint_fc_layer_params", tuple(self.critic_joint_fc_layer_params)
        )
        object.__setattr__(self, "crossq_ablations", tuple(self.crossq_ablations))
        # The checks run in this order; the first that fails names its value.
        _check_counts(self)
        _check_optimization(self)
        _check_options(self)
        _check_replay(self)

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


def _check_counts(hp: Hyperparams) -> None:
    """Sizes, intervals and counts: positive integers (the warm-up: >= 0)."""
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
        "frame_stack",
        "action_repeat",
    ):
        _require_positive_int(name, getattr(hp, name))
    _require(
        isinstance(hp.initial_collect_steps, int) and hp.initial_collect_steps >= 0,
        f"initial_collect_steps must be an integer >= 0, got {hp.initial_collect_steps!r}.",
    )


def _check_optimization(hp: Hyperparams) -> None:
    """Learning rates and their schedule, the critic loss, the algorithm, the network
    start, target and policy averaging, discount, Adam's and the squash's epsilons."""
    for name in (
        "critic_learning_rate",
        "actor_learning_rate",
        "alpha_learning_rate",
        "initial_alpha",
    ):
        _require_positive_number(name, getattr(hp, name))
    _require(
        hp.learning_rate_schedule in LEARNING_RATE_SCHEDULES,
        f"learning_rate_schedule must be one of {', '.join(LEARNING_RATE_SCHEDULES)}, "
        f"got {hp.learning_rate_schedule!r}.",
    )
    _require(
        hp.critic_loss in CRITIC_LOSSES,
        f"critic_loss must be one of {', '.join(CRITIC_LOSSES)}, got {hp.critic_loss!r}.",
    )
    _check_algorithm(hp)
    _require(
        hp.network_init in NETWORK_INITS,
        f"network_init must be one of {', '.join(NETWORK_INITS)}, got {hp.network_init!r}.",
    )
    _require(
        _is_number(hp.policy_averaging_tau) and 0.0 <= hp.policy_averaging_tau < 1.0,
        "policy_averaging_tau must be in [0, 1) (0: off; 0.001 averages about the last "
        f"1000 train steps), got {hp.policy_averaging_tau!r}.",
    )
    _require(
        0.0 < hp.target_update_tau <= 1.0,
        f"target_update_tau must be in (0, 1], got {hp.target_update_tau!r}.",
    )
    _require(0.0 <= hp.gamma <= 1.0, f"gamma must be in [0, 1], got {hp.gamma!r}.")
    _require(
        _is_number(hp.adam_epsilon) and hp.adam_epsilon > 0,
        f"adam_epsilon must be a number > 0 (Keras: 1e-7, PyTorch: 1e-8), got {hp.adam_epsilon!r}.",
    )
    _require(
        _is_number(hp.squash_log_prob_epsilon) and 0 <= hp.squash_log_prob_epsilon < 1,
        "squash_log_prob_epsilon must be a number in [0, 1) (0: exact, as TF-Agents; "
        f"SB3: 1e-6), got {hp.squash_log_prob_epsilon!r}.",
    )


def _check_options(hp: Hyperparams) -> None:
    """Switches, prioritized replay's exponents, n-step and the target entropy."""
    for name in (
        "normalize_observations",
        "prioritized_replay",
        "wait_for_eval",
        "clip_policy_log_std",
        "critic_layer_norm",
    ):
        _require(
            isinstance(getattr(hp, name), bool),
            f"{name} must be true or false, got {getattr(hp, name)!r}.",
        )
    _require(
        _is_number(hp.priority_exponent) and hp.priority_exponent >= 0,
        f"priority_exponent must be a number >= 0 (0: uniform sampling; typical 0.6), "
        f"got {hp.priority_exponent!r}.",
    )
    _require(
        _is_number(hp.importance_sampling_exponent) and 0 <= hp.importance_sampling_exponent <= 1,
        "importance_sampling_exponent must be in [0, 1] (0: no correction, 1: full; "
        f"typical 0.4), got {hp.importance_sampling_exponent!r}.",
    )
    _require(
        hp.frame_stack <= MAX_FRAME_STACK,
        f"frame_stack ({hp.frame_stack}) is above {MAX_FRAME_STACK}: each observation would "
        "hold that many frames (typical: 3, DrQ's).",
    )
    _require(
        hp.conv_dtype in CONV_DTYPES,
        f"conv_dtype must be one of {', '.join(CONV_DTYPES)} (bfloat16: faster convs on "
        f"CPUs with AVX512-BF16 or AMX, and on GPUs), got {hp.conv_dtype!r}.",
    )
    _require(
        hp.n_step <= MAX_N_STEP,
        f"n_step ({hp.n_step}) is above {MAX_N_STEP}: returns over that many steps "
        "are mostly the behaviour policy's, not the learned one's (typical: 1 to 5).",
    )
    _require(
        hp.target_entropy is None
        or (isinstance(hp.target_entropy, (int, float)) and math.isfinite(hp.target_entropy)),
        f"target_entropy must be a finite number or unset, got {hp.target_entropy!r}.",
    )
    _require(
        _is_number(hp.target_entropy_per_action_dim)
        and math.isfinite(hp.target_entropy_per_action_dim),
        "target_entropy_per_action_dim must be a finite number (-0.5: TF-Agents' "
        f"-dim(A)/2; -1: SB3's -dim(A)), got {hp.target_entropy_per_action_dim!r}.",
    )


def _check_replay(hp: Hyperparams) -> None:
    """The rate limit, reward scale, network sizes, and how batch, warm-up and capacity
    fit K transitions per item."""
    if hp.samples_per_insert == 0:
        object.__setattr__(hp, "samples_per_insert", None)
    if hp.samples_per_insert is not None:
        validate_rate_limit(hp.samples_per_insert, None)
    _require(
        math.isfinite(hp.reward_scale_factor),
        f"reward_scale_factor must be finite, got {hp.reward_scale_factor!r}.",
    )
    for name in ("actor_fc_layer_params", "critic_joint_fc_layer_params"):
        layers = getattr(hp, name)
        _require(
            len(layers) > 0 and all(isinstance(u, int) and u > 0 for u in layers),
            f"{name} must be a non-empty list of positive layer sizes, got {layers!r}.",
        )
    _require(
        hp.batch_size <= hp.replay_buffer_capacity,
        f"batch_size ({hp.batch_size}) exceeds replay_buffer_capacity "
        f"({hp.replay_buffer_capacity}); raise the capacity or lower the batch.",
    )
    _require(
        hp.initial_collect_steps <= hp.replay_buffer_capacity,
        f"initial_collect_steps ({hp.initial_collect_steps}) exceeds "
        f"replay_buffer_capacity ({hp.replay_buffer_capacity}): the learner would "
        "wait forever for a table that can never fill. Lower one or raise the other.",
    )

    k = hp.transitions_per_item
    _require(
        hp.batch_size % k == 0,
        f"batch_size ({hp.batch_size}) must be a multiple of transitions_per_item "
        f"({k}): the learner samples batch_size / transitions_per_item items per step.",
    )
    _require(
        hp.min_replay_items <= hp.replay_capacity_items,
        f"replay_buffer_capacity ({hp.replay_buffer_capacity}) holds "
        f"{hp.replay_capacity_items} items of {k} transitions, fewer than the "
        f"{hp.min_replay_items} items the learner waits for (initial_collect_steps / "
        "transitions_per_item); raise the capacity or lower transitions_per_item.",
    )


def default_error_buffer(samples_per_insert: float, hparams: Hyperparams) -> float:
    """An error buffer that Reverb accepts and that rarely blocks a learner step.

    It allows the learner to run ahead by a few batches and the actors to run
    ahead by a tenth of the warm-up size, and never falls below Reverb's floor.
    """
    floor = max(1.0, samples_per_insert)
    return max(floor, 4.0 * hparams.batch_size, 0.1 * hparams.min_replay_size * samples_per_insert)


def _check_algorithm(hparams: Hyperparams) -> None:
    """Refuses an unregistered algorithm, and what the algorithms' own checks refuse
    (the options an algorithm cannot follow; its options given to another)."""
    # Imported here, not at the top: the entries' config modules are loaded on first
    # use, and the presets build Hyperparams while this package is still loading.
    from sac_distributed.algorithm import registry

    registry.check(hparams)
