"""The actors' writer: transitions into the replay table, K rows per item."""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np
import reverb

from sac_distributed.replay.checks import check_transitions_per_item
from sac_distributed.replay.counts import table_transitions_per_item
from sac_distributed.replay.layout import pack_transition
from sac_distributed.replay.signatures import REPLAY_TABLE

# Items a writer may have unconfirmed before throttle() waits for the server.
MAX_ITEMS_IN_FLIGHT = 16


class TransitionWriter:
    """Writes transitions to the replay table, K consecutive rows per item.

    Rows (see `specs.RowLayout`) are appended to one column; every K-th row
    creates an item that references the last K rows. Each chunk holds exactly
    one item's rows, so sampling an item transfers nothing else. Counts
    (`items_written`, what `close()` returns) are in transitions.
    """

    def __init__(
        self,
        client: reverb.Client,
        transitions_per_item: Optional[int] = None,
        max_items_in_flight: int = MAX_ITEMS_IN_FLIGHT,
        priority: float = 1.0,
    ):
        """`transitions_per_item`: K; None reads it from the server's table.
        `priority`: the insert priority of the next items (settable as `.priority`;
        the uniform sampler ignores it, a prioritized one samples by it).

        Raises SignatureMismatchError when a given K differs from the table's.
        """
        if transitions_per_item is None:
            self._k = table_transitions_per_item(client)
        else:
            self._k = check_transitions_per_item(client, transitions_per_item, "actor")
        self._writer = client.trajectory_writer(num_keep_alive_refs=self._k)
        self._writer.configure((), num_keep_alive_refs=self._k, max_chunk_length=self._k)
        self._column = None  # the writer's column history, cached after the first append
        self._fast = None  # Reverb's C++ writer, used directly after the first row
        self._refs: list = []  # the current item's rows (fast path)
        self._max_in_flight = max_items_in_flight
        self._rows_in_item = 0  # rows appended since the last item
        self._transitions_written = 0  # in created items; minus the dropped at close
        self._unconfirmed = 0  # items created since the last completed flush
        self._unconfirmed_at_close = 0  # transitions
        self._incomplete_at_close = 0  # transitions
        self._closed = False
        self.priority = float(priority)

    @property
    def transitions_per_item(self) -> int:
        return self._k

    @property
    def items_written(self) -> int:
        """Transitions in items written (after close(): confirmed by the server)."""
        return self._transitions_written

    transitions_written = items_written

    @property
    def transitions_unconfirmed(self) -> int:
        """After close(): transitions sent in items the server had not acknowledged.

        They may have landed or not (an acknowledgement can be on its way when
        the stream closes), so they are neither "written" nor "dropped"; the
        server's own insert count is the authority on them.
        """
        return self._unconfirmed_at_close

    @property
    def transitions_incomplete(self) -> int:
        """After close(): rows of a last item with fewer than K rows, never sent."""
        return self._incomplete_at_close

    def write_row(self, row: np.ndarray) -> None:
        """Appends one flat float32 row; every K-th row completes an item."""
        fast = self._fast
        if fast is not None:
            # Reverb's C++ writer without the Python wrapper's per-call structure
            # handling (about half of an append's cost): one column, one row.
            refs = self._refs
            refs.append(fast.Append([row])[0])
            if len(refs) == self._k:
                fast.CreateItem(REPLAY_TABLE, self.priority, [refs], [False])
                self._refs = []
                self._item_done()
            return
        self._writer.append(row)  # the first row sets up the column and its chunker
        self._rows_in_item += 1
        if self._rows_in_item == self._k:
            if self._column is None:
                self._column = self._writer.history
            self._writer.create_item(REPLAY_TABLE, self.priority, self._column[-self._k :])
            self._rows_in_item = 0
            self._item_done()
        self._fast = _cpp_writer(self._writer)
        if self._fast is not None and self._rows_in_item:
            # The rows so far of the current item, as data references.
            self._refs = list(self._writer.history[-self._rows_in_item :])

    def _item_done(self) -> None:
        self._transitions_written += self._k
        self._unconfirmed += 1

    @property
    def _partial_rows(self) -> int:
        return len(self._refs) if self._fast is not None else self._rows_in_item

    def write_rows(self, rows: np.ndarray, mask: Optional[np.ndarray] = None) -> None:
        """Writes rows[i] of a [N, width] array for each i where mask[i]."""
        for i in range(len(rows)):
            if mask is None or mask[i]:
                self.write_row(rows[i])

    def write(self, transition: Mapping[str, np.ndarray]) -> None:
        """Writes one transition given as a dict of its fields."""
        self.write_row(pack_transition(transition))

    def throttle(self, timeout_ms: int = 1000) -> bool:
        """Bounds the items in flight; False if the server did not take them in time.

        Called after every write. Once `max_items_in_flight` items are
        unconfirmed it waits until at most twice that many are pending. A rate
        limiter that blocks inserts (SampleToInsertRatio) makes this return
        False after `timeout_ms`, so the caller can check for stop conditions
        and retry.
        """
        if self._unconfirmed < self._max_in_flight:
            return True
        try:
            self._writer.flush(block_until_num_items=2 * self._max_in_flight, timeout_ms=timeout_ms)
        except reverb.errors.DeadlineExceededError:
            return False
        self._unconfirmed = 0
        return True

    def flush(self, timeout_ms: Optional[int] = None) -> bool:
        """Sends every complete item; False if the server did not confirm in time.

        `timeout_ms=None` waits without limit; 0 means "do not wait" (Reverb
        itself would read 0 as no limit, and block on a closed rate limiter).
        """
        if timeout_ms is not None:
            timeout_ms = max(1, timeout_ms)
        try:
            self._writer.flush(timeout_ms=timeout_ms)
        except reverb.errors.DeadlineExceededError:
            return False
        self._unconfirmed = 0
        return True

    def close(self, timeout_ms: int = 5_000) -> int:
        """Sends what it can within `timeout_ms`, closes, returns transitions not confirmed.

        That is `transitions_unconfirmed` (items the server had not acknowledged
        by then: a rate limiter that no longer admits inserts, a dead server, or
        a reply still on its way) plus `transitions_incomplete` (the rows of a
        last item with fewer than K rows). Afterwards `transitions_written`
        counts only what the server confirmed.
        """
        if self._closed:
            return 0
        pending = 0 if self.flush(timeout_ms=timeout_ms) else self._count_pending()
        unconfirmed = min(pending * self._k, self._transitions_written)
        self._writer.close()
        self._closed = True
        self._transitions_written -= unconfirmed
        self._unconfirmed_at_close = unconfirmed
        self._incomplete_at_close = self._partial_rows
        self._rows_in_item, self._refs = 0, []
        return unconfirmed + self._incomplete_at_close

    def _count_pending(self) -> int:
        """Smallest k with flush(block_until_num_items=k) succeeding at once (items)."""
        low, high = 0, self._unconfirmed + 2 * self._max_in_flight
        while low < high:
            mid = (low + high) // 2
            try:
                self._writer.flush(block_until_num_items=mid, timeout_ms=50)
                high = mid
            except reverb.errors.DeadlineExceededError:
                low = mid + 1
        return low


def _cpp_writer(writer: reverb.TrajectoryWriter):
    """The pybind writer behind `writer` if it has the calls write_row uses, else None."""
    cpp = getattr(writer, "_writer", None)
    if all(hasattr(cpp, name) for name in ("Append", "CreateItem")):
        return cpp
    return None
