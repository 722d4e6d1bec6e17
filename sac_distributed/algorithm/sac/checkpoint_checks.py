"""SAC's compatibility checks of a checkpoint against the learner about to restore it.

Each refuses, with a CheckpointError that names the flag to pass, a checkpoint
whose weights do not fit this run's settings: restoring it would either succeed
and give weights that expect other inputs, or fail on every checkpoint alike
and read as damage. A check that cannot read the checkpoint's index returns:
`LearnerCheckpoints.restore` then reports the file and falls back.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from sac_distributed.algorithm.checkpoint_checks import checkpoint_holds
from sac_distributed.algorithm.sac.config import CHECKPOINT_KEY
from sac_distributed.errors import CheckpointError

# The names under which SacLearner tracks its optional objects in a checkpoint.
NORMALIZER_KEY = "normalizer"
AVERAGED_ACTOR_KEY = "averaged_actor"


def check_normalization(path: str, normalize_observations: bool) -> None:
    """Refuses a checkpoint trained with the other normalize_observations setting.

    Restoring would succeed either way (unused values are ignored) and give
    weights that expect other inputs than they will get.
    """
    try:
        normalized = checkpoint_holds(path, NORMALIZER_KEY)
    except Exception:  # an unreadable index: restore() reports it, then falls back
        return
    if normalized == normalize_observations:
        return
    raise CheckpointError(
        f"The checkpoint {path} was written with normalize_observations={normalized}, "
        f"but this learner runs with normalize_observations={not normalized}: its "
        f"weights expect {'normalized' if normalized else 'raw'} observations. Pass "
        f"--normalize_observations={str(normalized).lower()}, or use a new root_dir."
    )


def check_averaging(path: str, averaging: bool) -> None:
    """Refuses a checkpoint without an averaged policy when averaging is on.

    Restoring would fail on the missing average (and then on every older
    checkpoint, which would read as damaged). The other way round is allowed:
    without averaging the learner publishes the trained actor and ignores it.
    """
    if not averaging:
        return
    try:
        averaged = checkpoint_holds(path, AVERAGED_ACTOR_KEY)
    except Exception:  # an unreadable index: restore() reports it, then falls back
        return
    if averaged:
        return
    raise CheckpointError(
        f"The checkpoint {path} was written without policy averaging, so it holds no "
        "averaged policy for --policy_averaging_tau to go on from. Pass "
        "--policy_averaging_tau=0 to resume this run as it was trained, or use a new "
        "root_dir."
    )


def check_critic(path: str, critic_layer_norm: bool) -> None:
    """Refuses a checkpoint of the other critic (with or without layer norm).

    Restoring would fail on every checkpoint alike and read as damage.
    """
    try:
        layer_norm = _has_layer_norm_critic(path)
    except Exception:  # an unreadable index: restore() reports it, then falls back
        return
    if layer_norm is None or layer_norm == critic_layer_norm:
        return
    raise CheckpointError(
        f"The checkpoint {path} was written with critic_layer_norm={layer_norm}, but "
        f"this learner runs with critic_layer_norm={not layer_norm}. Pass "
        f"--critic_layer_norm={str(layer_norm).lower()} to resume it, or use a new root_dir."
    )


def _has_layer_norm_critic(path: str) -> Optional[bool]:
    """Whether the checkpoint's first critic is a LayerNormCriticNetwork (its
    layers are tracked as `_hidden`; TF-Agents' CriticNetwork's as
    `_joint_layers`); None when it holds no critic."""
    prefix = f"{CHECKPOINT_KEY}/_critic_network_1/"
    names = [n for n, _ in tf.train.list_variables(path) if n.startswith(prefix)]
    if not names:
        return None
    return any("/_hidden/" in n for n in names)
