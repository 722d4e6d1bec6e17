"""A running job at a glance: replay and variable tables, rates, learner progress.

Everything comes from what already exists: the Reverb server's `server_info`
(table sizes and insert/sample counters of `replay.REPLAY_TABLE` and
`replay.VARIABLE_TABLE`), the variable container (the learner's train_step and
done flag), and optionally the TensorBoard directories under root_dir.

Rates need two reads: `StatusMonitor.poll()` returns the counters of this read
together with the rates since the previous one.

Replay shards: given several servers (comma-separated, in shard order, as the
clients' --replay_buffer_server_address), every shard is read on its own and
shown with its size, counters and rates, and the replay line shows their sums.
A shard that does not answer is shown DOWN and tried again at the next read;
only when no shard answers is the status an error. The variable container
(the learner's progress) is read from the first shard.

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
from concurrent import futures
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Tuple

from sac_distributed import paths
from sac_distributed.errors import ServerUnreachableError, SignatureMismatchError

if TYPE_CHECKING:
    import reverb

ACTOR_DIR_PATTERN = f"{paths.ACTOR_DIR_PREFIX}*"
_NOT_CONNECTED = "not connected"


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
class ShardCounts:
    """One replay shard (one Reverb server) as one read saw it."""

    address: str
    replay: Optional[TableCounts]  # None: the server did not answer (down)
    error: str = ""  # why it is down

    @property
    def up(self) -> bool:
        return self.replay is not None


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """What one read of the servers (and root_dir) shows."""

    read_at: float  # time.monotonic() of the read
    replay: TableCounts  # summed over the shards that answered
    variables: Optional[TableCounts]  # None: the variable container's server is down
    train_step: Optional[int]  # None until the learner has pushed weights
    learner_done: Optional[bool]
    actors: Optional[List[ActorDir]]  # None without a root_dir
    shards: Tuple[ShardCounts, ...] = ()  # every replay shard, in shard order


@dataclasses.dataclass(frozen=True)
class ShardRates:
    """One shard's rates since the previous read (None: no earlier read of it, or it restarted)."""

    inserts_per_s: Optional[float] = None
    samples_per_s: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class Status:
    """A snapshot and the rates since the previous one (None on the first read)."""

    snapshot: Snapshot
    inserts_per_s: Optional[float] = None  # replay items inserted per second, all shards
    samples_per_s: Optional[float] = None  # replay items sampled per second, all shards
    train_steps_per_s: Optional[float] = None
    shard_rates: Tuple[ShardRates, ...] = ()  # per shard, in shard order


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


def read_shard(client: Optional[reverb.Client], address: str) -> ShardCounts:
    """One shard's replay table; DOWN (with the reason) when it does not answer.

    Raises SignatureMismatchError when the server answers without a replay table.
    """
    from sac_distributed import replay
    from sac_distributed.replay.connection import TRANSIENT_ERRORS

    if client is None:
        return ShardCounts(address, None, _NOT_CONNECTED)
    try:
        infos = client.server_info(timeout=5)
    except TRANSIENT_ERRORS as error:
        return ShardCounts(address, None, _first_line(error))
    _require_tables(infos, (replay.REPLAY_TABLE,), address)
    return ShardCounts(address, table_counts(infos[replay.REPLAY_TABLE]))


def read_shards(addresses: Sequence[str]) -> List[ShardCounts]:
    """Each shard's replay table once, with a fresh client each (DOWN when it does not answer)."""
    import reverb

    return _in_parallel(lambda a: read_shard(reverb.Client(a), a), addresses)


def read_snapshot(
    clients: Sequence[Optional[reverb.Client]],
    addresses: Sequence[str],
    root_dir: Optional[str] = None,
) -> Snapshot:
    """Reads every shard's replay table, the variable container (on the first
    shard) and, if given, root_dir once.

    A shard that does not answer (or has no client) is shown DOWN; the
    variable container is None when the first shard is down.
    """
    from sac_distributed import replay

    read_at = time.monotonic()
    shards = _in_parallel(lambda pair: read_shard(*pair), list(zip(clients, addresses)))
    variables, pulled = None, None
    if shards[0].up:
        variables, pulled = _read_variables(clients[0], addresses[0])
        if variables is None:
            shards[0] = ShardCounts(addresses[0], None, "the variable container did not answer")
    up = [s.replay for s in shards if s.up]
    total = TableCounts(
        size=sum(r.size for r in up),
        max_size=sum(r.max_size for r in up),
        inserts=sum(r.inserts for r in up),
        samples=sum(r.samples for r in up),
        transitions_per_item=up[0].transitions_per_item if up else 1,
        name=up[0].name if up else replay.REPLAY_TABLE,
    )
    return Snapshot(
        read_at=read_at,
        replay=total,
        variables=variables,
        train_step=None if pulled is None else pulled.train_step,
        learner_done=None if pulled is None else pulled.learner_done,
        actors=None if root_dir is None else actor_dirs(root_dir),
        shards=tuple(shards),
    )


def _read_variables(client: reverb.Client, address: str):
    """(variable table counts, the latest pushed snapshot or None); (None, None) if down."""
    from sac_distributed import replay
    from sac_distributed.replay.connection import TRANSIENT_ERRORS
    from sac_distributed.replay.variables import VariableContainer

    try:
        infos = client.server_info(timeout=5)
        _require_tables(infos, (replay.VARIABLE_TABLE,), address)
        return table_counts(infos[replay.VARIABLE_TABLE]), VariableContainer(client).pull(5)
    except TRANSIENT_ERRORS:
        return None, None


def _require_tables(infos, tables: Sequence[str], address: str) -> None:
    missing = set(tables) - set(infos)
    if missing:
        raise SignatureMismatchError(
            f"The Reverb server at {address} has no table(s) {sorted(missing)} (it has "
            f"{sorted(infos)}); it is not a sac-reverb-server."
        )


def _in_parallel(read: Callable, items: Sequence) -> list:
    """`read(item)` for every item, at the same time (a DOWN shard waits out its timeout)."""
    if len(items) == 1:
        return [read(items[0])]
    with futures.ThreadPoolExecutor(max_workers=len(items)) as pool:
        return list(pool.map(read, items))


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def compare(previous: Optional[Snapshot], current: Snapshot) -> Status:
    """Rates between two snapshots; none when there is no earlier one or no time passed.

    Each shard gets rates when it answered both reads and its counters did not
    go down (a restarted server); the totals are the sums of the shards' rates
    that exist.
    """
    if previous is None or len(previous.shards) != len(current.shards):
        return Status(current)
    elapsed = current.read_at - previous.read_at
    if elapsed <= 0:
        return Status(current)
    rates = tuple(_shard_rates(b, a, elapsed) for b, a in zip(previous.shards, current.shards))
    train_rate = None
    if current.train_step is not None and previous.train_step is not None:
        if current.train_step >= previous.train_step:
            train_rate = (current.train_step - previous.train_step) / elapsed
    return Status(
        snapshot=current,
        inserts_per_s=_sum([r.inserts_per_s for r in rates]),
        samples_per_s=_sum([r.samples_per_s for r in rates]),
        train_steps_per_s=train_rate,
        shard_rates=rates,
    )


def _shard_rates(before: ShardCounts, now: ShardCounts, elapsed: float) -> ShardRates:
    if before.replay is None or now.replay is None:
        return ShardRates()
    b, n = before.replay, now.replay
    if n.inserts < b.inserts or n.samples < b.samples:  # the server restarted
        return ShardRates()
    return ShardRates((n.inserts - b.inserts) / elapsed, (n.samples - b.samples) / elapsed)


def _sum(values: Sequence[Optional[float]]) -> Optional[float]:
    given = [v for v in values if v is not None]
    return sum(given) if given else None


class StatusMonitor:
    """Polls the replay shards' servers; reconnects with a fresh client to one that was lost."""

    def __init__(
        self,
        address: str,
        connect_timeout_s: float,
        root_dir: Optional[str] = None,
        should_stop: Callable[[], bool] = lambda: False,
    ):
        """Connects at once to every shard of `address` (host:port, or several,
        comma-separated, in shard order; the first holds the variable container).

        Raises ServerUnreachableError when none answers within `connect_timeout_s`;
        those that do not answer are shown DOWN and tried again at each poll.
        """
        self._addresses = tuple(a.strip() for a in address.split(","))
        self._timeout_s = connect_timeout_s
        self._root_dir = root_dir
        self._should_stop = should_stop
        self._clients: List[Optional[reverb.Client]] = [None] * len(self._addresses)
        self._previous: Optional[Snapshot] = None
        errors = self._connect_missing()
        if not any(self._clients):
            raise ServerUnreachableError(" ".join(errors))

    @property
    def addresses(self) -> Tuple[str, ...]:
        return self._addresses

    def _connect_missing(self) -> List[str]:
        """Connects the shards without a client, in parallel; returns why some failed."""
        from sac_distributed import replay

        def connect(index: int) -> str:
            try:
                self._clients[index] = replay.connect(
                    self._addresses[index], self._timeout_s, "sac-status", self._should_stop
                )
            except ServerUnreachableError as error:
                return str(error)
            return ""

        missing = [i for i, client in enumerate(self._clients) if client is None]
        return [e for e in _in_parallel(connect, missing) if e] if missing else []

    def poll(self) -> Status:
        """Reads every shard once; rates are relative to the previous read.

        Raises ServerUnreachableError when no shard answers (after waiting up to
        the connect timeout for those lost before); the next poll tries again
        with fresh clients.
        """
        if not any(self._clients):
            errors = self._connect_missing()
            if not any(self._clients):
                raise ServerUnreachableError(" ".join(errors))
        else:
            self._connect_missing()
        snapshot = read_snapshot(self._clients, self._addresses, self._root_dir)
        unanswered = f"no answer within {self._timeout_s:g} s"
        shards = tuple(
            dataclasses.replace(s, error=unanswered) if s.error == _NOT_CONNECTED else s
            for s in snapshot.shards
        )
        snapshot = dataclasses.replace(snapshot, shards=shards)
        for index, shard in enumerate(snapshot.shards):
            if not shard.up:
                self._clients[index] = None  # a lost gRPC channel backs off for long: use a new one
        if not any(s.up for s in snapshot.shards):
            self._previous = None  # counters restart with new servers
            lost = "; ".join(f"{s.address}: {s.error}" for s in snapshot.shards)
            raise ServerUnreachableError(f"Lost the Reverb server(s) {lost}")
        status = compare(self._previous, snapshot)
        self._previous = snapshot
        return status


def _fmt_rate(value: Optional[float], unit: str, k: int = 1) -> str:
    """`value` in `unit`; with k > 1 also in transitions (k per item)."""
    if value is None:
        return "n/a"
    return f"{value:.1f} {unit}" + (f" ({k * value:.1f} transitions/s)" if k > 1 else "")


def format_status(status: Status, address: str) -> str:
    """A few human-readable lines describing `status` (one more per shard when sharded)."""
    s = status.snapshot
    k = s.replay.transitions_per_item
    items = f"{s.replay.size} / {s.replay.max_size} items"
    if k > 1:
        items += f" of {k} transitions ({k * s.replay.size} transitions)"
    lines = [
        _header(s, address),
        f"  {s.replay.name}: {items}, {s.replay.inserts} inserted, {s.replay.samples} sampled",
        f"  rates: inserts {_fmt_rate(status.inserts_per_s, 'items/s', k)}, "
        f"samples {_fmt_rate(status.samples_per_s, 'items/s', k)}",
    ]
    if len(s.shards) > 1:
        lines[1] = lines[1].replace(":", f" (total of {_up_count(s)} shards up):", 1)
        lines += _shard_lines(status)
    if s.variables is None:
        lines.append("  variable container: DOWN (its server, the first shard, does not answer)")
    else:
        lines.append(
            f"  {s.variables.name}: {s.variables.size} / {s.variables.max_size} items, "
            f"{s.variables.inserts} pushes"
        )
    lines.append(f"  learner: {_learner_line(status)}")
    if s.actors is not None:
        seen = "".join(
            f"\n    {a.name}: last write {a.seconds_since_write:.0f} s ago" for a in s.actors
        )
        lines.append(f"  actors seen: {len(s.actors)} (distinct collect/actor_* dirs){seen}")
    return "\n".join(lines)


def _header(s: Snapshot, address: str) -> str:
    now = time.strftime("%H:%M:%S")
    if len(s.shards) <= 1:
        return f"Reverb server {address} at {now}"
    return f"Reverb servers {address} ({len(s.shards)} replay shards, {_up_count(s)} up) at {now}"


def _up_count(s: Snapshot) -> int:
    return sum(1 for shard in s.shards if shard.up)


def _shard_lines(status: Status) -> List[str]:
    lines = []
    rates = status.shard_rates or (ShardRates(),) * len(status.snapshot.shards)
    for index, (shard, rate) in enumerate(zip(status.snapshot.shards, rates)):
        if shard.replay is None:
            lines.append(f"  shard {index} {shard.address}: DOWN ({shard.error})")
            continue
        r, k = shard.replay, shard.replay.transitions_per_item
        lines.append(
            f"  shard {index} {shard.address}: up, {r.size} / {r.max_size} items, "
            f"{r.inserts} inserted, {r.samples} sampled, inserts "
            f"{_fmt_rate(rate.inserts_per_s, 'items/s', k)}, samples "
            f"{_fmt_rate(rate.samples_per_s, 'items/s', k)}"
        )
    return lines


def _learner_line(status: Status) -> str:
    s = status.snapshot
    if s.variables is None:
        return "unknown (the variable container does not answer)"
    if s.train_step is None:
        return "no weights pushed yet (the learner has not started)"
    state = "done" if s.learner_done else "training"
    return f"train_step {s.train_step} ({state}), " + _fmt_rate(status.train_steps_per_s, "steps/s")
