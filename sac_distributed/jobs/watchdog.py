"""The learner's watchdog: training calls off the main thread, the replay server watched.

A Reverb dataset whose server died blocks forever and cannot be interrupted,
so `Watchdog.call` runs each call in a daemon thread while the main thread
pings the shards the iterator reads; a lost server, or an already traced call
that takes no replay sample for STALL_TIMEOUT_S, raises ServerLostError and
leaves that call behind.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, Optional, Sequence

import reverb

from sac_distributed.replay import REPLAY_TABLE
from sac_distributed.replay.connection import TRANSIENT_ERRORS

# While a training call runs, the replay server is pinged this often.
HEALTH_CHECK_INTERVAL_S = 5.0
HEALTH_CHECK_TIMEOUT_S = 5
# A call of an already traced function during which the replay table's sample count
# does not move for this long is stuck on a stream to a server that restarted between
# two health checks. A call may run longer than this when it makes progress: the
# learner waits on the rate limiter for slow actors (a rendered env on busy CPUs),
# and every batch it takes moves the count.
STALL_TIMEOUT_S = 120.0


class ServerLostError(ConnectionError):
    """The replay server stopped answering while a training call was running."""

    def __init__(self, message: str, address: Optional[str] = None):
        super().__init__(message)
        self.address = address  # the server that stopped answering, if known


class Watchdog:
    """Runs learner calls off the main thread while watching the replay server.

    A Reverb dataset whose server died blocks forever and cannot be
    interrupted, so each call runs in a daemon thread while the main thread
    pings the server; if the server stops answering, or an already traced
    call stalls, ServerLostError leaves that call behind (it holds only its
    own iterator) and the loop recovers with new functions and iterator.
    """

    def __init__(self, addresses: Sequence[str]):
        self.addresses = tuple(addresses)  # the replay shards the current iterator reads
        self._traced: set = set()  # names of functions that completed a call

    def forget_traces(self) -> None:
        """The next call of each function traces anew (tracing may take long)."""
        self._traced.clear()

    def call(self, name: str, fn: Callable, *args):
        """`fn(*args)`, guarded; `name` tells whether `fn` has traced yet."""
        result: dict = {}
        finished = threading.Event()

        def target() -> None:
            try:
                result["value"] = fn(*args)
            except BaseException as error:  # handed to the main thread below
                result["error"] = error
            finally:
                finished.set()

        threading.Thread(target=target, daemon=True, name="learner-call").start()
        started = time.monotonic()
        next_check = started + HEALTH_CHECK_INTERVAL_S
        traced = name in self._traced
        progress = _Progress(started)
        while not finished.wait(0.25):
            now = time.monotonic()
            if now >= next_check:
                progress.saw(self._check_server(), now)
                next_check = now + HEALTH_CHECK_INTERVAL_S
            if traced and now - progress.last > STALL_TIMEOUT_S:
                raise ServerLostError(
                    f"a training call took no replay sample for {STALL_TIMEOUT_S:.0f} s "
                    "although the server answers (it probably restarted)"
                )
        if "error" in result:
            raise result["error"]
        self._traced.add(name)
        return result["value"]

    def _check_server(self) -> Dict[str, int]:
        """Pings every shard; returns each one's replay sample count."""
        counts: Dict[str, int] = {}
        for address in self.addresses:
            try:
                # A fresh client: a channel to a dead server backs off for minutes.
                tables = reverb.Client(address).server_info(timeout=HEALTH_CHECK_TIMEOUT_S)
            except TRANSIENT_ERRORS as error:
                raise ServerLostError(
                    f"the Reverb server at {address} stopped answering during training ({error})",
                    address,
                ) from error
            info = tables.get(REPLAY_TABLE)
            if info is not None:
                counts[address] = int(info.rate_limiter_info.sample_stats.completed)
        return counts


class _Progress:
    """When a call last took replay samples: the time its shards' sample counts last
    rose (a count that falls is a restarted server, and only sets the baseline)."""

    def __init__(self, started: float):
        self.last = started
        self._counts: Dict[str, int] = {}

    def saw(self, counts: Dict[str, int], now: float) -> None:
        if any(count > self._counts.get(address, count) for address, count in counts.items()):
            self.last = now
        self._counts = counts
