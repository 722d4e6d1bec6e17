"""Replay-shard fail-over: what a job does when one of several replay shards goes away.

With several replay shards (`--num_replay_shards`), a job carries on over the
shards that answer instead of waiting for the lost one:

* the learner drops a lost shard from its dataset and samples from the
  others; every `shard_probe_interval_s` it pings the missing shards and takes
  back those that answer and hold enough items to be sampled (a shard taken
  back empty would get no share of the batch, and so never be sampled again);
* an actor moves from a lost shard to the next live one in ring order and,
  every `shard_probe_interval_s`, goes back to its home shard once it answers.

Only a lost variable container, or no shard left, needs the full reconnect
(`Connection.recover`); with one server every loss is that. `ShardFailover`
says which case a loss is, finds the shards to use and keeps the probe
interval; the loops rebuild their own dataset or writer.
"""

from __future__ import annotations

import enum
import time
from typing import Callable, List, Optional, Sequence

import reverb
from absl import logging

from sac_distributed.replay.connection import (
    PING_TIMEOUT_S,
    TRANSIENT_ERRORS,
    Connection,
    ShardLostError,
)
from sac_distributed.replay.counts import table_counts, table_info
from sac_distributed.replay.signatures import REPLAY_TABLE


class Loss(enum.Enum):
    """What a Reverb error lost, as far as a job can do without it."""

    SHARD = "a replay shard (others may answer)"
    VARIABLES = "the variable container alone"
    EVERYTHING = "everything: reconnect all"


class ShardFailover:
    """The shard fail-over of one job (learner or actor) over its `Connection`."""

    def __init__(self, connection: Connection, probe_interval_s: float):
        self._connection = connection
        self._probe_interval_s = probe_interval_s
        self._next_probe = 0.0

    # --- what was lost --------------------------------------------------------------

    def shard_lost(self, shard: int) -> bool:
        """With several shards: whether `shard` no longer answers (one short ping)."""
        connection = self._connection
        return connection.num_shards > 1 and not connection.shard_answers(shard)

    def diagnose(self, shard: int) -> Loss:
        """What an error while using `shard` lost: the shard, the variables, or all."""
        if self._connection.num_shards == 1:
            return Loss.EVERYTHING
        if self.shard_lost(shard):
            return Loss.SHARD
        return Loss.EVERYTHING if self._connection.variables_answer() else Loss.VARIABLES

    def lost_shards(self, in_use: Sequence[int]) -> List[int]:
        """The shards in `in_use` that no longer answer, when the job can do without
        them (other shards and the variable container answer); else []."""
        connection = self._connection
        if connection.num_shards == 1:
            return []
        lost = [i for i in in_use if not connection.shard_answers(i)]
        if not lost or len(lost) == len(connection.live_shards()):
            return []
        return lost if connection.variables_answer() else []

    # --- the learner: sampling from the shards that answer ----------------------------

    def drop(self, lost: Sequence[int], error: Exception) -> None:
        """Marks `lost` missing; they are probed again after a whole probe interval."""
        for shard in lost:
            self._connection.lose_shard(shard, error)
        self._postpone_probe()

    def rejoin_sampleable(self) -> List[int]:
        """Every probe interval: the missing shards that answer and hold the items
        they need to be sampled, taken back (fresh clients); [] between probes."""
        missing = self._connection.missing_shards()
        if not missing or not self._probe_due():
            return []
        ready = [shard for shard in missing if self._sampleable(shard)]
        return [shard for shard in ready if self._connection.rejoin_shard(shard)]

    def wait_for_items(self, needed: int, should_stop: Callable[[], bool]) -> bool:
        """Polls until the live shards hold `needed` items together; False if stopped.

        Raises ShardLostError when no shard answers (like one lost server: the
        caller reconnects, waiting up to connect_timeout).
        """
        connection = self._connection
        while not should_stop():
            sizes = []
            for client in connection.live_clients():
                try:
                    sizes.append(table_info(client, REPLAY_TABLE).current_size)
                except TRANSIENT_ERRORS:
                    continue  # a lost shard: the others may hold enough
            if not sizes:
                raise ShardLostError("no replay shard answers while waiting for warm replay")
            items = sum(sizes)
            if items >= needed:
                return True
            logging.log_every_n_seconds(
                logging.INFO,
                "Initial collect: the replay shards %s hold %d of the %d items needed to "
                "sample (%.0f%%).",
                10,
                connection.live_shards(),
                items,
                needed,
                100.0 * items / max(needed, 1),
            )
            time.sleep(0.2)
        return False

    def _sampleable(self, shard: int) -> bool:
        """Whether `shard` answers (within a ping's timeout) and holds the items it
        needs to be sampled."""
        address = self._connection.replay_addresses[shard]
        try:
            info = table_counts(reverb.Client(address), PING_TIMEOUT_S)[REPLAY_TABLE]
        except TRANSIENT_ERRORS:
            return False
        needed = int(info.rate_limiter_info.min_size_to_sample)
        if info.current_size >= needed:
            return True
        logging.info(
            "Replay shard %d at %s answers but holds %d of the %d items it needs to be "
            "sampled; the learner takes it back once it does.",
            shard,
            address,
            info.current_size,
            needed,
        )
        return False

    # --- an actor: writing to one shard, its home shard when it answers ---------------

    def next_live_shard(self, lost: int, error: Exception) -> Optional[int]:
        """Marks `lost` missing; the next shard in ring order that answers, or None."""
        connection = self._connection
        connection.lose_shard(lost, error)
        for step in range(1, connection.num_shards):
            shard = (lost + step) % connection.num_shards
            if connection.rejoin_shard(shard):
                self._postpone_probe()
                return shard
        return None

    def home_answers_again(self, home: int, current: int) -> bool:
        """While away from `home`: every probe interval, whether it answers again."""
        if current == home or not self._probe_due():
            return False
        return self._connection.rejoin_shard(home)

    # --- the probe interval ------------------------------------------------------------

    def _probe_due(self) -> bool:
        """True at most once per probe interval."""
        now = time.monotonic()
        if now < self._next_probe:
            return False
        self._next_probe = now + self._probe_interval_s
        return True

    def _postpone_probe(self) -> None:
        self._next_probe = time.monotonic() + self._probe_interval_s
