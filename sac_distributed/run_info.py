"""Which run a root_dir holds, and the check that a job belongs to it.

The learner records the run's env and hyperparameters in root_dir/run_info.json.
A job started on a root_dir that holds another run's data (another env, other
network sizes: any of CHECKPOINT_BOUND_HPARAMS) would mix the two: a server
would restore the other run's replay and write its own checkpoints beside it,
an evaluator would append to the other run's results, a learner would fail on
the other run's checkpoint. So every job, and sac-launch before it starts
any, calls `check_same_run` before it reads or writes anything in root_dir.

This module imports nothing heavier than json, so the launcher and the tools
can use it without TensorFlow.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from typing import Any, Dict, List, Optional

from sac_distributed import paths
from sac_distributed.config import Hyperparams, parse_env_kwargs
from sac_distributed.errors import ConfigError

# Settings a run's data is bound to: its weights' shapes, the replay's rows and
# the inputs its weights expect. A job with another value is refused.
CHECKPOINT_BOUND_HPARAMS = (
    "actor_fc_layer_params",
    "critic_joint_fc_layer_params",
    "transitions_per_item",
    "normalize_observations",
    "critic_layer_norm",
    "algorithm",
    "crossq_ablations",
)


def read_run_info(root_dir: str) -> Optional[Dict[str, Any]]:
    """root_dir/run_info.json, or None if there is none."""
    path = paths.run_info_path(root_dir)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            info = json.load(f)
    except (OSError, ValueError) as error:
        raise ConfigError(
            f"{path} cannot be read ({error}): use a new --root_dir, or remove that file "
            "if the run it describes is gone."
        ) from None
    if not isinstance(info, dict):
        raise ConfigError(f"{path} is not a JSON object: use a new --root_dir.")
    return info


def holds_run_data(root_dir: str) -> bool:
    """True once root_dir holds a learner checkpoint, a replay checkpoint or results."""
    if glob.glob(paths.checkpoint_index_pattern(root_dir)):
        return True
    if os.path.exists(paths.results_path(root_dir)):
        return True
    replay_dirs = glob.glob(os.path.join(root_dir, paths.REPLAY_CHECKPOINT_DIR + "*"))
    return any(os.listdir(d) for d in replay_dirs if os.path.isdir(d))


def differences(
    info: Dict[str, Any], env_name: str, hparams: Hyperparams, env_kwargs: str = ""
) -> List[str]:
    """'name=recorded, you asked asked' for each run-bound setting that differs."""
    found = []
    if info.get("env_name", env_name) != env_name:
        found.append(f"env_name={info['env_name']}, you asked {env_name}")
    # Keyword arguments make another task (or other observation shapes): compared
    # as JSON values, so spacing and key order do not count. Runs from before
    # --env_kwargs existed recorded none.
    had = info.get("env_kwargs", "")
    if parse_env_kwargs(had) != parse_env_kwargs(env_kwargs):
        found.append(f"env_kwargs={had or '{}'}, you asked {env_kwargs or '{}'}")
    asked = dataclasses.asdict(hparams)
    recorded = info.get("hparams", {})
    for name in CHECKPOINT_BOUND_HPARAMS:
        had = recorded.get(name)
        if had is not None and _same_value(had) != _same_value(asked.get(name)):
            found.append(f"{name}={_shown(had)}, you asked {_shown(asked.get(name))}")
    return found


def check_same_run(
    root_dir: str, env_name: str, hparams: Hyperparams, env_kwargs: str = ""
) -> None:
    """Refuses a job whose env (id or `--env_kwargs`) or run-bound settings differ
    from the run in root_dir.

    Reads only run_info.json and the names of the run's files, so nothing of
    the other run is read or written when it refuses.
    """
    info = read_run_info(root_dir)
    if info is None or not holds_run_data(root_dir):
        return
    found = differences(info, env_name, hparams, env_kwargs)
    if found:
        raise ConfigError(
            f"{root_dir} holds another run: it has " + "; it has ".join(found) + ". "
            "Use a new --root_dir for this run, or pass that run's values to resume it."
        )


def _same_value(value):
    return tuple(value) if isinstance(value, (list, tuple)) else value


def _shown(value) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)
