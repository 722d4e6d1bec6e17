"""Reverb wiring: tables, rate limiters, connecting, writing and sampling.

The replay table holds one item per transition (s, a, r, discount, s'), so an
item is complete the moment it is written: a killed actor can never leave a
half-written trajectory behind, batched actors need no per-env streams, and the
learner reads flat tensors with no time dimension to slice.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, Mapping, Optional

import numpy as np
import reverb
import tensorflow as tf
import tree
from absl import logging
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts

from sac_distributed import specs as specs_lib
from sac_distributed.config import ConfigError, ServerConfig
from sac_distributed.errors import ServerUnreachableError, SignatureMismatchError

REPLAY_TABLE = "uniform_table"
VARIABLE_TABLE = "variables"

# Transitions per Reverb chunk: larger chunks compress better and cost fewer
# round trips; items still reference a single transition each.
DEFAULT_CHUNK_LENGTH = 16


def make_rate_limiter(config: ServerConfig) -> reverb.rate_limiters.RateLimiter:
    """MinSize by default; SampleToInsertRatio when samples_per_insert is set."""
    min_size = config.hparams.min_replay_size
    if config.hparams.samples_per_insert is None:
        return reverb.rate_limiters.MinSize(min_size)
    return reverb.rate_limiters.SampleToInsertRatio(
        samples_per_insert=config.hparams.samples_per_insert,
        min_size_to_sample=min_size,
        error_buffer=config.error_buffer,
    )


def make_tables(config: ServerConfig, env_specs) -> list:
    """The replay table and the variable container table, signatures included."""
    replay = reverb.Table(
        name=REPLAY_TABLE,
        sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(),
        max_size=config.hparams.replay_buffer_capacity,
        rate_limiter=make_rate_limiter(config),
        signature=specs_lib.transition_signature(env_specs),
    )
    variables = reverb.Table(
        name=VARIABLE_TABLE,
        sampler=reverb.selectors.Fifo(),
        remover=reverb.selectors.Fifo(),
        max_size=1,
        rate_limiter=reverb.rate_limiters.MinSize(1),
        signature=specs_lib.variable_signature(env_specs, config.hparams),
    )
    return [replay, variables]


def connect(
    address: str,
    timeout_s: float,
    purpose: str,
    should_stop: Callable[[], bool] = lambda: False,
) -> reverb.Client:
    """Returns a client once the server at `address` answers.

    Waits with exponential backoff (capped at 5 s), logging what it waits for,
    and raises ServerUnreachableError after `timeout_s` seconds.
    """
    client = reverb.Client(address)
    deadline = time.monotonic() + timeout_s
    delay = 0.2
    attempt = 0
    while True:
        remaining = deadline - time.monotonic()
        try:
            client.server_info(timeout=max(1, min(5, int(remaining))))
            if attempt:
                logging.info("Reverb server at %s is up (%s).", address, purpose)
            return client
        except (reverb.errors.DeadlineExceededError, RuntimeError) as e:
            last_error = e
        attempt += 1
        remaining = deadline - time.monotonic()
        if remaining <= 0 or should_stop():
            break
        logging.info(
            "Waiting for the Reverb server at %s (%s); %.0f s left before giving up.",
            address,
            purpose,
            remaining,
        )
        time.sleep(min(delay, max(remaining, 0)))
        delay = min(delay * 2, 5.0)
    raise ServerUnreachableError(
        f"No Reverb server answered at {address} within {timeout_s:.0f} s ({purpose}). "
        f"Start it first (sac-reverb-server --port {address.rpartition(':')[2]}), check the "
        f"host:port flag, or raise --connect_timeout. Last error: {last_error}"
    )


def check_table_signature(client: reverb.Client, table: str, expected: object, what: str) -> None:
    """Raises SignatureMismatchError when the server's table differs from `expected`."""
    infos = client.server_info()
    if table not in infos:
        raise SignatureMismatchError(
            f"The Reverb server has no table {table!r} (it has {sorted(infos)}); "
            "it is not a sac-reverb-server, or a different version."
        )
    actual = infos[table].signature
    if not specs_lib.signatures_match(expected, actual):
        raise SignatureMismatchError(
            f"{what} does not match the server's table {table!r}.\n"
            f"  this process: {specs_lib.describe_signature(expected)}\n"
            f"  server:       {specs_lib.describe_signature(actual)}\n"
            "Start every job with the same --env_name and network sizes "
            "(actor_fc_layer_params) as the server."
        )


def table_info(client: reverb.Client, table: str, timeout_s: int = 5):
    """The TableInfo of `table` (size, inserts, samples)."""
    return client.server_info(timeout=timeout_s)[table]


def wait_for_table_size(
    client: reverb.Client,
    table: str,
    min_size: int,
    should_stop: Callable[[], bool],
    log_every_s: float = 10.0,
) -> bool:
    """Polls until `table` holds `min_size` items; False if stopped first."""
    last_log = 0.0
    while not should_stop():
        size = table_info(client, table).current_size
        if size >= min_size:
            return True
        if time.monotonic() - last_log > log_every_s:
            logging.info("Waiting for %s to hold %d items (now %d).", table, min_size, size)
            last_log = time.monotonic()
        time.sleep(0.2)
    return False


class TransitionWriter:
    """Writes transitions to the replay table, one item per transition."""

    def __init__(self, client: reverb.Client, chunk_length: int = DEFAULT_CHUNK_LENGTH):
        self._writer = client.trajectory_writer(num_keep_alive_refs=chunk_length)
        self._chunk_length = chunk_length
        self._items_written = 0
        self._unconfirmed = 0
        self._closed = False

    @property
    def items_written(self) -> int:
        return self._items_written

    def write(self, transition: Mapping[str, np.ndarray]) -> None:
        """Appends one transition and creates the item that references it."""
        self._writer.append(transition)
        history = self._writer.history
        item = {field: history[field][-1] for field in specs_lib.TRANSITION_FIELDS}
        self._writer.create_item(REPLAY_TABLE, 1.0, item)
        self._items_written += 1
        self._unconfirmed += 1

    def throttle(self, timeout_ms: int = 1000) -> bool:
        """Bounds the items in flight; False if the server did not take them in time.

        Called after every write. Once a chunk's worth of items is unconfirmed
        it waits until at most two chunks are pending. A rate limiter that
        blocks inserts (SampleToInsertRatio) makes this return False after
        `timeout_ms`, so the caller can check for stop conditions and retry.
        """
        if self._unconfirmed < self._chunk_length:
            return True
        try:
            self._writer.flush(block_until_num_items=2 * self._chunk_length, timeout_ms=timeout_ms)
        except reverb.errors.DeadlineExceededError:
            return False
        self._unconfirmed = 0
        return True

    def write_batch(self, batch: Mapping[str, np.ndarray], mask: Optional[np.ndarray] = None):
        """Writes row i of every field of `batch` for each i where mask[i]."""
        n = len(batch[specs_lib.REWARD])
        for i in range(n):
            if mask is None or mask[i]:
                self.write({k: v[i] for k, v in batch.items()})

    def flush(self, timeout_ms: Optional[int] = None) -> bool:
        """Sends everything; False if the server did not confirm within the timeout."""
        try:
            self._writer.flush(timeout_ms=timeout_ms)
        except reverb.errors.DeadlineExceededError:
            return False
        self._unconfirmed = 0
        return True

    def close(self, timeout_ms: int = 5_000) -> int:
        """Sends what it can within `timeout_ms`, closes, returns items dropped unsent.

        Items the server has not confirmed by then (a rate limiter that no
        longer admits inserts, a dead server) are dropped; their number is
        measured exactly so that actors report only transitions that landed.
        """
        if self._closed:
            return 0
        dropped = 0 if self.flush(timeout_ms=timeout_ms) else self._count_pending()
        dropped = min(dropped, self._items_written)
        self._writer.close()
        self._closed = True
        self._items_written -= dropped
        return dropped

    def _count_pending(self) -> int:
        """Smallest k with flush(block_until_num_items=k) succeeding at once."""
        low, high = 0, self._unconfirmed + 2 * self._chunk_length
        while low < high:
            mid = (low + high) // 2
            try:
                self._writer.flush(block_until_num_items=mid, timeout_ms=50)
                high = mid
            except reverb.errors.DeadlineExceededError:
                low = mid + 1
        return low


def make_dataset(
    address: str,
    env_specs,
    batch_size: int,
    max_in_flight: Optional[int] = None,
    rate_limiter_timeout_ms: int = -1,
) -> tf.data.Dataset:
    """Batches of `Transition`s sampled uniformly from the replay table.

    With `rate_limiter_timeout_ms >= 0` the dataset ends when the table's rate
    limiter holds a sample back that long (e.g. no actor is inserting), so a
    training loop regains control to check for stops, then makes a new one.
    """
    signature = specs_lib.transition_signature(env_specs)
    dataset = reverb.TrajectoryDataset(
        server_address=address,
        table=REPLAY_TABLE,
        dtypes=tree.map_structure(lambda s: s.dtype, signature),
        shapes=tree.map_structure(lambda s: s.shape, signature),
        max_in_flight_samples_per_worker=max_in_flight or 2 * batch_size,
        rate_limiter_timeout_ms=rate_limiter_timeout_ms,
    )
    dataset = dataset.map(lambda sample: sample.data)
    dataset = dataset.batch(batch_size, drop_remainder=True)
    dataset = dataset.map(to_transition, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def to_transition(batch: Dict[str, tf.Tensor]) -> trajectory.Transition:
    """A batch of replay items as the `Transition` that SacAgent.train takes."""
    reward = batch[specs_lib.REWARD]
    mid = tf.fill(tf.shape(reward), ts.StepType.MID)
    ones = tf.ones_like(reward)
    time_step = ts.TimeStep(mid, tf.zeros_like(reward), ones, batch[specs_lib.OBSERVATION])
    next_time_step = ts.TimeStep(
        mid, reward, batch[specs_lib.DISCOUNT], batch[specs_lib.NEXT_OBSERVATION]
    )
    action = policy_step.PolicyStep(batch[specs_lib.ACTION], (), ())
    return trajectory.Transition(time_step, action, next_time_step)


def validate_server_config(config: ServerConfig) -> None:
    """Builds the rate limiter once so Reverb's own checks run before serving."""
    try:
        make_rate_limiter(config)
    except ValueError as e:
        raise ConfigError(f"Reverb rejects this rate limiter configuration: {e}") from e
