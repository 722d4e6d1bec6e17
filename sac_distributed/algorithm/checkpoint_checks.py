"""Checks of a checkpoint that hold for every algorithm, before a learner restores it.

A check raises CheckpointError to refuse a checkpoint whose restore would fail
on every checkpoint alike and read as damage, naming the flag to pass instead;
one that cannot read the checkpoint's index returns, and
`LearnerCheckpoints.restore` then reports the file and falls back. An
algorithm's own checks (SAC's: sac/checkpoint_checks.py) sit beside its learner.
"""

from __future__ import annotations

import tensorflow as tf

from sac_distributed.algorithm import registry
from sac_distributed.errors import CheckpointError


def check_written_by(path: str, algorithm: str) -> None:
    """Refuses a checkpoint written by another registered algorithm's learner (its
    agent under another checkpoint key): restoring it would read as damage."""
    try:
        names = [name for name, _ in tf.train.list_variables(path)]
    except Exception:  # an unreadable index: restore() reports it, then falls back
        return
    mine = registry.get(algorithm)
    if _holds(names, mine.checkpoint_key):
        return
    for other in registry.entries():
        if other.checkpoint_key != mine.checkpoint_key and _holds(names, other.checkpoint_key):
            raise CheckpointError(
                f"The checkpoint {path} was written by the {other.title} learner, and this "
                f"learner runs --algorithm={algorithm}. Pass --algorithm={other.name} to "
                "resume it, or use a new root_dir."
            )


def checkpoint_holds(path: str, attribute: str) -> bool:
    """Whether the checkpoint at `path` holds the tracked object `attribute`
    (e.g. "normalizer": observation statistics; "averaged_actor": an averaged policy)."""
    return _holds([name for name, _ in tf.train.list_variables(path)], attribute)


def _holds(names, attribute: str) -> bool:
    prefix = f"{attribute}/"
    return any(name.startswith(prefix) for name in names)
