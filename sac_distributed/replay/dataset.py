"""The learner's dataset: batches of `Transition`s sampled from the replay shards."""

from __future__ import annotations

import functools
from typing import Callable, List, Mapping, NamedTuple, Optional, Sequence

import reverb
import tensorflow as tf
import tree
from absl import logging
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts

from sac_distributed.envs.specs import EnvSpecs
from sac_distributed.replay.checks import check_transitions_per_item
from sac_distributed.replay.counts import table_info, table_transitions_per_item
from sac_distributed.replay.frames import frame_layout
from sac_distributed.replay.layout import TRANSITIONS, RowLayout, row_layout
from sac_distributed.replay.signatures import REPLAY_TABLE, frame_n_step_of, transition_signature

# Interleaved TrajectoryDatasets per learner input pipeline. On 2 cores one
# stream costs the least CPU per batch (~0.6 ms for 256 HalfCheetah transitions
# at K=8, against ~0.9 ms with two) and still delivers >1000 batches/s, ten
# times what the learner consumes; the CPU it takes is what training loses.
DEFAULT_PARALLEL_DATASETS = 1


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
    n_step = _frame_n_step(addresses[0], env_specs)
    to_transition_fn = _item_converter(env_specs, n_step)
    items_per_batch = batch_size // k
    signature = transition_signature(env_specs, k, n_step)
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
            lambda samples: to_transition_fn(samples.data),
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
        transition = to_transition_fn(items)
        return (transition, info) if with_sample_info else transition

    dataset = dataset.map(to_output, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def _frame_n_step(address: str, env_specs: EnvSpecs) -> int:
    """n of a pixel replay table's n-step items (read from its signature); 1 for rows,
    which fold n-step returns in place."""
    if not env_specs.is_image:
        return 1
    return frame_n_step_of(table_info(reverb.Client(address), REPLAY_TABLE).signature, env_specs)


def _item_converter(
    env_specs: EnvSpecs, n_step: int = 1
) -> Callable[[Mapping[str, tf.Tensor]], object]:
    """What turns a batch of sampled items' columns into a `Transition`: rows for
    vector observations, stored frames for images (frames.py)."""
    if env_specs.is_image:
        return frame_layout(env_specs, n_step).to_transition
    layout = row_layout(env_specs)
    return lambda data: items_to_transition(data[TRANSITIONS], layout)


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
    return samples.data, SampleInfo(
        key=info.key,
        shard=tf.fill([n], tf.constant(shard, tf.int32)),
        probability=info.probability * share,
        replay_size=replay_size,
    )


def _concat(*parts):
    """Concatenates per-shard (items, SampleInfo) sub-batches into one batch."""
    items = tf.nest.map_structure(
        lambda *columns: tf.concat(columns, axis=0), *(part[0] for part in parts)
    )
    info = SampleInfo(*(tf.concat(list(field), axis=0) for field in zip(*(p[1] for p in parts))))
    return items, info


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
