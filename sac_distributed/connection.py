"""Reverb clients that survive a server restart.

A gRPC channel to a server that went away backs off for a long time before it
reconnects, so after a loss we build fresh `reverb.Client`s (new channels)
once the server answers again. Clients wait up to `connect_timeout_s` each
time (`replay.connect`, with `retry.retry`'s backoff) and then fail with a
clear ServerUnreachableError.
"""

from __future__ import annotations

from typing import Callable, Optional

import reverb
from absl import logging

from sac_distributed import replay
from sac_distributed.config import ClientConfig

# What a Reverb call raises when the server is gone (defined beside `replay.connect`).
TRANSIENT_ERRORS = replay.TRANSIENT_ERRORS

# Recoveries in a row, each without progress in between, before giving up: an
# error that persists while the server answers is a bug, not an outage.
MAX_RECOVERIES_WITHOUT_PROGRESS = 5


class Connection:
    """The replay and variable-container clients of one job."""

    def __init__(self, config: ClientConfig, who: str, should_stop: Callable[[], bool]):
        self._config = config
        self._who = who
        self._should_stop = should_stop
        self.replay: Optional[reverb.Client] = None
        self.variables: Optional[reverb.Client] = None
        self.reconnects = 0
        self._recoveries_without_progress = 0

    def open(self) -> None:
        """Waits (bounded) until both servers answer; builds fresh clients."""
        self.replay = replay.connect(
            self._config.replay_buffer_server_address,
            self._config.connect_timeout_s,
            f"{self._who} needs the replay table",
            self._should_stop,
        )
        self.variables = replay.connect(
            self._config.variable_container_server_address,
            self._config.connect_timeout_s,
            f"{self._who} needs the variable container",
            self._should_stop,
        )

    def recover(self, error: Exception) -> None:
        """Reconnects after `error`; re-raises it if recovering does not help."""
        self._recoveries_without_progress += 1
        if self._recoveries_without_progress > MAX_RECOVERIES_WITHOUT_PROGRESS:
            raise error
        logging.warning(
            "%s lost the Reverb server (%s: %s); reconnecting (waits up to %.0f s).",
            self._who,
            type(error).__name__,
            str(error).splitlines()[0][:200] if str(error) else "",
            self._config.connect_timeout_s,
        )
        self.open()
        self.reconnects += 1
        logging.info("%s reconnected to the Reverb server.", self._who)

    def made_progress(self) -> None:
        """Marks a successful round trip, resetting the give-up counter."""
        self._recoveries_without_progress = 0
