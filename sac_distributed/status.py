"""A running job at a glance: replay and variable tables, rates, learner progress.

Everything comes from what already exists: the Reverb server's `server_info`
(table sizes and insert/sample counters of `replay.REPLAY_TABLE` and
`replay.VARIABLE_TABLE`), the variable container (the learner's train_step and
done flag), and optionally the TensorBoard directories under root_dir.

Rates need two reads: `StatusMonitor.poll()` returns the counters of this read
together with the rates since the previous one.

"Actors seen" counts the distinct `collect/actor_<task>` TensorBoard
directories under root_dir, i.e. actor task indices that have ever started on
this root_dir (a filesystem the status tool can read). It is not a live count:
a stopped actor's directory stays, and actors that share a task index (every
replica of docker-compose's `actor` service runs --task=0) share one directory.

This module and `sac-status` import neither Reverb nor TensorFlow at start-up
(the run-dir names come from `paths`), so `sac-status --help` and a mistyped
flag answer at once. Reverb's client, and with it TensorFlow, is imported when
the monitor first connects.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import time
from typing import TYPE_CHECKING, Callable, List, Optional

from sac_distributed import paths
from sac_distributed.errors import ServerUnreachableError, SignatureMismatchError

if TYPE_CHECKING:
    import reverb

ACTOR_DIR_PATTERN = f"{paths.ACTOR_DIR_PREFIX}*"


@dataclasses.dataclass(frozen=True)
class TableCounts:
    """One table's size and cumulative counters, in Reverb items."""

    size: int
    max_size: int
    inserts: int  # completed inserts since the server started (or was restored)
    samples: int  # completed samples since the server started
    transitions_per_item: int = 1  # K: transitions (env steps) per replay item
    name: str = ""  # the table's name on the server


@dataclasses.dataclass(frozen=True)
class ActorDir:
    """One collect/actor_<task> TensorBoard directory."""

    name: str
    seconds_since_write: float  # age of its newest file


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """What one read of the server (and root_dir) shows."""

    read_at: float  # time.monotonic() of the read
    replay: TableCounts
    variables: TableCounts
    train_step: Optional[int]  # None until the learner has pushed weights
    learner_done: Optional[bool]
    actors: Optional[List[ActorDir]]  # None without a root_dir


@dataclasses.dataclass(frozen=True)
class Status:
    """A snapshot and the rates since the previous one (None on the first read)."""

    snapshot: Snapshot
    inserts_per_s: Optional[float] = None  # replay items inserted per second
    samples_per_s: Optional[float] = None  # replay items sampled per second
    train_steps_per_s: Optional[float] = None


def table_counts(info) -> TableCounts:
    """TableCounts from a reverb TableInfo."""
    from sac_distributed import replay  # TensorFlow: only once a server answered

    stats = info.rate_limiter_info
    return TableCounts(
        size=int(info.current_size),
        max_size=int(info.max_size),
        inserts=int(stats.insert_stats.completed),
        samples=int(stats.sample_stats.completed),
        transitions_per_item=replay.transitions_per_item_of(info.signature),
        name=str(info.name),
    )


def actor_dirs(root_dir: str, now: Optional[float] = None) -> List[ActorDir]:
    """The collect/actor_* directories under `root_dir`, sorted by name."""
    now = time.time() if now is None else now
    found = []
    for path in sorted(glob.glob(os.path.join(paths.collect_dir(root_dir), ACTOR_DIR_PATTERN))):
        if not os.path.isdir(path):
            continue
        mtimes = [os.path.getmtime(p) for p in glob.glob(os.path.join(path, "*"))]
        newest = max(mtimes, default=os.path.getmtime(path))
        found.append(ActorDir(os.path.basename(path), max(0.0, now - newest)))
    return found


def read_snapshot(client: reverb.Client, root_dir: Optional[str] = None) -> Snapshot:
    """Reads both tables, the variable container and (if given) root_dir once.

    Raises the client's errors (`connection.TRANSIENT_ERRORS`) when the server
    does not answer.
    """
    from sac_distributed import replay
    from sac_distributed.variables import VariableContainer

    infos = client.server_info(timeout=5)
    missing = {replay.REPLAY_TABLE, replay.VARIABLE_TABLE} - set(infos)
    if missing:
        raise SignatureMismatchError(
            f"The Reverb server has no table(s) {sorted(missing)} (it has {sorted(infos)}); "
            "it is not a sac-reverb-server."
        )
    read_at = time.monotonic()
    pulled = VariableContainer(client).pull(timeout_s=5)
    return Snapshot(
        read_at=read_at,
        replay=table_counts(infos[replay.REPLAY_TABLE]),
        variables=table_counts(infos[replay.VARIABLE_TABLE]),
        train_step=None if pulled is None else pulled.train_step,
        learner_done=None if pulled is None else pulled.learner_done,
        actors=None if root_dir is None else actor_dirs(root_dir),
    )


def compare(previous: Optional[Snapshot], current: Snapshot) -> Status:
    """Rates between two snapshots; none when there is no earlier one or no time passed.

    Counters that went down (the server restarted) give no rates either.
    """
    if previous is None:
        return Status(current)
    elapsed = current.read_at - previous.read_at
    if elapsed <= 0 or current.replay.inserts < previous.replay.inserts:
        return Status(current)

    def rate(now: Optional[int], before: Optional[int]) -> Optional[float]:
        if now is None or before is None or now < before:
            return None
        return (now - before) / elapsed

    return Status(
        snapshot=current,
        inserts_per_s=rate(current.replay.inserts, previous.replay.inserts),
        samples_per_s=rate(current.replay.samples, previous.replay.samples),
        train_steps_per_s=rate(current.train_step, previous.train_step),
    )


class StatusMonitor:
    """Polls one server; reconnects with a fresh client after it was lost."""

    def __init__(
        self,
        address: str,
        connect_timeout_s: float,
        root_dir: Optional[str] = None,
        should_stop: Callable[[], bool] = lambda: False,
    ):
        """Connects at once; raises ServerUnreachableError after `connect_timeout_s`."""
        self._address = address
        self._timeout_s = connect_timeout_s
        self._root_dir = root_dir
        self._should_stop = should_stop
        self._client: Optional[reverb.Client] = self._connect()
        self._previous: Optional[Snapshot] = None

    def _connect(self) -> reverb.Client:
        from sac_distributed import replay  # Reverb and TensorFlow, at the first connection

        return replay.connect(self._address, self._timeout_s, "sac-status", self._should_stop)

    def poll(self) -> Status:
        """Reads the server once; rates are relative to the previous successful read.

        Raises ServerUnreachableError when the server does not answer (after
        waiting up to the connect timeout when it was lost before); the next
        poll tries again with a fresh client.
        """
        from sac_distributed.connection import TRANSIENT_ERRORS

        if self._client is None:
            self._client = self._connect()
            self._previous = None  # counters restart with a new server
        try:
            snapshot = read_snapshot(self._client, self._root_dir)
        except TRANSIENT_ERRORS as error:
            self._client = None  # a lost gRPC channel backs off for long: use a new one
            raise ServerUnreachableError(
                f"Lost the Reverb server at {self._address}: {str(error).splitlines()[0]}"
            ) from error
        status = compare(self._previous, snapshot)
        self._previous = snapshot
        return status


def _fmt_rate(value: Optional[float], unit: str, k: int = 1) -> str:
    """`value` in `unit`; with k > 1 also in transitions (k per item)."""
    if value is None:
        return "n/a"
    return f"{value:.1f} {unit}" + (f" ({k * value:.1f} transitions/s)" if k > 1 else "")


def format_status(status: Status, address: str) -> str:
    """A few human-readable lines describing `status`."""
    s = status.snapshot
    if s.train_step is None:
        learner = "no weights pushed yet (the learner has not started)"
    else:
        state = "done" if s.learner_done else "training"
        learner = f"train_step {s.train_step} ({state}), "
        learner += _fmt_rate(status.train_steps_per_s, "steps/s")
    k = s.replay.transitions_per_item
    items = f"{s.replay.size} / {s.replay.max_size} items"
    if k > 1:
        items += f" of {k} transitions ({k * s.replay.size} transitions)"
    lines = [
        f"Reverb server {address} at {time.strftime('%H:%M:%S')}",
        f"  {s.replay.name}: {items}, {s.replay.inserts} inserted, {s.replay.samples} sampled",
        f"  rates: inserts {_fmt_rate(status.inserts_per_s, 'items/s', k)}, "
        f"samples {_fmt_rate(status.samples_per_s, 'items/s', k)}",
        f"  {s.variables.name}: {s.variables.size} / {s.variables.max_size} items, "
        f"{s.variables.inserts} pushes",
        f"  learner: {learner}",
    ]
    if s.actors is not None:
        seen = "".join(
            f"\n    {a.name}: last write {a.seconds_since_write:.0f} s ago" for a in s.actors
        )
        lines.append(f"  actors seen: {len(s.actors)} (distinct collect/actor_* dirs){seen}")
    return "\n".join(lines)
