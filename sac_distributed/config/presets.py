"""Per-environment presets and the defaults for an env without one (`hyperparams_for`)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, Mapping, Optional

from sac_distributed.config.checks import _is_number, _require
from sac_distributed.config.hyperparams import Hyperparams
from sac_distributed.errors import ConfigError

# Small tables (and one update per env step, preset_defaults) keep K=1: memory is no issue
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
    num_eval_episodes=10,  # a 5-episode mean of Pendulum varies by +-36 (probe.py eval_noise)
    policy_save_interval=5_000,
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

# Every learning rate at 1e-3 (CrossQ's; CleanRL's SAC trains its critics at 1e-3):
# HalfCheetah-v5's greedy return at 100k env steps 7049 [5639, 7060] over seeds 0-2,
# against 4852 [4672, 5978] at 3e-4 (SAC on v4: 6156). It did worse than 3e-4 on
# Walker2d-v5 (392 [294, 400] against 723 [497, 808], seeds 0-2), Hopper-v5 and Ant-v5 (README
# Results; benchmarks/results/learning_mujoco_tuning/), so only HalfCheetah takes it.
_MUJOCO_FAST_RATES = dict(
    critic_learning_rate=1e-3, actor_learning_rate=1e-3, alpha_learning_rate=1e-3
)
# CleanRL's SAC: critics at 1e-3 (actor and alpha at 3e-4) and 5k random warm-up steps.
# Hopper-v5's greedy return at 100k env steps 1114 [867, 2402] over seeds 0-2, against
# 734 [566, 1826] with SB3's defaults, each seed higher; over seeds 0-5 1002 [863, 2404],
# below SAC on v4's 1103. The critic rate alone gave 823 [535, 2732] on seeds 0-2
# (benchmarks/results/learning_mujoco_tuning/). With TF-Agents' target entropy
# -dim(A)/2 (-1.5) as well, 1728 [827, 2659] over seeds 0-5 (one seed flagged unstable
# against two), above the reference; Hopper-v5's preset takes both, Walker2d-v5's the
# first two.
_CLEANRL_CRITIC = dict(critic_learning_rate=1e-3, initial_collect_steps=5_000)
_HOPPER = dict(**_CLEANRL_CRITIC, target_entropy=-1.5)

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
    # 10k random steps) and SAC's target entropy -dim(A) (TF-Agents' default is -dim(A)/2);
    # HalfCheetah's and Hopper's learning rates (and Hopper's warm-up) and Hopper's target
    # entropy as above. Ant-v5 takes 3-step returns (732 [524, 749] at 100k env steps over
    # seeds 0-5 against 515 [379, 639] with 1-step, five seeds of six higher; 5-step 731
    # against 741 on seeds 0-2) and, since 2026-12-02, TF-Agents' target entropy -4: with
    # 3-step returns 805 [506, 1019] over seeds 0-5 against -8's 732 [524, 749], five seeds
    # of six higher (SAC on v4: 747; learning_mujoco_tuning/, ours-n3ent4). Seeds 0-2
    # chose it, 3-5 confirmed it (754 against 723); with 1-step returns -4 was higher on
    # seeds 0-2 but lower on 3-5 (534 [358, 910] against 515 [379, 639] over six). -2,
    # layer-normalized critics and observation normalization did no better.
    # Humanoid-v5 (since 2026-12-02) clips the actor's log std to [-20, 2], as SB3 and
    # TF-Agents' std_clip_transform do: its observations reach thousands, and unclipped
    # the first update's std overflows (NaN critic loss at train_step 1, all 3 seeds).
    # Clipped: 513 [489, 649] at 100k env steps over seeds 0-2 (learning_mujoco/).
    # Walker2d-v5 takes CleanRL's critic rate and warm-up since 2026-12-02: 665 [383, 960]
    # over seeds 0-5 against 615 [463, 808] with SB3's defaults, higher on four seeds of
    # six (SAC on v4: 690; learning_mujoco_tuning/, ours-cleanrl). 3-step returns gave 589
    # against 723 on seeds 0-2, target entropy -3 597 against 658 on seeds 0-3.
    **{
        name: dataclasses.replace(_LOCOMOTION, **{"target_entropy": -float(action_dims), **changes})
        for name, action_dims, changes in (
            ("HalfCheetah-v5", 6, _MUJOCO_FAST_RATES),
            ("Hopper-v5", 3, _HOPPER),
            ("Walker2d-v5", 6, _CLEANRL_CRITIC),
            ("Ant-v5", 8, {"n_step": 3, "target_entropy": -4.0}),
            ("Humanoid-v5", 17, {"clip_policy_log_std": True}),
        )
    },
}
# An env nobody tuned for trains with SB3's SAC defaults where they differ from
# TF-Agents' and learned faster on untuned envs (issue 73; docs/tuning.md,
# benchmarks/results/learning_defaults_30k/): PyTorch's layer start, SB3's target
# entropy -dim(A), a 100-step random warm-up (generic_defaults) and actors that pull
# weights every 10 env steps (GENERIC_VARIABLE_UPDATE_INTERVAL). It also clips the
# actor's log std to [-20, 2] (SB3's and TF-Agents' std_clip_transform range):
# unclipped, observations in the thousands (Humanoid-v5's) overflow the untrained
# actor's std and the first update is NaN. And it acts on [-1, 1] as SB3's policies do
# (rescale_actions): on Pusher-v5 (actions in [-2, 2]) it reached SB3-defaults' mark at
# 0.82x SB3's env steps (six seeds; 1.54x without it) and on InvertedPendulum-v5
# ([-3, 3]) at 0.84x (1.18x without), benchmarks/results/learning_defaults_30k/.
GENERIC_PRESET = Hyperparams(
    clip_policy_log_std=True,
    network_init="torch",
    target_entropy_per_action_dim=-1.0,
    rescale_actions=True,
)
# SB3's learning_starts: random env steps before the first update.
GENERIC_WARM_UP = 100
# Actor steps between weight pulls for an env without a preset (the actors' own default,
# 1000, stays for the presets, whose published runs were trained with it).
GENERIC_VARIABLE_UPDATE_INTERVAL = 10


def variable_update_interval_for(env_name: str, given: Optional[int]) -> Optional[int]:
    """The actors' weight-pull interval: the flag's, else GENERIC_VARIABLE_UPDATE_INTERVAL
    for an env without a preset, else None (ActorConfig's default, the presets')."""
    if given is not None or env_name in PRESETS:
        return given
    return GENERIC_VARIABLE_UPDATE_INTERVAL


# An env without a preset also gets, where no flag sets them, a tenth of num_iterations
# between evaluations (at most this) and one update per env step (generic_defaults).
GENERIC_MAX_INTERVAL = 10_000


def generic_defaults(base: Hyperparams, given: Mapping[str, Any]) -> Dict[str, Any]:
    """For an env without a preset: the values that `given` (the flags) leaves unset.

    One SGD step per env step (samples_per_insert = batch_size), as the presets'
    runs make; GENERIC_WARM_UP random env steps (at most the replay's capacity); and
    ten evaluations per run, which suit a 3,000-step first try and a 1M-step run alike.
    """
    run = {k: given.get(k, getattr(base, k)) for k in _GENERIC_INPUTS}
    if not all(_is_number(v) and v > 0 for v in run.values()):
        return {}  # Hyperparams' own checks name the bad value
    tenth = max(1, int(run["num_iterations"]) // 10)
    derived = dict(
        samples_per_insert=float(run["batch_size"]),
        initial_collect_steps=min(GENERIC_WARM_UP, int(run["replay_buffer_capacity"])),
        eval_interval=min(GENERIC_MAX_INTERVAL, tenth),
    )
    return {k: v for k, v in derived.items() if k not in given}


_GENERIC_INPUTS = ("num_iterations", "batch_size", "replay_buffer_capacity")


def preset_defaults(base: Hyperparams, given: Mapping[str, Any]) -> Dict[str, Any]:
    """For an env with a preset: one SGD step per env step (samples_per_insert =
    batch_size, with the flags' batch size) unless the preset or a flag sets the rate.

    Every published result was trained that way (benchmarks/learning.py), so a run
    with no flag trains as its README row did; unlimited, the actors ran free (on
    HalfCheetah-v5 about 0.03 updates per env step).
    """
    if base.samples_per_insert is not None or "samples_per_insert" in given:
        return {}
    batch_size = given.get("batch_size", base.batch_size)
    if not (_is_number(batch_size) and batch_size > 0):
        return {}  # Hyperparams' own checks name the bad value
    return {"samples_per_insert": float(batch_size)}


def describe_generic_defaults(
    env_name: str, hparams: Hyperparams, variable_update_interval: int
) -> str:
    """One line for a launcher's banner: what an env without a preset runs with."""
    spi = hparams.samples_per_insert
    rate = "no rate limit (samples_per_insert=0)"
    if spi:
        rate = f"samples_per_insert={spi:g} ({spi / hparams.batch_size:g} SGD steps per env step)"
    entropy = (
        f"target_entropy={hparams.target_entropy:g}"
        if hparams.target_entropy is not None
        else f"target_entropy_per_action_dim={hparams.target_entropy_per_action_dim:g}"
    )
    return (
        f"no preset for {env_name}: generic defaults for {hparams.num_iterations} train "
        f"steps: {hparams.initial_collect_steps} random warm-up env steps, an evaluation every "
        f"{hparams.eval_interval} train steps, "
        + rate
        + f", network_init={hparams.network_init}, {entropy}, actors pull weights every "
        f"{variable_update_interval} env steps (variable_update_interval)"
        + _clip_text(hparams)
        + (
            ", actions rescaled from [-1, 1] to the env's bounds (rescale_actions)"
            if hparams.rescale_actions
            else ""
        )
        + "; each has a flag of the same name"
    )


# What the generic defaults handle well, read from a random rollout (envs.random_rollout):
# SAC's entropy bonus is about 1 per step, so per-step rewards far from that scale
# starve or swamp it; and gamma looks about 1 / (1 - gamma) steps ahead.
LARGE_REWARD = 100.0
SMALL_REWARD = 0.01
HORIZONS_PER_EPISODE = 10  # MuJoCo's 1000-step episodes at gamma 0.99 sit at this bound


def untuned_warnings(env_name: str, rollout: Any, hparams: Hyperparams) -> List[str]:
    """One line each for what the defaults may not handle in `env_name`, naming the flag to
    change. `rollout` has RandomRollout's fields (steps, episodes_ended, longest_episode,
    mean_abs_reward, nonzero_rewards)."""
    found = []
    horizon = round(1.0 / max(1e-9, 1.0 - hparams.gamma), 6)  # 0.99: 100, not 99.99..
    if rollout.steps and not rollout.episodes_ended:
        found.append(
            f"no episode of {env_name} ended in {rollout.steps} random env steps: an "
            "evaluation episode runs until the env ends it, so give the env a time limit "
            "(gymnasium.wrappers.TimeLimit in a factory); and if its episodes are that long, "
            f"gamma={hparams.gamma:g} looks only ~{horizon:.0f} steps ahead: raise --gamma "
            "if its reward comes late"
        )
    elif rollout.longest_episode > HORIZONS_PER_EPISODE * horizon:
        suggested = 1.0 - HORIZONS_PER_EPISODE / rollout.longest_episode
        found.append(
            f"episodes of {env_name} last up to {rollout.longest_episode} steps, "
            f"{rollout.longest_episode / horizon:.0f}x what gamma={hparams.gamma:g} looks "
            f"ahead (~{horizon:.0f} steps): if its reward comes late, raise --gamma "
            f"(e.g. --gamma={math.floor(suggested * 1000) / 1000:g})"
        )
    if rollout.steps and not rollout.nonzero_rewards:
        found.append(
            f"{env_name} gave no reward in {rollout.steps} random env steps (a sparse "
            f"reward): the {hparams.initial_collect_steps} random warm-up steps may see "
            "none; raise --initial_collect_steps, or shape the reward"
        )
    scaled = rollout.mean_abs_reward * abs(hparams.reward_scale_factor)
    if rollout.steps and rollout.nonzero_rewards and not SMALL_REWARD <= scaled <= LARGE_REWARD:
        factor = 10.0 ** -round(math.log10(rollout.mean_abs_reward)) if scaled else 1.0
        found.append(
            f"{env_name}'s rewards average |r| = {rollout.mean_abs_reward:.3g} per random "
            f"step (x reward_scale_factor={hparams.reward_scale_factor:g}), far from the ~1 "
            "per step of SAC's entropy bonus, so the temperature tuning will be slow or "
            f"swamped: scale them with --reward_scale_factor={factor:g}"
        )
    return found


def _clip_text(hparams: Hyperparams) -> str:
    if hparams.policy_log_std_range is None:
        return ""
    low, high = hparams.policy_log_std_range
    return f", the actor's log std clipped to [{low:g}, {high:g}] (clip_policy_log_std)"


def hyperparams_for(env_name: str, overrides: Optional[Mapping[str, Any]] = None) -> Hyperparams:
    """Returns the preset for `env_name` with every non-None override applied
    (an env without a preset: GENERIC_PRESET, then `generic_defaults`)."""
    base = PRESETS.get(env_name, GENERIC_PRESET)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    base = _for_algorithm(base, given.get("algorithm", base.algorithm))
    unknown = set(given) - {f.name for f in dataclasses.fields(Hyperparams)}
    _require(not unknown, f"Unknown hyperparameters: {sorted(unknown)}.")
    try:
        if env_name not in PRESETS:
            given = {**generic_defaults(base, given), **given}
        else:
            given = {**preset_defaults(base, given), **given}
        return dataclasses.replace(base, **given)
    except TypeError as e:  # e.g. a string where a number belongs
        raise ConfigError(f"Invalid hyperparameter value: {e}") from e


def _for_algorithm(base: Hyperparams, algorithm: str) -> Hyperparams:
    """The preset as the algorithm's registry entry adjusts it (its own defaults,
    which the flags still override); an unknown name is Hyperparams' to refuse."""
    # Imported here: the registry's entries are loaded on first use (hyperparams.py).
    from sac_distributed.algorithm import registry

    entry = registry.find(algorithm) if isinstance(algorithm, str) else None
    return base if entry is None else entry.adjust_preset(base)
