"""One running actor per task index of a run: a flock on collect/actor_<task>/actor.lock.

Two actors with one index would append to one episodes.csv (interleaved rows
and a second header, which the next actor to open it refuses), write one
TensorBoard run and, given --seed, explore alike. An actor takes its index's
lock before it writes anything. With `claim` it takes the lowest index no
running actor holds instead of refusing: that is how replicas that all run one
command (docker compose --scale, a Kubernetes Deployment) get distinct indices.
The kernel drops the lock when its process dies, so a restarted replica claims
an index again without cleanup (not necessarily the one it had; each index's
files stay consistent because only one live actor writes them).
"""

from __future__ import annotations

import os
import socket
from typing import IO, Optional

from sac_distributed import paths
from sac_distributed.errors import RunOwnedError
from sac_distributed.jobs import file_lock


class ActorSlot:
    """The task index this actor runs as, held until `release` (or the process ends)."""

    def __init__(self, task: int, handle: IO[str]):
        self.task = task
        self._handle: Optional[IO[str]] = handle

    @staticmethod
    def take(root_dir: str, task: int, claim: bool) -> ActorSlot:
        """Locks index `task`, or with `claim` the lowest free index from 0.

        Raises RunOwnedError when `task` is held and `claim` is False.
        """
        index = 0 if claim else task
        while True:
            holder = f"pid {os.getpid()} on host {socket.gethostname()}"
            handle = file_lock.try_lock(paths.actor_lock_path(root_dir, index), holder)
            if handle is not None:
                return ActorSlot(index, handle)
            if not claim:
                raise RunOwnedError(_held_message(root_dir, index))
            index += 1

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing releases the flock
            self._handle = None

    def __enter__(self) -> ActorSlot:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _held_message(root_dir: str, task: int) -> str:
    path = paths.actor_lock_path(root_dir, task)
    holder = file_lock.holder_of(path, "an actor that has not named itself yet")
    return (
        f"Another actor ({holder}) runs as task {task} of this root_dir ({path} is "
        "locked). Two actors with one index would write one episodes.csv and one "
        "TensorBoard run. Give this actor another --task, or pass --claim_task to take "
        "the lowest free index."
    )
