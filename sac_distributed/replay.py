"""Reverb wiring: tables, rate limiters, connecting, writing and sampling.

Each transition (s, a, r, discount, s') is one flat float32 row (see
`specs.RowLayout`), and each replay item holds K = `transitions_per_item`
consecutive rows in a single column. One column and K rows per item keep the
server's per-item and per-column overhead small (about 0.4 KB instead of 4 KB
per HalfCheetah transition at K=8) and make writing and sampling cheap. An item
is complete the moment it is written, so a killed actor never leaves a
half-written trajectory behind, and batched actors need no per-env streams:
their rows simply interleave. The learner samples batch_size / K items and
reshapes them to batch_size rows.

Table sizes are counted in items; the hyperparameters count transitions and
are converted here (capacity / K, min_replay_size / K).
"""

from __future__ import annotations

import time
from typing import Callable, Mapping, Optional

import numpy as np
import reverb
import tensorflow as tf
from absl import logging
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts

from sac_distributed import specs as specs_lib
from sac_distributed.config import ConfigError, ServerConfig
from sac_distributed.errors import ServerUnreachableError, SignatureMismatchError

REPLAY_TABLE = "uniform_table"
VARIABLE_TABLE = "variables"

# Items a writer may have unconfirmed before throttle() waits for the server.
MAX_ITEMS_IN_FLIGHT = 16
# Interleaved TrajectoryDatasets per learner input pipeline. On 2 cores one
# stream costs the least CPU per batch (~0.6 ms for 256 HalfCheetah transitions
# at K=8, against ~0.9 ms with two) and still delivers >1000 batches/s, ten
# times what the learner consumes; the CPU it takes is what training loses.
DEFAULT_PARALLEL_DATASETS = 1


def make_rate_limiter(config: ServerConfig) -> reverb.rate_limiters.RateLimiter:
    """MinSize by default; SampleToInsertRatio when samples_per_insert is set.

    Counts are in items of K transitions. samples_per_insert is the same in
    items as in transitions (a sample and an insert both move K transitions);
    the error buffer, given in transitions, is divided by K but never below
    Reverb's floor of max(1, samples_per_insert).
    """
    hp = config.hparams
    min_size = hp.min_replay_items
    if hp.samples_per_insert is None:
        return reverb.rate_limiters.MinSize(min_size)
    floor = max(1.0, hp.samples_per_insert)
    return reverb.rate_limiters.SampleToInsertRatio(
        samples_per_insert=hp.samples_per_insert,
        min_size_to_sample=min_size,
        error_buffer=max(floor, config.error_buffer / hp.transitions_per_item),
    )


def latest_value_table(name: str, signature: object) -> reverb.Table:
    """A one-item table holding the latest value written (a new insert evicts the old)."""
    return reverb.Table(
        name=name,
        sampler=reverb.selectors.Fifo(),
        remover=reverb.selectors.Fifo(),
        max_size=1,
        rate_limiter=reverb.rate_limiters.MinSize(1),
        signature=signature,
    )


def make_tables(config: ServerConfig, env_specs) -> list:
    """The replay table and the variable container table, signatures included."""
    replay = reverb.Table(
        name=REPLAY_TABLE,
        sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(),
        max_size=config.hparams.replay_capacity_items,
        rate_limiter=make_rate_limiter(config),
        signature=specs_lib.transition_signature(env_specs, config.hparams.transitions_per_item),
    )
    variables = latest_value_table(
        VARIABLE_TABLE, specs_lib.variable_signature(env_specs, config.hparams)
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


def table_transitions_per_item(client: reverb.Client, timeout_s: int = 5) -> int:
    """K of the server's replay table, read from its signature."""
    return specs_lib.transitions_per_item_of(table_info(client, REPLAY_TABLE, timeout_s).signature)


def check_transitions_per_item(client: reverb.Client, expected: int, who: str) -> int:
    """K of the server's replay table; SignatureMismatchError unless it is `expected`.

    K shapes everything a job does with the replay (items written, items
    sampled per batch, items to wait for, env steps counted), so a job whose
    K differs from the table's is refused, in one line naming both values.
    """
    table_k = table_transitions_per_item(client)
    if expected != table_k:
        raise SignatureMismatchError(
            f"The {who} runs with transitions_per_item={expected}, but the server's replay "
            f"table {REPLAY_TABLE!r} stores {table_k} transitions per item: start every job "
            f"with the server's --transitions_per_item={table_k}."
        )
    return table_k


def stored_transitions(info) -> int:
    """Transitions held by a table, from its TableInfo (items x K)."""
    return int(info.current_size) * specs_lib.transitions_per_item_of(info.signature)


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
    ):
        """`transitions_per_item`: K; None reads it from the server's table.

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
                fast.CreateItem(REPLAY_TABLE, 1.0, [refs], [False])
                self._refs = []
                self._item_done()
            return
        self._writer.append(row)  # the first row sets up the column and its chunker
        self._rows_in_item += 1
        if self._rows_in_item == self._k:
            if self._column is None:
                self._column = self._writer.history
            self._writer.create_item(REPLAY_TABLE, 1.0, self._column[-self._k :])
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
        self.write_row(specs_lib.pack_transition(transition))

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


def make_dataset(
    address: str,
    env_specs,
    batch_size: int,
    max_in_flight: Optional[int] = None,
    rate_limiter_timeout_ms: int = -1,
    transitions_per_item: Optional[int] = None,
    num_parallel_datasets: int = DEFAULT_PARALLEL_DATASETS,
) -> tf.data.Dataset:
    """Batches of `batch_size` `Transition`s sampled uniformly from the replay table.

    Samples batch_size / K items (K = `transitions_per_item`, read from the
    server's table when None; a given K is checked against the table's) from
    `num_parallel_datasets` interleaved Reverb streams, then reshapes them to
    batch_size rows. `max_in_flight` is per
    stream, in items (default: one batch's worth).

    With `rate_limiter_timeout_ms >= 0` the dataset ends when the table's rate
    limiter holds samples back that long (e.g. no actor is inserting), so a
    training loop regains control to check for stops, then makes a new one.
    """
    client = reverb.Client(address)
    if transitions_per_item is None:
        k = table_transitions_per_item(client)
    else:
        k = check_transitions_per_item(client, transitions_per_item, "learner")
    if batch_size % k:
        raise ValueError(
            f"batch_size {batch_size} (per replica) is not a multiple of the table's "
            f"{k} transitions per item."
        )
    layout = specs_lib.row_layout(env_specs)
    items_per_batch = batch_size // k
    in_flight = max_in_flight or max(items_per_batch, 1)

    def stream(_) -> tf.data.Dataset:
        return reverb.TrajectoryDataset(
            server_address=address,
            table=REPLAY_TABLE,
            dtypes={specs_lib.TRANSITIONS: tf.float32},
            shapes={specs_lib.TRANSITIONS: tf.TensorShape([k, layout.width])},
            max_in_flight_samples_per_worker=in_flight,
            rate_limiter_timeout_ms=rate_limiter_timeout_ms,
        )

    if num_parallel_datasets <= 1:
        dataset = stream(0)
    else:
        dataset = tf.data.Dataset.range(num_parallel_datasets).interleave(
            stream,
            cycle_length=num_parallel_datasets,
            num_parallel_calls=num_parallel_datasets,
            deterministic=False,
        )
    # Whole ReplaySamples are batched (no per-item map: a per-item op costs
    # more CPU than Reverb's sampling itself), then the rows are split once.
    dataset = dataset.batch(items_per_batch, drop_remainder=True)
    dataset = dataset.map(
        lambda samples: items_to_transition(samples.data[specs_lib.TRANSITIONS], layout),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return dataset.prefetch(tf.data.AUTOTUNE)


def items_to_transition(items: tf.Tensor, layout: specs_lib.RowLayout) -> trajectory.Transition:
    """A batch of replay items [N, K, width] as a `Transition` of N * K rows."""
    n, k = items.shape[0], items.shape[1]
    rows = n * k if n is not None and k is not None else -1  # keep the batch dim static
    return to_transition(tf.reshape(items, [rows, layout.width]), layout)


def to_transition(rows: tf.Tensor, layout: specs_lib.RowLayout) -> trajectory.Transition:
    """Replay rows [B, width] as the `Transition` that SacAgent.train takes."""
    obs, action, reward, discount, next_obs = tf.split(rows, layout.split_sizes, axis=-1)
    reward = tf.squeeze(reward, -1)
    discount = tf.squeeze(discount, -1)

    def field(x: tf.Tensor, shape: tuple, dtype: tf.dtypes.DType) -> tf.Tensor:
        if len(shape) != 1:
            x = tf.reshape(x, tf.concat([tf.shape(x)[:-1], shape], 0))
        return x if dtype == tf.float32 else tf.cast(x, dtype)

    obs_shape, obs_dtype = layout.observation_shape, layout.observation_dtype
    obs = field(obs, obs_shape, obs_dtype)
    next_obs = field(next_obs, obs_shape, obs_dtype)
    action = field(action, layout.action_shape, layout.action_dtype)
    mid = tf.fill(tf.shape(reward), ts.StepType.MID)
    time_step = ts.TimeStep(mid, tf.zeros_like(reward), tf.ones_like(reward), obs)
    next_time_step = ts.TimeStep(mid, reward, discount, next_obs)
    return trajectory.Transition(time_step, policy_step.PolicyStep(action, (), ()), next_time_step)


def validate_server_config(config: ServerConfig) -> None:
    """Builds the rate limiter once so Reverb's own checks run before serving."""
    try:
        make_rate_limiter(config)
    except ValueError as e:
        raise ConfigError(f"Reverb rejects this rate limiter configuration: {e}") from e
