"""What the server's tables hold: sizes and counters, in items and transitions.

Reverb counts items of K transitions; the jobs and tools report transitions.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, NamedTuple, Sequence

import reverb
from absl import logging
from reverb.cc import schema_pb2

from sac_distributed.replay.connection import TRANSIENT_ERRORS
from sac_distributed.replay.signatures import REPLAY_TABLE, transitions_per_item_of


def table_info(client: reverb.Client, table: str, timeout_s: int = 5):
    """The TableInfo of `table` (size, inserts, samples)."""
    return client.server_info(timeout=timeout_s)[table]


def table_counts(client: reverb.Client, timeout_s: int = 5) -> Dict[str, schema_pb2.TableInfo]:
    """Every table's info as Reverb's TableInfo proto, its signature left encoded.

    `client.server_info` decodes each table's signature into TensorSpecs on every
    call, which costs about as much again as the answer itself (HalfCheetah's
    tables: `python benchmarks/probe.py pull_cost`). Sizes and counts, which the
    frequent callers (weight pulls) need, have the same field names here.
    """
    try:
        answers = client._client.ServerInfo(timeout_s)  # noqa: SLF001 (see above)
    except RuntimeError as error:
        if "Deadline Exceeded" in str(error):  # what server_info raises for it
            raise reverb.errors.DeadlineExceededError(
                f"ServerInfo did not complete within {timeout_s} s"
            ) from None
        raise
    infos = (schema_pb2.TableInfo.FromString(answer) for answer in answers)
    return {info.name: info for info in infos}


def table_transitions_per_item(client: reverb.Client, timeout_s: int = 5) -> int:
    """K of the server's replay table, read from its signature."""
    return transitions_per_item_of(table_info(client, REPLAY_TABLE, timeout_s).signature)


def stored_transitions(info) -> int:
    """Transitions held by a table, from its TableInfo (items x K)."""
    return int(info.current_size) * transitions_per_item_of(info.signature)


class TransitionCounts(NamedTuple):
    """A replay table's counters in transitions (Reverb counts items of K)."""

    stored: int
    inserted: int  # ever, by all actors
    sampled: int  # ever, by all learners


def transition_counts(info) -> TransitionCounts:
    """The counters of a table's TableInfo, in transitions (K from its signature)."""
    k = transitions_per_item_of(info.signature)
    stats = info.rate_limiter_info
    return TransitionCounts(
        stored=int(info.current_size) * k,
        inserted=int(stats.insert_stats.completed) * k,
        sampled=int(stats.sample_stats.completed) * k,
    )


def wait_for_table_size(
    client: reverb.Client,
    table: str,
    min_size: int,
    should_stop: Callable[[], bool],
    log_every_s: float = 10.0,
) -> bool:
    """Polls until `table` holds `min_size` items; False if stopped first.

    Replay items hold K transitions each: pass `Hyperparams.min_replay_items`.
    """
    last_log = 0.0
    while not should_stop():
        info = table_info(client, table)
        if info.current_size >= min_size:
            return True
        if time.monotonic() - last_log > log_every_s:
            logging.info(
                "Initial collect: %s holds %d of the %d items needed to sample (%.0f%%; "
                "%d transitions).",
                table,
                info.current_size,
                min_size,
                100.0 * info.current_size / max(min_size, 1),
                stored_transitions(info),
            )
            last_log = time.monotonic()
        time.sleep(0.2)
    return False


def stored_items(clients: Sequence[reverb.Client], timeout_s: int = 5) -> int:
    """Replay items held by all the reachable shards together (unreachable: 0)."""
    total = 0
    for client in clients:
        try:
            total += int(table_info(client, REPLAY_TABLE, timeout_s).current_size)
        except TRANSIENT_ERRORS:
            continue
    return total
