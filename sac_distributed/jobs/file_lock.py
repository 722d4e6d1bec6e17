"""An exclusive, non-blocking flock on a file that names its holder.

The servers (one per replay shard) and the actors (one per task index) each hold
one while they run; the kernel drops it when the process dies, so a restarted job
needs no cleanup.
"""

from __future__ import annotations

import fcntl
import os
from typing import IO, Optional


def try_lock(path: str, holder: str) -> Optional[IO[str]]:
    """The open file at `path`, locked and holding the line `holder`; None if another
    process holds it. Closing the file releases the lock."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    handle = open(path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    handle.truncate(0)
    handle.write(f"{holder}\n")
    handle.flush()
    return handle


def holder_of(path: str, unnamed: str) -> str:
    """What the holder of `path`'s lock wrote, or `unnamed` when it wrote nothing yet."""
    try:
        with open(path) as f:
            return f.read().strip() or unnamed
    except OSError:
        return unnamed
