"""Sends the learner's new replay priorities to the shards, off the training path.

With prioritized replay the learner computes a priority for every item it
trained on (algorithm/priorities.py: the item's mean |TD error|) and hands them here
after each training call. `PriorityUpdater` merges them per shard (a key seen
twice keeps its latest priority) and one thread per shard sends them with one
`mutate_priorities` call per batch, so the learner never waits on the network.

Reverb's `mutate_priorities` has no deadline, so a worker pings its shard with
a bounded `server_info` before each send; a shard that does not answer has its
pending updates dropped (counted, and logged once until it answers again). An
item whose priority update was dropped simply keeps its old priority, which is
what prioritized replay does anyway for items not sampled recently.

The updater also keeps the running maximum of every priority submitted
(starting from `INITIAL_PRIORITY`, or the value published before a restart):
new items enter the replay at that priority (see tables.py).
"""

from __future__ import annotations

import threading
from typing import Dict, List, Optional, Sequence

import numpy as np
import reverb
from absl import logging

from sac_distributed.replay.connection import TRANSIENT_ERRORS, first_line
from sac_distributed.replay.signatures import REPLAY_TABLE
from sac_distributed.replay.tables import INITIAL_PRIORITY

# Seconds a shard has to answer the ping before its pending updates are dropped.
PING_TIMEOUT_S = 5
# What close() waits, in all, for the workers to send what is pending.
CLOSE_TIMEOUT_S = 10.0


class _ShardWorker:
    """The pending updates of one shard and the thread that sends them."""

    def __init__(self, address: str, index: int):
        self.address = address
        self.index = index
        self.pending: Dict[int, float] = {}
        self.sent = 0
        self.dropped = 0
        self.busy = False  # a batch is taken and not yet sent or dropped
        self.warned = False
        self.client = reverb.Client(address)


class PriorityUpdater:
    """Batched, asynchronous priority updates for the replay shards at `addresses`.

    `submit()` only merges into per-shard dicts and wakes the workers; it never
    touches the network. `close()` sends what is pending (bounded) and stops.
    Counters: `sent` and `dropped` (priority updates, summed over shards).
    """

    def __init__(
        self,
        addresses: Sequence[str],
        table: str = REPLAY_TABLE,
        initial_max_priority: float = INITIAL_PRIORITY,
    ):
        self._table = table
        self._workers = [_ShardWorker(address, i) for i, address in enumerate(addresses)]
        self._max_priority = float(initial_max_priority)
        self._cond = threading.Condition()
        self._closing = False
        self._threads = [
            threading.Thread(
                target=self._run, args=(worker,), daemon=True, name=f"priorities-{worker.index}"
            )
            for worker in self._workers
        ]
        for thread in self._threads:
            thread.start()

    @property
    def max_priority(self) -> float:
        """The largest priority ever submitted (or the initial one, if larger)."""
        return self._max_priority

    @property
    def sent(self) -> int:
        return sum(worker.sent for worker in self._workers)

    @property
    def dropped(self) -> int:
        return sum(worker.dropped for worker in self._workers)

    def submit(self, keys: np.ndarray, shards: np.ndarray, priorities: np.ndarray) -> None:
        """Queues new priorities of the items `keys` (uint64) on `shards` (indices)."""
        keys = np.asarray(keys, np.uint64).ravel()
        shards = np.asarray(shards).ravel()
        priorities = np.asarray(priorities, np.float64).ravel()
        if len(priorities) == 0:
            return
        self._max_priority = max(self._max_priority, float(np.max(priorities)))
        with self._cond:
            if self._closing:
                raise RuntimeError("PriorityUpdater.submit() after close().")
            for index in np.unique(shards):
                mask = shards == index
                pending = self._worker(int(index)).pending
                pending.update(zip(keys[mask].tolist(), priorities[mask].tolist()))
            self._cond.notify_all()

    def _worker(self, index: int) -> _ShardWorker:
        if not 0 <= index < len(self._workers):
            raise ValueError(
                f"A priority update names shard {index}, but the updater knows "
                f"{len(self._workers)} shard(s): the learner's replay address list and the "
                "updater's must be the same."
            )
        return self._workers[index]

    def _run(self, worker: _ShardWorker) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: worker.pending or self._closing)
                if not worker.pending:
                    return  # closing, nothing left
                batch, worker.pending = worker.pending, {}
                worker.busy = True
            self._send(worker, batch)
            with self._cond:
                worker.busy = False
                self._cond.notify_all()

    def _send(self, worker: _ShardWorker, batch: Dict[int, float]) -> None:
        """One mutate_priorities call; drops the batch if the shard does not answer."""
        try:
            worker.client.server_info(timeout=PING_TIMEOUT_S)
            worker.client.mutate_priorities(self._table, updates=batch)
        except TRANSIENT_ERRORS as error:
            worker.dropped += len(batch)
            worker.client = reverb.Client(worker.address)  # a fresh channel for the next try
            if not worker.warned:
                worker.warned = True
                logging.warning(
                    "Replay shard %d (%s) did not take %d priority updates (%s); dropping "
                    "its updates until it answers again (those items keep their old "
                    "priorities). Training goes on.",
                    worker.index,
                    worker.address,
                    len(batch),
                    first_line(error),
                )
            return
        worker.sent += len(batch)
        if worker.warned:
            worker.warned = False
            logging.info("Replay shard %d takes priority updates again.", worker.index)

    def flush(self, timeout_s: float = CLOSE_TIMEOUT_S) -> bool:
        """Waits until everything submitted so far is sent or dropped; False on timeout."""
        with self._cond:
            return self._cond.wait_for(
                lambda: not any(w.pending or w.busy for w in self._workers), timeout_s
            )

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> int:
        """Sends what is pending (within `timeout_s`), stops; returns updates not sent.

        A worker still stuck on a shard after the timeout is left behind (its
        thread is a daemon) and its pending updates count as dropped.
        """
        self.flush(timeout_s)
        with self._cond:
            self._closing = True
            left: List[int] = []
            for worker in self._workers:
                left.append(len(worker.pending))
                worker.dropped += len(worker.pending)
                worker.pending = {}
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=1.0)
        return sum(left)


def initial_max_priority(published: Optional[float]) -> float:
    """Where a (re)started learner's running max starts: the published value, if any."""
    return max(INITIAL_PRIORITY, published or 0.0)
