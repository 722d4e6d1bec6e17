"""The server's tables: replay, variable container, max priority; shard sizing.

Table sizes are counted in items; the hyperparameters count transitions and
are converted here (capacity / K, min_replay_size / K).

Sharding. The replay may be split over S ordinary sac-reverb-servers
(`--num_replay_shards=S --replay_shard=i`; jobs list all S addresses in
`--replay_buffer_server_address`). Shard i holds capacity / S items
(`shard_capacity_items`), may be sampled once it holds ceil(min / S) items
(`shard_min_size_items`), and keeps its own replay checkpoints. Each actor
writes to one shard; the learner's batch is the concatenation of per-shard
sub-batches sized in proportion to the shards' sizes (`dataset.batch_shares`).
The rate limiter keeps its meaning over the whole job because every shard
enforces the same samples_per_insert on its own items: with sampled_s <=
spi * inserted_s + buffer_s on every shard, summing gives sampled <= spi *
inserted + buffer for the job (and likewise from below), with the error
buffer split S ways (`shard_error_buffer`). With actors spread evenly over
the shards, their sizes and insert rates match the learner's shares, so no
shard's limiter holds the others back; a shard with fewer writers paces the
learner down to its own insert rate, which is what the ratio asks for.

Prioritized replay. With `Hyperparams.prioritized_replay` each shard's replay
table samples items with probability p_i ** alpha / sum_k p_k ** alpha
(Reverb's Prioritized selector, alpha = priority_exponent); the learner sets
p_i from |TD error| (priorities.py) and weights the critic loss by importance
weights (algorithm/priorities.py: the algorithms import no Reverb).
New items enter at the largest priority the learner has set so far: the
learner publishes it in a one-item table beside the variable container, which
every server has whether or not it prioritizes, so that replay checkpoints
written with either setting restore under the other (Reverb restores a
checkpoint's tables with the sampler and signature they were written with,
and refuses a checkpoint holding a table the server does not define).
"""

from __future__ import annotations

import reverb

from sac_distributed.config import ConfigError, Hyperparams, ServerConfig
from sac_distributed.envs.specs import EnvSpecs
from sac_distributed.replay.signatures import (
    MAX_PRIORITY_TABLE,
    REPLAY_TABLE,
    VARIABLE_TABLE,
    max_priority_signature,
    transition_signature,
    variable_signature,
)

# The priority of new items before the learner has published one (Reverb's
# default insert priority, and what every item has without prioritized replay).
INITIAL_PRIORITY = 1.0


def replay_sampler(hparams: Hyperparams) -> reverb.selectors.Selector:
    """The replay table's sampler: Prioritized(priority_exponent) or Uniform."""
    if hparams.prioritized_replay:
        return reverb.selectors.Prioritized(hparams.priority_exponent)
    return reverb.selectors.Uniform()


def max_priority_table() -> reverb.Table:
    """The one-item table holding the largest priority the learner has set.

    Build it wherever the variable container table is built, with or without
    prioritized replay (see the module docstring: checkpoints stay portable).
    """
    return latest_value_table(MAX_PRIORITY_TABLE, max_priority_signature())


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
        signature=transition_signature(
            env_specs, config.hparams.transitions_per_item, config.hparams.n_step
        ),
    )
    variables = latest_value_table(VARIABLE_TABLE, variable_signature(env_specs, config.hparams))
    return [replay, variables, max_priority_table()]


def validate_server_config(config: ServerConfig) -> None:
    """Builds the rate limiter once so Reverb's own checks run before serving."""
    try:
        make_rate_limiter(config)
    except ValueError as e:
        raise ConfigError(f"Reverb rejects this rate limiter configuration: {e}") from e
