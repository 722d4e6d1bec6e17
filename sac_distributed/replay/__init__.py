"""The replay: row layout, table signatures, tables, writer and dataset, in one place.

Like Acme's builder, this module owns everything about how experience is
stored, so the actor, the n-step accumulator, the server and the learner call
it and do no arithmetic on rows of their own:

* the row layout (`RowLayout`): each transition (s, a, r, discount, s') is
  one flat float32 row; `pack`/`unpack` convert, and the n-step fields
  (reward, discount, next observation) are read and replaced through it;
* the table signatures (`transition_signature`, `variable_signature`) that
  the server builds its tables with and every job checks at start-up
  (`check_server_tables`), naming both sides of a mismatch;
* the tables (`make_tables`), the writer (`TransitionWriter`) and the
  learner's dataset (`make_dataset`, `to_transition`).

Each replay item holds K = `transitions_per_item` consecutive rows in a single
column. One column and K rows per item keep the server's per-item and
per-column overhead small (about 0.4 KB instead of 4 KB per HalfCheetah
transition at K=8) and make writing and sampling cheap. An item is complete
the moment it is written, so a killed actor never leaves a half-written
trajectory behind, and batched actors need no per-env streams: their rows
simply interleave. The learner samples batch_size / K items and reshapes them
to batch_size rows. K comes from `Hyperparams.transitions_per_item` alone; a
job whose K differs from the server's table is refused.

Table sizes are counted in items; the hyperparameters count transitions and
are converted here (capacity / K, min_replay_size / K).

Sharding. The replay may be split over S ordinary sac-reverb-servers
(`--num_replay_shards=S --replay_shard=i`; jobs list all S addresses in
`--replay_buffer_server_address`). Shard i holds capacity / S items
(`shard_capacity_items`), may be sampled once it holds ceil(min / S) items
(`shard_min_size_items`), and keeps its own replay checkpoints. Each actor
writes to one shard; the learner's batch is the concatenation of per-shard
sub-batches sized in proportion to the shards' sizes (`batch_shares`).
The rate limiter keeps its meaning over the whole job because every shard
enforces the same samples_per_insert on its own items: with sampled_s <=
spi * inserted_s + buffer_s on every shard, summing gives sampled <= spi *
inserted + buffer for the job (and likewise from below), with the error
buffer split S ways (`shard_error_buffer`). With actors spread evenly over
the shards, their sizes and insert rates match the learner's shares, so no
shard's limiter holds the others back; a shard with fewer writers paces the
learner down to its own insert rate, which is what the ratio asks for.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence

import numpy as np
import reverb
import tensorflow as tf
import tree
from absl import logging
from reverb.cc import schema_pb2
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts

from sac_distributed.algorithm.agent import EnvSpecs, policy_variable_specs
from sac_distributed.config import ConfigError, Hyperparams, ServerConfig
from sac_distributed.errors import ServerUnreachableError, SignatureMismatchError
from sac_distributed.retry import retry

REPLAY_TABLE = "uniform_table"
VARIABLE_TABLE = "variables"

# What a Reverb call raises when the server is gone: deadlines from our own
# timeouts, and RuntimeError carrying a gRPC status (UNAVAILABLE, CANCELLED...).
TRANSIENT_ERRORS = (reverb.errors.DeadlineExceededError, RuntimeError)

# Items a writer may have unconfirmed before throttle() waits for the server.
MAX_ITEMS_IN_FLIGHT = 16
# Interleaved TrajectoryDatasets per learner input pipeline. On 2 cores one
# stream costs the least CPU per batch (~0.6 ms for 256 HalfCheetah transitions
# at K=8, against ~0.9 ms with two) and still delivers >1000 batches/s, ten
# times what the learner consumes; the CPU it takes is what training loses.
DEFAULT_PARALLEL_DATASETS = 1


# --- the row layout -------------------------------------------------------------------

# The fields of one transition, in the order they are packed into a replay row.
OBSERVATION = "observation"
ACTION = "action"
REWARD = "reward"
DISCOUNT = "discount"
NEXT_OBSERVATION = "next_observation"
TRANSITION_FIELDS = (OBSERVATION, ACTION, REWARD, DISCOUNT, NEXT_OBSERVATION)
# The single column of a replay item: [transitions_per_item, row width] float32.
TRANSITIONS = "transitions"
_ROWS_OF = "rows of "


@dataclasses.dataclass(frozen=True)
class RowLayout:
    """Where each field of a transition sits in its flat float32 replay row.

    A row is [observation (flattened), action (flattened), reward, discount,
    next_observation (flattened)], all float32; observations of another dtype
    are cast for storage and cast back by `to_transition`. Everything that
    reads or writes single fields of a row (the actor, the n-step accumulator,
    the learner's dataset) goes through this class, so a new row format is a
    change here and nowhere else.
    """

    observation_shape: tuple
    observation_dtype: tf.dtypes.DType
    action_shape: tuple
    action_dtype: tf.dtypes.DType

    @functools.cached_property
    def observation_size(self) -> int:
        return int(np.prod(self.observation_shape, dtype=np.int64))

    @functools.cached_property
    def action_size(self) -> int:
        return int(np.prod(self.action_shape, dtype=np.int64))

    @property
    def width(self) -> int:
        """Floats per row."""
        return 2 * self.observation_size + self.action_size + 2

    @property
    def split_sizes(self) -> Sequence[int]:
        """Sizes of (observation, action, reward, discount, next_observation) in a row."""
        o = self.observation_size
        return (o, self.action_size, 1, 1, o)

    @functools.cached_property
    def _reward_index(self) -> int:
        return self.observation_size + self.action_size

    def describe(self) -> str:
        """E.g. 'rows of (observation: float32[3], action: float32[1], reward, ...)'."""
        obs = f"{self.observation_dtype.name}{list(self.observation_shape)}"
        act = f"{self.action_dtype.name}{list(self.action_shape)}"
        return (
            f"{_ROWS_OF}(observation: {obs}, action: {act}, reward: float32[], "
            f"discount: float32[], next_observation: {obs})"
        )

    def pack(self, observation, action, reward, discount, next_observation) -> np.ndarray:
        """Rows [N, width] from N transitions given field by field (leading dim N)."""
        n = len(reward)
        return np.concatenate(
            [
                np.reshape(observation, (n, -1)),
                np.reshape(action, (n, -1)),
                np.reshape(reward, (n, 1)),
                np.reshape(discount, (n, 1)),
                np.reshape(next_observation, (n, -1)),
            ],
            axis=1,
            dtype=np.float32,
        )

    def unpack(self, rows: np.ndarray) -> Dict[str, np.ndarray]:
        """The inverse of `pack`: fields with their env shapes and dtypes."""
        rows = np.asarray(rows)
        n = rows.shape[0]
        obs, act, reward, discount, next_obs = np.split(
            rows, np.cumsum(self.split_sizes)[:-1], axis=1
        )
        obs_dtype, act_dtype = (
            self.observation_dtype.as_numpy_dtype,
            self.action_dtype.as_numpy_dtype,
        )
        return {
            OBSERVATION: obs.reshape((n,) + self.observation_shape).astype(obs_dtype),
            ACTION: act.reshape((n,) + self.action_shape).astype(act_dtype),
            REWARD: reward[:, 0],
            DISCOUNT: discount[:, 0],
            NEXT_OBSERVATION: next_obs.reshape((n,) + self.observation_shape).astype(obs_dtype),
        }

    # The n-step fields: what an n-step transition replaces in its first step's row.

    def reward(self, row: np.ndarray) -> float:
        """The reward of one row."""
        return float(row[self._reward_index])

    def discount(self, row: np.ndarray) -> float:
        """The discount of one row."""
        return float(row[self._reward_index + 1])

    def next_observations(self, rows: np.ndarray) -> np.ndarray:
        """The flat next observations of rows [..., width], as a view (no copy)."""
        return rows[..., self._reward_index + 2 :]

    def with_n_step_fields(
        self, row: np.ndarray, reward: float, discount: float, next_observation: np.ndarray
    ) -> np.ndarray:
        """A copy of `row` whose reward, discount and next observation are replaced."""
        out = np.array(row, dtype=np.float32, copy=True)
        out[self._reward_index] = reward
        out[self._reward_index + 1] = discount
        out[self._reward_index + 2 :] = np.ravel(next_observation)
        return out


def row_layout(specs: EnvSpecs) -> RowLayout:
    """The replay row layout of `specs`' environment."""
    return RowLayout(
        observation_shape=tuple(specs.observation.shape.as_list()),
        observation_dtype=tf.as_dtype(specs.observation.dtype),
        action_shape=tuple(specs.action.shape.as_list()),
        action_dtype=tf.as_dtype(specs.action.dtype),
    )


def pack_row(observation, action, reward, discount, next_observation) -> np.ndarray:
    """One transition as its flat float32 row (the layout's order needs no specs)."""
    return np.concatenate(
        (
            np.ravel(observation),
            np.ravel(action),
            (reward, discount),
            np.ravel(next_observation),
        ),
        dtype=np.float32,
    )


def pack_transition(transition: Mapping[str, np.ndarray]) -> np.ndarray:
    """One transition dict (keys `TRANSITION_FIELDS`) as its flat float32 row."""
    return pack_row(*(transition[name] for name in TRANSITION_FIELDS))


# --- table signatures -----------------------------------------------------------------

# Fields of the single item in the variable container table.
POLICY_VARIABLES = "policy_variables"
TRAIN_STEP = "train_step"
LEARNER_DONE = "learner_done"
# The learner's observation statistics; clip is inf when it does not normalize.
OBSERVATION_MEAN = "observation_mean"
OBSERVATION_STD = "observation_std"
OBSERVATION_CLIP = "observation_clip"


def transition_signature(
    specs: EnvSpecs, transitions_per_item: Optional[int] = None
) -> Dict[str, tf.TensorSpec]:
    """Signature of one replay item: K consecutive transitions as flat float32 rows.

    With `transitions_per_item=None` the leading dimension is left unknown: a
    signature that `signatures_match` accepts for a table of any K.
    """
    layout = row_layout(specs)
    shape = (transitions_per_item, layout.width)
    # The name (kept by the server) records the layout for error messages.
    return {TRANSITIONS: tf.TensorSpec(shape, tf.float32, layout.describe())}


def transitions_per_item_of(signature: object) -> int:
    """K of a replay table signature; 1 for tables without a transitions column."""
    if isinstance(signature, dict) and TRANSITIONS in signature:
        k = signature[TRANSITIONS].shape[0]
        if k is not None:
            return int(k)
    return 1


def variable_signature(specs: EnvSpecs, hparams: Hyperparams) -> Dict[str, object]:
    """Signature of the variable container item: policy weights, train_step, done
    flag and observation statistics (present whether or not the learner
    normalizes, so actors need not know; only the learner's setting counts).

    The policy weights' shapes follow the actor network's layer sizes, so a
    job built with other sizes than the server's does not match it.
    """
    policy = tuple(
        tf.TensorSpec(s.shape, s.dtype, f"{POLICY_VARIABLES}_{i}")
        for i, s in enumerate(policy_variable_specs(specs, hparams))
    )
    observation_shape = specs.observation.shape
    return {
        POLICY_VARIABLES: policy,
        TRAIN_STEP: tf.TensorSpec((), tf.int64, TRAIN_STEP),
        LEARNER_DONE: tf.TensorSpec((), tf.bool, LEARNER_DONE),
        OBSERVATION_MEAN: tf.TensorSpec(observation_shape, tf.float32, OBSERVATION_MEAN),
        OBSERVATION_STD: tf.TensorSpec(observation_shape, tf.float32, OBSERVATION_STD),
        OBSERVATION_CLIP: tf.TensorSpec((), tf.float32, OBSERVATION_CLIP),
    }


def describe_signature(signature: object) -> str:
    """A compact, readable form of a signature for error messages."""
    flat = tree.flatten_with_path(signature)
    parts = [
        f"{'/'.join(str(p) for p in path)}: {spec.dtype.name}{list(spec.shape)}"
        + (f" {spec.name}" if (spec.name or "").startswith(_ROWS_OF) else "")
        for path, spec in flat
    ]
    return "{" + ", ".join(parts) + "}"


def signatures_match(expected: object, actual: object) -> bool:
    """True when both signatures have the same structure, shapes and dtypes.

    A dimension `expected` leaves unknown (None) matches any size.
    """
    try:
        tf.nest.assert_same_structure(expected, actual)
    except (ValueError, TypeError):
        return False
    pairs = zip(tf.nest.flatten(expected), tf.nest.flatten(actual))
    return all(_shape_matches(a.shape, b.shape) and a.dtype == b.dtype for a, b in pairs)


def _shape_matches(expected: tf.TensorShape, actual: tf.TensorShape) -> bool:
    if expected.rank is None or actual.rank is None or expected.rank != actual.rank:
        return expected.rank == actual.rank
    return all(e is None or e == a for e, a in zip(expected.as_list(), actual.as_list()))


# --- tables ---------------------------------------------------------------------------


def shard_capacity_items(hparams: Hyperparams, num_shards: int = 1) -> int:
    """max_size of one shard's replay table: the capacity in items, split evenly."""
    return hparams.replay_capacity_items // num_shards


def shard_min_size_items(hparams: Hyperparams, num_shards: int = 1) -> int:
    """Items one shard must hold before it may be sampled: its share of the warm-up.

    Rounded up, so that the shards together wait for at least min_replay_items;
    and a job total of min_replay_items always leaves some shard sampleable.
    """
    return -(-hparams.min_replay_items // num_shards)


def shard_error_buffer(config: ServerConfig) -> float:
    """One shard's SampleToInsertRatio error buffer, in items.

    The configured buffer (in transitions) is divided by K and by the number of
    shards, but never below Reverb's floor of max(1, samples_per_insert).
    """
    hp = config.hparams
    floor = max(1.0, hp.samples_per_insert)
    return max(floor, config.error_buffer / hp.transitions_per_item / config.num_replay_shards)


def make_rate_limiter(config: ServerConfig) -> reverb.rate_limiters.RateLimiter:
    """MinSize by default; SampleToInsertRatio when samples_per_insert is set.

    Counts are in items of K transitions, and per shard (see the module
    docstring). samples_per_insert is the same in items as in transitions (a
    sample and an insert both move K transitions) and the same on every shard.
    """
    hp = config.hparams
    min_size = shard_min_size_items(hp, config.num_replay_shards)
    if hp.samples_per_insert is None:
        return reverb.rate_limiters.MinSize(min_size)
    return reverb.rate_limiters.SampleToInsertRatio(
        samples_per_insert=hp.samples_per_insert,
        min_size_to_sample=min_size,
        error_buffer=shard_error_buffer(config),
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


def make_tables(config: ServerConfig, env_specs: EnvSpecs) -> list:
    """The replay table, the variable container table and the max-priority table.

    Every shard has all three; the variable and max-priority tables are used
    only on the server that jobs name as their variable container (launchers
    pass shard 0). The max-priority table exists with or without prioritized
    replay, so replay checkpoints restore under either setting.
    """
    replay = reverb.Table(
        name=REPLAY_TABLE,
        sampler=replay_sampler(config.hparams),
        remover=reverb.selectors.Fifo(),
        max_size=shard_capacity_items(config.hparams, config.num_replay_shards),
        rate_limiter=make_rate_limiter(config),
        signature=transition_signature(env_specs, config.hparams.transitions_per_item),
    )
    variables = latest_value_table(VARIABLE_TABLE, variable_signature(env_specs, config.hparams))
    return [replay, variables, max_priority_table()]


def validate_server_config(config: ServerConfig) -> None:
    """Builds the rate limiter once so Reverb's own checks run before serving."""
    try:
        make_rate_limiter(config)
    except ValueError as e:
        raise ConfigError(f"Reverb rejects this rate limiter configuration: {e}") from e


# --- connecting and start-up checks ---------------------------------------------------


def connect(
    address: str,
    timeout_s: float,
    purpose: str,
    should_stop: Callable[[], bool] = lambda: False,
) -> reverb.Client:
    """Returns a client once the server at `address` answers.

    Waits with `retry.retry`'s backoff (capped at 5 s), logging what it waits
    for, and raises ServerUnreachableError after `timeout_s` seconds.
    """
    client = reverb.Client(address)
    waited = False

    def attempt(remaining_s: float) -> reverb.Client:
        client.server_info(timeout=max(1, min(5, int(remaining_s))))
        return client

    def log_wait(_: BaseException, remaining_s: float) -> None:
        nonlocal waited
        waited = True
        logging.info(
            "Waiting for the Reverb server at %s (%s); %.0f s left before giving up.",
            address,
            purpose,
            remaining_s,
        )

    try:
        retry(attempt, TRANSIENT_ERRORS, timeout_s, should_stop, on_retry=log_wait)
    except TRANSIENT_ERRORS as error:
        last_error = error
    else:
        if waited:
            logging.info("Reverb server at %s is up (%s).", address, purpose)
        return client
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
    if not signatures_match(expected, actual):
        raise SignatureMismatchError(
            f"{what} does not match the server's table {table!r}.\n"
            f"  this process: {describe_signature(expected)}\n"
            f"  server:       {describe_signature(actual)}\n"
            "Start every job with the same --env_name and network sizes "
            "(actor_fc_layer_params) as the server."
        )


def check_server_tables(
    replay_clients,
    variables_client: reverb.Client,
    specs: EnvSpecs,
    hparams: Hyperparams,
    who: str,
    replay_addresses: Optional[Sequence[str]] = None,
) -> None:
    """Refuses a job whose env specs, transitions_per_item or actor network sizes
    differ from what the server's tables were built for, naming both values.

    `replay_clients` is one client or one per replay shard (in the order of
    `replay_addresses`); with several shards each one's capacity is checked
    too (`check_shard_capacity`). Raises SignatureMismatchError; run it before
    the job writes or reads anything.
    """
    if isinstance(replay_clients, reverb.Client):
        replay_clients = [replay_clients]
    addresses = replay_addresses or [f"shard {i}" for i in range(len(replay_clients))]
    for client, address in zip(replay_clients, addresses):
        check_table_signature(
            client,
            REPLAY_TABLE,
            transition_signature(specs),  # any K: the row layout first
            f"The {who}'s transition spec",
        )
        check_transitions_per_item(client, hparams.transitions_per_item, who)
        check_replay_sampler(client, hparams, who)
        if len(replay_clients) > 1:
            check_shard_capacity(client, address, hparams, len(replay_clients))
    check_table_signature(
        variables_client,
        VARIABLE_TABLE,
        variable_signature(specs, hparams),
        f"The {who}'s policy variable spec",
    )
    if hparams.prioritized_replay:
        check_max_priority_table(variables_client)


def check_shard_capacity(
    client: reverb.Client, address: str, hparams: Hyperparams, num_shards: int
) -> None:
    """Refuses a shard whose replay table was sized for another number of shards.

    A server started with --num_replay_shards=S holds replay_capacity_items // S
    items; a job that lists a different number of replay addresses would
    split batches and warm-up wrongly, so it is refused naming both sides.
    """
    actual = int(table_info(client, REPLAY_TABLE).max_size)
    expected = shard_capacity_items(hparams, num_shards)
    if actual == expected:
        return
    started = [
        s for s in range(1, 65) if shard_capacity_items(hparams, s) == actual
    ]  # the shard counts that explain the server's size, for the message
    guess = f", as started with --num_replay_shards={started[0]}" if started else ""
    raise SignatureMismatchError(
        f"The replay server at {address} holds {actual} items per shard{guess}; this job "
        f"lists {num_shards} replay addresses, so with --replay_buffer_capacity="
        f"{hparams.replay_buffer_capacity} each shard should hold {expected}. Start every "
        "shard with --num_replay_shards equal to the number of addresses in "
        "--replay_buffer_server_address, and the same --replay_buffer_capacity."
    )


def open_trajectory_writer(
    client: reverb.Client, num_keep_alive_refs: int, timeout_s: int = 10
) -> reverb.TrajectoryWriter:
    """`client.trajectory_writer`, but an error, not a hang, when the server is gone.

    Reverb's writer first asks the server for its tables without a deadline, which
    never returns once the server is gone (a learner stopping after its server did
    hung there for hours); asking with one first turns that into DeadlineExceededError.
    """
    client.server_info(timeout=timeout_s)
    return client.trajectory_writer(num_keep_alive_refs=num_keep_alive_refs)


def table_info(client: reverb.Client, table: str, timeout_s: int = 5):
    """The TableInfo of `table` (size, inserts, samples)."""
    return client.server_info(timeout=timeout_s)[table]


def table_counts(client: reverb.Client, timeout_s: int = 5) -> Dict[str, schema_pb2.TableInfo]:
    """Every table's info as Reverb's TableInfo proto, its signature left encoded.

    `client.server_info` decodes each table's signature into TensorSpecs on every
    call, which costs about as much again as the answer itself (HalfCheetah's
    tables: `python benchmarks/pull_cost.py`). Sizes and counts, which the
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


# --- counts ---------------------------------------------------------------------------


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


# --- the writer -----------------------------------------------------------------------


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


# --- the dataset ----------------------------------------------------------------------


class SampleInfo(NamedTuple):
    """Where each sampled item of a batch came from, one entry per ITEM.

    `probability` is the item's probability within the whole replay: the
    shard's share of the batch times Reverb's probability within the shard.
    `replay_size` is the whole replay's size in items as seen from the item's
    shard (its table size divided by its share; exact when shares follow the
    shards' sizes). Importance weights are (replay_size * probability) ** -beta.
    """

    key: tf.Tensor  # uint64: Reverb's item key (unique within its shard)
    shard: tf.Tensor  # int32: index into the dataset's address list
    probability: tf.Tensor  # float64
    replay_size: tf.Tensor  # int64


def batch_shares(sizes: Sequence[int], min_sizes: Sequence[int], items: int) -> List[int]:
    """Items of a batch to sample from each shard, in proportion to its size.

    Shards below their `min_sizes` (not yet sampleable) get none, unless no
    shard is sampleable (then all count, and sampling waits as usual).
    Largest-remainder rounding: the shares sum to `items` exactly.
    """
    weights = [size if size >= low else 0 for size, low in zip(sizes, min_sizes)]
    if sum(weights) == 0:
        weights = [max(size, 1) for size in sizes]
    total = sum(weights)
    exact = [items * w / total for w in weights]
    shares = [int(x) for x in exact]
    by_remainder = sorted(range(len(exact)), key=lambda i: exact[i] - shares[i], reverse=True)
    for i in by_remainder[: items - sum(shares)]:
        shares[i] += 1
    return shares


def make_dataset(
    addresses,
    env_specs: EnvSpecs,
    batch_size: int,
    max_in_flight: Optional[int] = None,
    rate_limiter_timeout_ms: int = -1,
    transitions_per_item: Optional[int] = None,
    num_parallel_datasets: int = DEFAULT_PARALLEL_DATASETS,
    with_sample_info: bool = False,
    shard_ids: Optional[Sequence[int]] = None,
) -> tf.data.Dataset:
    """Batches of `batch_size` `Transition`s sampled uniformly from the replay.

    `addresses`: one host:port, or a sequence of them (one per replay shard).
    Samples batch_size / K items (K = `transitions_per_item`, read from the
    server's table when None; a given K is checked against the table's) from
    `num_parallel_datasets` interleaved Reverb streams per shard, then
    reshapes them to batch_size rows. With several shards each batch is the
    concatenation of per-shard sub-batches, sized in proportion to the
    shards' sizes when the dataset is built (`batch_shares`). `max_in_flight`
    is per stream, in items (default: one sub-batch's worth).

    With `rate_limiter_timeout_ms >= 0` the dataset ends when a table's rate
    limiter holds samples back that long (e.g. no actor is inserting), so a
    training loop regains control to check for stops, then makes a new one.
    With `with_sample_info` it yields `(Transition, SampleInfo)`; its `shard`
    is `shard_ids[i]` for `addresses[i]` (default i), so a learner sampling
    from some of its shards can name them by their index in the whole job.
    """
    addresses = [addresses] if isinstance(addresses, str) else list(addresses)
    shard_ids = list(range(len(addresses))) if shard_ids is None else list(shard_ids)
    if len(shard_ids) != len(addresses):
        raise ValueError(f"shard_ids {shard_ids} do not match the addresses {addresses}.")
    k = 0
    for address in addresses:
        k = _dataset_transitions_per_item(address, transitions_per_item, batch_size)
    layout = row_layout(env_specs)
    items_per_batch = batch_size // k
    signature = transition_signature(env_specs, k)
    if len(addresses) == 1 and not with_sample_info:
        # One server: the plain path, no zip and no per-item info.
        dataset = _item_streams(
            addresses[0],
            signature,
            max_in_flight or max(items_per_batch, 1),
            rate_limiter_timeout_ms,
            num_parallel_datasets,
        )
        # Whole ReplaySamples are batched (no per-item map: a per-item op costs
        # more CPU than Reverb's sampling itself), then the rows are split once.
        dataset = dataset.batch(items_per_batch, drop_remainder=True)
        dataset = dataset.map(
            lambda samples: items_to_transition(samples.data[TRANSITIONS], layout),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        return dataset.prefetch(tf.data.AUTOTUNE)
    parts = []
    for shard, items in enumerate(_current_shares(addresses, items_per_batch)):
        if items == 0:
            continue
        stream = _item_streams(
            addresses[shard],
            signature,
            max_in_flight or items,
            rate_limiter_timeout_ms,
            num_parallel_datasets,
        )
        share = items / items_per_batch
        parts.append(
            stream.batch(items, drop_remainder=True).map(
                functools.partial(_with_info, shard=shard_ids[shard], share=share)
            )
        )
    dataset = parts[0] if len(parts) == 1 else tf.data.Dataset.zip(tuple(parts)).map(_concat)

    def to_output(items: tf.Tensor, info: SampleInfo):
        transition = items_to_transition(items, layout)
        return (transition, info) if with_sample_info else transition

    dataset = dataset.map(to_output, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def _current_shares(addresses: Sequence[str], items_per_batch: int) -> List[int]:
    """`batch_shares` from the shards' current sizes and min sizes to sample."""
    infos = [table_info(reverb.Client(address), REPLAY_TABLE) for address in addresses]
    sizes = [int(info.current_size) for info in infos]
    min_sizes = [int(info.rate_limiter_info.min_size_to_sample) for info in infos]
    shares = batch_shares(sizes, min_sizes, items_per_batch)
    logging.info(
        "Sampling %s items per batch from the replay shards %s (sizes %s).",
        shares,
        list(addresses),
        sizes,
    )
    return shares


def _with_info(samples: reverb.ReplaySample, shard: int, share: float):
    """One shard's sub-batch: its items and their `SampleInfo` over the whole replay."""
    info = samples.info
    n = tf.shape(info.key)[0]
    replay_size = tf.cast(tf.round(tf.cast(info.table_size, tf.float64) / share), tf.int64)
    return samples.data[TRANSITIONS], SampleInfo(
        key=info.key,
        shard=tf.fill([n], tf.constant(shard, tf.int32)),
        probability=info.probability * share,
        replay_size=replay_size,
    )


def _concat(*parts):
    """Concatenates per-shard (items, SampleInfo) sub-batches into one batch."""
    items = tf.concat([part[0] for part in parts], axis=0)
    info = SampleInfo(*(tf.concat(list(field), axis=0) for field in zip(*(p[1] for p in parts))))
    return items, info


def stored_items(clients: Sequence[reverb.Client], timeout_s: int = 5) -> int:
    """Replay items held by all the reachable shards together (unreachable: 0)."""
    total = 0
    for client in clients:
        try:
            total += int(table_info(client, REPLAY_TABLE, timeout_s).current_size)
        except TRANSIENT_ERRORS:
            continue
    return total


def _dataset_transitions_per_item(
    address: str, transitions_per_item: Optional[int], batch_size: int
) -> int:
    """K of the server's table (checked against a given one), dividing `batch_size`."""
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
    return k


def _item_streams(
    address: str,
    signature: Mapping[str, tf.TensorSpec],
    in_flight: int,
    rate_limiter_timeout_ms: int,
    num_streams: int,
) -> tf.data.Dataset:
    """Replay items with `signature` from `num_streams` interleaved Reverb streams."""

    def stream(_) -> tf.data.Dataset:
        return reverb.TrajectoryDataset(
            server_address=address,
            table=REPLAY_TABLE,
            dtypes=tree.map_structure(lambda spec: spec.dtype, signature),
            shapes=tree.map_structure(lambda spec: spec.shape, signature),
            max_in_flight_samples_per_worker=in_flight,
            rate_limiter_timeout_ms=rate_limiter_timeout_ms,
        )

    if num_streams <= 1:
        return stream(0)
    return tf.data.Dataset.range(num_streams).interleave(
        stream,
        cycle_length=num_streams,
        num_parallel_calls=num_streams,
        deterministic=False,
    )


def items_to_transition(items: tf.Tensor, layout: RowLayout) -> trajectory.Transition:
    """A batch of replay items [N, K, width] as a `Transition` of N * K rows."""
    n, k = items.shape[0], items.shape[1]
    rows = n * k if n is not None and k is not None else -1  # keep the batch dim static
    return to_transition(tf.reshape(items, [rows, layout.width]), layout)


def to_transition(rows: tf.Tensor, layout: RowLayout) -> trajectory.Transition:
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


# --- prioritized replay ---------------------------------------------------------------
#
# With `Hyperparams.prioritized_replay` each shard's replay table samples items
# with probability p_i ** alpha / sum_k p_k ** alpha (Reverb's Prioritized
# selector, alpha = priority_exponent); the learner sets p_i from |TD error|
# (priorities.py) and weights the critic loss by importance weights
# (sac_learner.importance_weights: the SAC update imports no Reverb). New items
# enter at the largest priority the learner has set so far: the learner
# publishes it in a one-item table beside the variable container, which every
# server has whether or not it prioritizes, so that replay checkpoints written
# with either setting restore under the other (Reverb restores a checkpoint's
# tables with the sampler and signature they were written with, and refuses a
# checkpoint holding a table the server does not define).

MAX_PRIORITY_TABLE = "max_priority"
MAX_PRIORITY = "max_priority"
# The priority of new items before the learner has published one (Reverb's
# default insert priority, and what every item has without prioritized replay).
INITIAL_PRIORITY = 1.0


def replay_sampler(hparams: Hyperparams) -> reverb.selectors.Selector:
    """The replay table's sampler: Prioritized(priority_exponent) or Uniform."""
    if hparams.prioritized_replay:
        return reverb.selectors.Prioritized(hparams.priority_exponent)
    return reverb.selectors.Uniform()


def max_priority_signature() -> Dict[str, tf.TensorSpec]:
    """Signature of the max-priority item: one float64 scalar."""
    return {MAX_PRIORITY: tf.TensorSpec((), tf.float64, MAX_PRIORITY)}


def max_priority_table() -> reverb.Table:
    """The one-item table holding the largest priority the learner has set.

    Build it wherever the variable container table is built, with or without
    prioritized replay (see the section comment: checkpoints stay portable).
    """
    return latest_value_table(MAX_PRIORITY_TABLE, max_priority_signature())


def check_replay_sampler(client: reverb.Client, hparams: Hyperparams, who: str) -> None:
    """Refuses a job whose prioritized_replay setting differs from the server's table.

    A learner computing importance weights for a uniform table (or an actor
    publishing priorities nobody samples by) would train on something other
    than what it was asked for, silently. Raises SignatureMismatchError naming
    both sides; the server's sampler may come from a restored replay checkpoint.
    """
    options = table_info(client, REPLAY_TABLE).sampler_options
    kind = options.WhichOneof("distribution")
    server_prioritized = kind == "prioritized"
    if server_prioritized != hparams.prioritized_replay:
        server = (
            f"prioritized (priority_exponent={options.prioritized.priority_exponent:g})"
            if server_prioritized
            else f"{kind}"
        )
        raise SignatureMismatchError(
            f"The {who} runs with prioritized_replay={hparams.prioritized_replay}, but the "
            f"server's replay table {REPLAY_TABLE!r} samples {server}. Start every job with "
            f"the server's setting (--prioritized_replay={str(server_prioritized).lower()}); a "
            "server restored from a replay checkpoint keeps the sampler it was written with, "
            "so changing the setting needs a new root_dir or --replay_start_empty."
        )
    exponent = options.prioritized.priority_exponent
    if server_prioritized and abs(exponent - hparams.priority_exponent) > 1e-6:
        raise SignatureMismatchError(
            f"The {who} runs with priority_exponent={hparams.priority_exponent:g}, but the "
            f"server's replay table {REPLAY_TABLE!r} samples with priority_exponent="
            f"{exponent:g}: start every job with --priority_exponent={exponent:g}."
        )


def check_max_priority_table(client: reverb.Client) -> None:
    """Refuses a prioritized job on a variable server without the max-priority table."""
    infos = client.server_info()
    if MAX_PRIORITY_TABLE not in infos:
        raise SignatureMismatchError(
            f"Prioritized replay needs the table {MAX_PRIORITY_TABLE!r} beside the variable "
            f"container, and the server has only {sorted(infos)}: it runs an older "
            "sac-reverb-server. Restart it with this version."
        )
