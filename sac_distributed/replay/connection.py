"""Reverb clients that survive a server restart.

A gRPC channel to a server that went away backs off for a long time before it
reconnects (its backoff grows while the server is away), and every channel of
a process to one address shares that backoff: a new channel connects at once
only when no channel that asked the dead server is left. So after a loss a job
drops everything that holds a client of the lost server (`release`, the job's
own writers, containers and iterators, and the locals of the failed call's
frames, which the error's traceback keeps), and `connect` asks with a new
client at each attempt. Clients wait up to `connect_timeout_s` each
time (`connect`, with `retry.retry`'s backoff) and then fail with a clear
ServerUnreachableError. `TRANSIENT_ERRORS` is what a Reverb call raises when
the server is gone; every job and tool catches these and nothing else.

A job holds one client per replay shard and one for the variable container
(which lives on one of the shards' servers). A lost shard is marked missing
(`lose_shard`) without touching the other clients, and comes back with
`rejoin_shard` once it answers; `recover` is the full reconnect, for a lost
variable container or when no shard is left.
"""

from __future__ import annotations

import gc
import traceback
from typing import Callable, List, Optional, Sequence

import reverb
from absl import logging

from sac_distributed.config import ClientConfig
from sac_distributed.errors import ServerUnreachableError, StoppedWhileWaitingError
from sac_distributed.retry import retry

# What a Reverb call raises when the server is gone: deadlines from our own
# timeouts, and RuntimeError carrying a gRPC status (UNAVAILABLE, CANCELLED...).
TRANSIENT_ERRORS = (reverb.errors.DeadlineExceededError, RuntimeError)

# Recoveries in a row, each without progress in between, before giving up: an
# error that persists while the server answers is a bug, not an outage.
MAX_RECOVERIES_WITHOUT_PROGRESS = 5
# How long a ping of a possibly dead server waits for an answer.
PING_TIMEOUT_S = 2


def connect(
    address: str,
    timeout_s: float,
    purpose: str,
    should_stop: Callable[[], bool] = lambda: False,
) -> reverb.Client:
    """Returns a client once the server at `address` answers.

    Waits with `retry.retry`'s backoff (capped at 5 s), logging what it waits
    for, and raises ServerUnreachableError after `timeout_s` seconds
    (StoppedWhileWaitingError once `should_stop` holds). Each
    attempt asks with a new client, whose channel has not backed off.
    """
    waited = False
    stopped = False

    def stop_asked() -> bool:
        nonlocal stopped
        stopped = should_stop()
        return stopped

    def attempt(remaining_s: float) -> reverb.Client:
        # A fresh client (channel) per attempt: one that has asked a dead server backs off.
        client = reverb.Client(address)
        client.server_info(timeout=max(1, min(5, int(remaining_s))))
        return client

    def log_wait(error: BaseException, remaining_s: float) -> None:
        nonlocal waited
        waited = True
        logging.info(
            "Waiting for the Reverb server at %s (%s); %.0f s left before giving up "
            "(last attempt: %s: %s).",
            address,
            purpose,
            remaining_s,
            type(error).__name__,
            first_line(error)[:120],
        )

    try:
        client = retry(attempt, TRANSIENT_ERRORS, timeout_s, stop_asked, on_retry=log_wait)
    except TRANSIENT_ERRORS as error:
        if stopped:
            raise StoppedWhileWaitingError(
                f"Stopped while waiting for the Reverb server at {address} ({purpose})."
            ) from error
        last_error = error
    else:
        if waited:
            logging.info("Reverb server at %s is up (%s).", address, purpose)
        return client
    raise ServerUnreachableError(
        f"No Reverb server answered at {address} within {timeout_s:.0f} s ({purpose}). "
        f"Start it first (sac-reverb-server --port {address.rpartition(':')[2]}), check the "
        f"host:port flag, or raise --connect_timeout. Last error: {last_error}"
    )


def open_trajectory_writer(
    client: reverb.Client, num_keep_alive_refs: int, timeout_s: int = 10
) -> reverb.TrajectoryWriter:
    """`client.trajectory_writer`, but an error, not a hang, when the server is gone.

    Reverb's writer first asks the server for its tables without a deadline, which
    never returns once the server is gone (a learner stopping after its server did
    hung there for hours); asking with one first turns that into DeadlineExceededError.
    """
    client.server_info(timeout=timeout_s)
    return client.trajectory_writer(num_keep_alive_refs=num_keep_alive_refs)


class ShardLostError(RuntimeError):
    """A replay shard stopped answering (a RuntimeError, like Reverb's own losses)."""


def ping(address: str, timeout_s: int = PING_TIMEOUT_S) -> bool:
    """True when the Reverb server at `address` answers within `timeout_s`.

    Uses a fresh client: a channel to a dead server backs off for minutes.
    """
    try:
        reverb.Client(address).server_info(timeout=timeout_s)
    except TRANSIENT_ERRORS:
        return False
    return True


class Connection:
    """The replay shards' and the variable container's clients of one job."""

    def __init__(self, config: ClientConfig, who: str, should_stop: Callable[[], bool]):
        self._config = config
        self._who = who
        self._should_stop = should_stop
        self.replay_addresses = config.replay_addresses
        # One client per replay shard, in shard order; None while a shard is lost.
        self.shards: List[Optional[reverb.Client]] = [None] * len(self.replay_addresses)
        self.variables: Optional[reverb.Client] = None
        self.reconnects = 0
        self._recoveries_without_progress = 0

    @property
    def num_shards(self) -> int:
        return len(self.replay_addresses)

    @property
    def replay(self) -> Optional[reverb.Client]:
        """The first live shard's client (the only one with a single server)."""
        return next((client for client in self.shards if client is not None), None)

    def live_shards(self) -> List[int]:
        """Indices of the shards with a client, in shard order."""
        return [i for i, client in enumerate(self.shards) if client is not None]

    def missing_shards(self) -> List[int]:
        return [i for i, client in enumerate(self.shards) if client is None]

    def live_clients(self) -> Sequence[reverb.Client]:
        return [client for client in self.shards if client is not None]

    def open(self) -> None:
        """Waits (bounded) until every server answers; builds fresh clients."""
        self.shards = [
            connect(
                address,
                self._config.connect_timeout_s,
                f"{self._who} needs the replay table" + self._shard_words(i),
                self._should_stop,
            )
            for i, address in enumerate(self.replay_addresses)
        ]
        self.open_variables()

    def open_variables(self) -> None:
        """Waits (bounded) until the variable container answers; a fresh client."""
        self.variables = connect(
            self._config.variable_container_server_address,
            self._config.connect_timeout_s,
            f"{self._who} needs the variable container",
            self._should_stop,
        )

    def _shard_words(self, shard: int) -> str:
        return f" (shard {shard} of {self.num_shards})" if self.num_shards > 1 else ""

    def shard_answers(self, shard: int) -> bool:
        return ping(self.replay_addresses[shard])

    def variables_answer(self) -> bool:
        return ping(self._config.variable_container_server_address)

    def lose_shard(self, shard: int, error: Exception) -> None:
        """Marks `shard` missing (its client is dropped); the others stay as they are."""
        self.shards[shard] = None
        logging.warning(
            "%s lost replay shard %d at %s (%s); carrying on with shards %s.",
            self._who,
            shard,
            self.replay_addresses[shard],
            first_line(error),
            self.live_shards(),
        )

    def rejoin_shard(self, shard: int) -> bool:
        """A fresh client for `shard` if it answers now (one short ping); False if not."""
        if not self.shard_answers(shard):
            return False
        was_missing = self.shards[shard] is None
        self.shards[shard] = reverb.Client(self.replay_addresses[shard])
        if not was_missing:
            return True
        logging.info(
            "%s: replay shard %d at %s answers again; using it.",
            self._who,
            shard,
            self.replay_addresses[shard],
        )
        return True

    def release(self) -> None:
        """Drops every client, so that none of their channels slows the new ones.

        The job drops its own holders of these clients (writers, variable
        containers, dataset iterators) first; see the module doc.
        """
        self.shards = [None] * len(self.replay_addresses)
        self.variables = None
        gc.collect()  # clients held in reference cycles (traced functions) go now

    def recover(self, error: Exception) -> None:
        """Reconnects everything after `error`; re-raises it if recovering does not help."""
        self._count_recovery(error)
        _drop_frames(error)
        self.release()
        self.open()
        self.reconnects += 1
        logging.info("%s reconnected to the Reverb server.", self._who)

    def recover_variables(self, error: Exception) -> None:
        """Reconnects only the variable container (the replay shards keep their clients)."""
        self._count_recovery(error)
        _drop_frames(error)
        self.variables = None
        gc.collect()
        self.open_variables()
        self.reconnects += 1
        logging.info("%s reconnected to the variable container.", self._who)

    def _count_recovery(self, error: Exception) -> None:
        self._recoveries_without_progress += 1
        if self._recoveries_without_progress > MAX_RECOVERIES_WITHOUT_PROGRESS:
            raise error
        logging.warning(
            "%s lost the Reverb server (%s: %s); reconnecting (waits up to %.0f s).",
            self._who,
            type(error).__name__,
            first_line(error),
            self._config.connect_timeout_s,
        )

    def made_progress(self) -> None:
        """Marks a successful round trip, resetting the give-up counter."""
        self._recoveries_without_progress = 0


def _drop_frames(error: Optional[BaseException]) -> None:
    """The frames `error` came through hold the old clients (and writers, iterators)
    as locals for as long as the error lives: drops those locals, along the chain of
    errors it was raised from (the watchdog's ServerLostError comes from the failed
    ping, whose frames hold the pinging client; any live client keeps gRPC's shared
    subchannel to that address, and its reconnect backoff, alive)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        traceback.clear_frames(error.__traceback__)
        error = error.__cause__ or error.__context__


def first_line(error: Exception) -> str:
    """An error's first line (at most 200 characters), or its type's name if it has no text."""
    return str(error).splitlines()[0][:200] if str(error) else type(error).__name__
