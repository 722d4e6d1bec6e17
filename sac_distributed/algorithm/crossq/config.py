"""CrossQ's entry in the registry: the options it cannot follow, its ablations, its
preset defaults, its strategy and its constants (`CrossQSettings`).

Imports no TensorFlow, so the checks run wherever a config is built.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sac_distributed.algorithm.registry import Algorithm, require

if TYPE_CHECKING:
    from sac_distributed.config import Hyperparams

NAME = "crossq"
# The checkpoint's name for the CrossQ agent.
CHECKPOINT_KEY = "crossq"
# CrossQ's published learning rate (Bhatt et al. 2024), its default for all three
# optimizers where the flags name none (the presets' rates are tuned for SAC).
LEARNING_RATE = 1e-3
# The options the CrossQ learner cannot follow, each with why; only their defaults pass.
UNSUPPORTED = {
    "prioritized_replay": "its update computes no per-item TD errors for the priorities",
    "policy_averaging_tau": (
        "an average of batch-renormalized weights has no running statistics to match"
    ),
    "critic_layer_norm": "its critics are batch-renormalized; a layer norm on top is not CrossQ",
    "normalize_observations": "its networks batch-renormalize their inputs themselves",
    "learning_rate_schedule": (
        "its actor steps every third train step, so a schedule over num_iterations "
        "would decay the actor's rate a third as far"
    ),
}
# CrossQ's pieces, each of which `Hyperparams.crossq_ablations` can turn back to
# what SAC does, to measure what that piece buys (`settings_for` reads them).
ABLATIONS = {
    "separate_passes": "(s, a) and (s', a') through each critic in two passes, not one",
    "target_critics": "bootstrap from Polyak-averaged target critics (target_update_tau)",
    "no_batch_renorm": "plain Dense and ReLU layers in the actor and critics",
    "adam_beta1_0.9": "Adam's default beta1 0.9 instead of CrossQ's 0.5",
    "no_policy_delay": "the actor and temperature step with every critic step",
}


@dataclasses.dataclass(frozen=True)
class CrossQSettings:
    """CrossQ's own constants, as its authors (and sbx) train it."""

    adam_beta1: float = 0.5  # Adam's first-moment decay for actor and critics
    policy_delay: int = 3  # critic steps per actor and temperature step
    renorm_momentum: float = 0.99  # running statistics: m = 0.99 m + 0.01 batch
    renorm_epsilon: float = 1e-3  # added to variances
    # Train-mode calls of a layer during which it is plain batch norm (r = 1,
    # d = 0): the running statistics must settle before they correct batches.
    renorm_warmup_steps: int = 100_000
    r_max: float = 3.0  # batch std / running std is clipped to [1/r_max, r_max]
    d_max: float = 5.0  # (batch mean - running mean) / running std to +-d_max
    # The pieces an ablation (Hyperparams.crossq_ablations) turns back to SAC's:
    joint_pass: bool = True  # False: (s, a) and (s', a') in two critic passes
    target_critics: bool = False  # True: the bootstrap reads Polyak-averaged copies
    batch_renorm: bool = True  # False: every BatchRenorm is the identity


DEFAULT_SETTINGS = CrossQSettings()


def settings_for(hparams: Hyperparams) -> CrossQSettings:
    """CrossQ's settings with each piece `hparams.crossq_ablations` names turned back."""
    ablated = set(hparams.crossq_ablations)
    default = DEFAULT_SETTINGS
    return dataclasses.replace(
        default,
        joint_pass="separate_passes" not in ablated,
        target_critics="target_critics" in ablated,
        batch_renorm="no_batch_renorm" not in ablated,
        adam_beta1=0.9 if "adam_beta1_0.9" in ablated else default.adam_beta1,
        policy_delay=1 if "no_policy_delay" in ablated else default.policy_delay,
    )


def _defaults(hparams: Hyperparams) -> dict:
    return {f.name: f.default for f in dataclasses.fields(hparams)}


def check(hparams: Hyperparams) -> None:
    """Ablations only on CrossQ runs; on them, none of UNSUPPORTED and batch statistics."""
    _check_ablations(hparams)
    if hparams.algorithm != NAME:
        return
    defaults = _defaults(hparams)
    for name, why in UNSUPPORTED.items():
        require(
            getattr(hparams, name) == defaults[name],
            f"--algorithm=crossq does not support {name}={getattr(hparams, name)!r}: {why}. "
            f"Leave {name} at its default, or use --algorithm=sac.",
        )
    require(
        hparams.batch_size >= 2,
        f"--algorithm=crossq needs batch_size >= 2 (batch statistics), got {hparams.batch_size}.",
    )


def _check_ablations(hparams: Hyperparams) -> None:
    """Ablations only of CrossQ, each a known piece named once."""
    names = hparams.crossq_ablations
    if not names:
        return
    require(
        hparams.algorithm == NAME,
        f"crossq_ablations={','.join(names)} ablates CrossQ's pieces, but algorithm is "
        f"{hparams.algorithm!r}: add --algorithm=crossq, or drop --crossq_ablations.",
    )
    unknown = [name for name in names if name not in ABLATIONS]
    require(
        not unknown,
        f"crossq_ablations has unknown {', '.join(map(repr, unknown))}; "
        f"each must be one of {', '.join(ABLATIONS)}.",
    )
    require(
        len(set(names)) == len(names),
        f"crossq_ablations names a piece twice: {','.join(names)}.",
    )


def adjust_preset(base: Hyperparams) -> Hyperparams:
    """CrossQ's learning rates and clipped log std, and every option in UNSUPPORTED at
    its default (a preset's own values for SAC, which a user who picks CrossQ did not
    ask for, e.g. InvertedPendulum's policy averaging)."""
    defaults = _defaults(base)
    rates = ("critic_learning_rate", "actor_learning_rate", "alpha_learning_rate")
    # The CrossQ authors' actor clips its log std; unclipped, HopperBullet's seed 0
    # went NaN at 21k updates (benchmarks/results/crossq_hopper).
    return dataclasses.replace(
        base,
        clip_policy_log_std=True,
        **{name: LEARNING_RATE for name in rates},
        **{name: defaults[name] for name in UNSUPPORTED},
    )


def check_strategy(strategy: str) -> None:
    require(
        strategy == "default",
        f"--algorithm=crossq runs under --strategy=default only, got {strategy!r}: "
        "its batch statistics would be each replica's own, unsynchronized.",
    )


ALGORITHM = Algorithm(
    name=NAME,
    title="CrossQ",
    learner="sac_distributed.algorithm.crossq.learner:CrossQLearner",
    checkpoint_key=CHECKPOINT_KEY,
    help="batch-renormalized networks, no target critics, learning rates 1e-3 unless given",
    check=check,
    adjust_preset=adjust_preset,
    check_strategy=check_strategy,
)
