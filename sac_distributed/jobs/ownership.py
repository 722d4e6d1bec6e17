"""One learner per run: a lock file in root_dir and a lease granted by the server.

Two learners on one run would both train from the same checkpoint, overwrite
each other's checkpoints and exports, and both push weights. Two guards stop
the second one at start-up:

* `RootDirLock`: an exclusive flock on root_dir/learner.lock, for learners that
  share the filesystem. The kernel releases it when its process dies, so a
  learner restarted after a crash takes it over without cleanup; the file
  names the owner (host, pid, since when) for the refusal message.
* The lease: the server (`LeaseArbiter`, run by the server loop) grants the run
  to the first learner that claims it and records the owner in OWNER_TABLE;
  the owner renews it every HEARTBEAT_INTERVAL_S through CLAIMS_TABLE. This
  works where learners share nothing but the server. A claim while the owner
  is heard from is refused; an owner silent for LEASE_TIMEOUT_S loses the run
  to the next claimant, and a claim naming the owner's token (from the lock
  file of a dead learner on the same host) takes over at once. A learner that
  finds another token in OWNER_TABLE stops before it writes or publishes.
"""

from __future__ import annotations

import dataclasses
import datetime
import fcntl
import json
import os
import secrets
import socket
import threading
import time
from typing import Callable, List, Optional

import numpy as np
import reverb
import tensorflow as tf
from absl import logging

from sac_distributed import paths
from sac_distributed.errors import RunOwnedError
from sac_distributed.replay import latest_value_table, open_trajectory_writer

CLAIMS_TABLE = "learner_claims"
OWNER_TABLE = "learner_owner"
HEARTBEAT_INTERVAL_S = 5.0
# How long one beat waits for a server that may be gone before it gives up until the next.
BEAT_TIMEOUT_S = 2
LEASE_TIMEOUT_S = 60.0
# An owner heard from this recently is alive: a second learner is refused at
# once instead of waiting for the lease to expire.
ALIVE_WITHIN_S = 4 * HEARTBEAT_INTERVAL_S
_HOST_BYTES = 64
_FIELDS = 5  # token, pid, started (unix s), previous token, seconds since heard
_ROW = "row"
_CLIENT_ERRORS = (reverb.errors.DeadlineExceededError, RuntimeError)
_RELEASE = -1  # previous_token of a claim that gives the run back (a clean stop)


@dataclasses.dataclass(frozen=True)
class Claim:
    """Who a learner is; also what the server records for the owner."""

    token: int
    host: str
    pid: int
    started: int  # unix seconds
    previous_token: int = 0  # the dead owner this claim takes over from, if known
    silent_s: int = 0  # in OWNER_TABLE: seconds since the server last heard the owner

    @staticmethod
    def mine(previous_token: int = 0) -> Claim:
        return Claim(
            token=secrets.randbits(62) + 1,
            host=socket.gethostname(),
            pid=os.getpid(),
            started=int(time.time()),
            previous_token=previous_token,
        )

    def describe(self) -> str:
        since = datetime.datetime.fromtimestamp(self.started).strftime("%Y-%m-%d %H:%M:%S")
        return f"pid {self.pid} on host {self.host}, since {since}"

    def pack(self) -> np.ndarray:
        host = np.zeros(_HOST_BYTES, np.int64)
        encoded = self.host.encode()[:_HOST_BYTES]
        host[: len(encoded)] = np.frombuffer(encoded, np.uint8)
        fields = [self.token, self.pid, self.started, self.previous_token, self.silent_s]
        return np.concatenate([np.array(fields, np.int64), host])

    @staticmethod
    def unpack(row: np.ndarray) -> Claim:
        row = np.asarray(row, np.int64)
        host = bytes(row[_FIELDS:].astype(np.uint8)).rstrip(b"\0").decode(errors="replace")
        token, pid, started, previous, silent = (int(x) for x in row[:_FIELDS])
        return Claim(token, host, pid, started, previous, silent)


def make_tables() -> List[reverb.Table]:
    """The claims queue (learners -> server) and the owner record (server -> learners)."""
    signature = {_ROW: tf.TensorSpec([_FIELDS + _HOST_BYTES], tf.int64)}
    claims = reverb.Table.queue(CLAIMS_TABLE, max_size=1_000, signature=signature)
    owner = latest_value_table(OWNER_TABLE, signature)
    return [claims, owner]


def _write(client: reverb.Client, table: str, claim: Claim) -> None:
    with open_trajectory_writer(client, num_keep_alive_refs=1) as writer:
        writer.append({_ROW: claim.pack()})
        writer.create_item(table, 1.0, {_ROW: writer.history[_ROW][-1]})
        writer.flush(timeout_ms=10_000)


def read_owner(client: reverb.Client) -> Optional[Claim]:
    """The owner the server recorded, or None before it granted the run."""
    if client.server_info(timeout=10)[OWNER_TABLE].current_size == 0:
        return None
    sample = next(client.sample(OWNER_TABLE, 1, emit_timesteps=False))
    owner = Claim.unpack(sample.data[0])
    return owner if owner.token else None  # token 0: released


def has_lease_tables(client: reverb.Client) -> bool:
    tables = client.server_info(timeout=10)
    return CLAIMS_TABLE in tables and OWNER_TABLE in tables


class LeaseArbiter:
    """Server side: grants the run to one learner at a time (see the module doc)."""

    def __init__(self, client: reverb.Client, timeout_s: float = LEASE_TIMEOUT_S):
        self._client = client
        self._timeout_s = timeout_s
        # A restored owner gets a full timeout to reconnect to the new server,
        # but counts as alive only once heard from.
        self._owner = read_owner(client)
        self._last_heard = time.monotonic()
        self._heard = False

    def tick(self) -> None:
        """Handles the claims that arrived; rewrites the owner record."""
        for claim in self._take_claims():
            self._handle(claim, time.monotonic())
        if self._owner is not None:
            silent = int(time.monotonic() - self._last_heard)
            if not self._heard:
                silent = max(silent, int(ALIVE_WITHIN_S))
            _write(self._client, OWNER_TABLE, dataclasses.replace(self._owner, silent_s=silent))

    def _take_claims(self) -> List[Claim]:
        waiting = self._client.server_info(timeout=10)[CLAIMS_TABLE].current_size
        if not waiting:
            return []
        samples = self._client.sample(CLAIMS_TABLE, waiting, emit_timesteps=False)
        return [Claim.unpack(s.data[0]) for s in samples]

    def _handle(self, claim: Claim, now: float) -> None:
        owner = self._owner
        if owner is not None and claim.token == owner.token:
            if claim.previous_token == _RELEASE:
                logging.info("Learner %s gave the run back.", owner.describe())
                self._owner = None
                _write(self._client, OWNER_TABLE, Claim(0, "", 0, 0))
                return
            self._last_heard, self._heard = now, True  # the owner's heartbeat
            return
        if claim.previous_token == _RELEASE:
            return  # a release from a learner that no longer owns the run
        silent = now - self._last_heard
        if owner is None:
            logging.info("Learner %s owns the run.", claim.describe())
        elif claim.previous_token == owner.token:
            logging.info(
                "Learner %s takes over from %s (gone).", claim.describe(), owner.describe()
            )
        elif silent > self._timeout_s:
            logging.warning(
                "Learner %s owns the run: %s was silent for %.0f s.",
                claim.describe(),
                owner.describe(),
                silent,
            )
        else:
            return  # refused: the claimant reads the owner record and says why
        self._owner = dataclasses.replace(claim, previous_token=0)
        self._last_heard, self._heard = now, True
        _write(self._client, OWNER_TABLE, self._owner)


class Lease:
    """Learner side: claims the run, renews it, and tells when it was lost."""

    def __init__(self, address: str, me: Claim):
        self._address = address
        self._me = me
        self._lost_to: Optional[Claim] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def acquire(self, should_stop: Callable[[], bool]) -> bool:
        """Blocks until the server grants the run; False if stopped first.

        Raises RunOwnedError when a live learner owns it.
        """
        client: Optional[reverb.Client] = None
        deadline = time.monotonic() + LEASE_TIMEOUT_S + 60
        next_claim = 0.0
        while not should_stop():
            failed = False
            try:
                if client is None:
                    client = reverb.Client(self._address)
                    client.server_info(timeout=BEAT_TIMEOUT_S)
                if time.monotonic() >= next_claim:
                    _write(client, CLAIMS_TABLE, self._me)
                    next_claim = time.monotonic() + HEARTBEAT_INTERVAL_S
                owner = read_owner(client)
            except _CLIENT_ERRORS as error:  # the server is busy or restarting: try again
                # The text, not the error: a log record kept (by a handler) would keep the
                # error's frames, and their client, alive.
                logging.warning("Claiming the run's lease failed (%s); retrying.", str(error))
                if time.monotonic() > deadline:
                    raise
                client = None  # no client kept while the server is away (see _renew)
                failed = True
            if failed:  # out of the handler: the error's frames, holding the client, are gone
                time.sleep(1.0)
                continue
            if owner is not None and owner.token == self._me.token:
                self._start_heartbeat()
                return True
            taking_over = owner is not None and owner.token == self._me.previous_token
            if owner is not None and owner.silent_s < ALIVE_WITHIN_S and not taking_over:
                raise RunOwnedError(_owned_message(owner, "the Reverb server's lease"))
            if time.monotonic() > deadline:
                raise RunOwnedError(
                    f"The Reverb server at {self._address} did not grant this learner the run "
                    f"within {LEASE_TIMEOUT_S + 60:.0f} s (owner: "
                    f"{owner.describe() if owner else 'none recorded'}). Is it a sac-reverb-server "
                    "of this version?"
                )
            if owner is not None:
                logging.log_every_n_seconds(
                    logging.INFO,
                    "Waiting for the run's lease: its owner %s was last heard %d s ago; the "
                    "server hands the run over after %.0f s of silence.",
                    10,
                    owner.describe(),
                    owner.silent_s,
                    LEASE_TIMEOUT_S,
                )
            time.sleep(0.5)
        return False

    def _start_heartbeat(self) -> None:
        self._thread = threading.Thread(target=self._beat, daemon=True, name="learner-lease")
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_INTERVAL_S):
            try:
                owner = self._renew()
            except _CLIENT_ERRORS:
                continue  # the server is away: retry at the next beat
            if owner is not None and owner.token != self._me.token:
                self._lost_to = owner
                return

    def _renew(self) -> Optional[Claim]:
        """One beat with a client of its own, gone when the beat ends.

        gRPC shares one subchannel among all of a process's channels to an address and
        keeps it while any of them lives; a client kept (or replaced before the old one
        went) from beat to beat kept it through a whole server outage, its reconnect
        backoff growing past 16 s, and the learner's reconnect waited that out although
        the new server answered everyone else (benchmarks/results/chaos/heartbeat_client/).
        Between beats this thread now holds none, and a dead server costs a beat at most
        BEAT_TIMEOUT_S. (A server killed inside `read_owner`'s sample, which Reverb gives
        no deadline, still holds this beat until the server is back: a window of about a
        millisecond per beat.)
        """
        client = reverb.Client(self._address)
        client.server_info(timeout=BEAT_TIMEOUT_S)
        _write(client, CLAIMS_TABLE, self._me)
        return read_owner(client)

    def check(self) -> None:
        """Raises RunOwnedError once another learner was granted the run."""
        if self._lost_to is not None:
            raise RunOwnedError(
                f"This learner lost the run to the learner {self._lost_to.describe()}: the "
                f"server did not hear from this one for {LEASE_TIMEOUT_S:.0f} s. It stops "
                "without writing or publishing anything more."
            )

    def release(self) -> None:
        """Stops renewing and gives the run back (best effort: the server may be gone)."""
        self._stop.set()
        if self._thread is None or self._lost_to is not None:
            return
        self._thread.join(timeout=HEARTBEAT_INTERVAL_S + 10)
        try:
            client = reverb.Client(self._address)
            _write(client, CLAIMS_TABLE, dataclasses.replace(self._me, previous_token=_RELEASE))
        except _CLIENT_ERRORS as error:
            logging.warning("Could not give the run's lease back (%s); it expires.", error)


def _owned_message(owner: Claim, where: str) -> str:
    return (
        f"Another learner owns this run: {owner.describe()} ({where}). Two learners on one "
        "run would overwrite each other's checkpoints and weights. Stop that learner first, "
        "or give this one another --root_dir and server."
    )


class RootDirLock:
    """An exclusive flock on root_dir/learner.lock, naming its owner inside."""

    def __init__(self, root_dir: str, me: Claim):
        self._path = paths.lock_path(root_dir)
        self._me = me
        self._file = None
        self.previous: Optional[Claim] = None  # a dead owner found in the file

    def acquire(self) -> None:
        """Takes the lock or raises RunOwnedError naming the learner that holds it."""
        handle = open(self._path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _read_lock(self._path)
            handle.close()
            who = owner.describe() if owner else "a learner that has not written its name yet"
            raise RunOwnedError(
                f"Another learner owns this run: {who} (lock file {self._path}). Two learners "
                "on one run would overwrite each other's checkpoints and weights. Stop that "
                "learner first, or give this one another --root_dir."
            ) from None
        self.previous = _read_lock(self._path)
        if self.previous is not None:
            logging.warning(
                "Took over the run from learner %s, which is gone (its lock was released).",
                self.previous.describe(),
            )
        handle.seek(0)
        handle.truncate()
        json.dump(dataclasses.asdict(self._me), handle)
        handle.flush()
        self._file = handle

    def release(self) -> None:
        """Empties the file (a clean stop leaves no owner to take over from) and unlocks."""
        if self._file is not None:
            self._file.seek(0)
            self._file.truncate()
            self._file.close()  # closing releases the flock
            self._file = None


def _read_lock(path: str) -> Optional[Claim]:
    try:
        with open(path) as f:
            return Claim(**json.load(f))
    except (OSError, ValueError, TypeError):
        return None
