"""The learner's data feed: a distributed iterator of replay batches over the live shards.

With one server it is the plain single-address dataset; with several it
samples from every live shard (`replay.make_dataset`), and the watchdog pings
exactly the shards it reads. Before training, `wait_for_data` polls until the
replay holds enough items to sample from.
"""

from __future__ import annotations

from typing import Callable, Iterator, Tuple

import tensorflow as tf
from absl import logging

from sac_distributed.config import Hyperparams
from sac_distributed.envs.specs import EnvSpecs
from sac_distributed.jobs.shard_failover import ShardFailover
from sac_distributed.jobs.watchdog import Watchdog
from sac_distributed.replay import REPLAY_TABLE, make_dataset, wait_for_table_size
from sac_distributed.replay.connection import Connection
from sac_distributed.retry import retry

# How long a sample may wait on the rate limiter before the loop regains
# control (to notice a stop signal) and starts a fresh iterator.
SAMPLE_TIMEOUT_MS = 2_000


class LearnerFeed:
    """Builds the learner's iterators over the live replay shards.

    Args:
      connection: the learner's connection (its live shards and replay client).
      specs: the environment's specs (the batches' layout).
      hparams: the run's hyperparameters (batch size, K, prioritized replay).
      strategy: the learner's tf.distribute strategy (one batch per replica).
      watchdog: told which shards each new iterator reads.
      failover: counts items over several shards while waiting for data.
      should_stop: True ends a wait.
      connect_timeout_s: how long a new iterator may take after a restart.
    """

    def __init__(
        self,
        connection: Connection,
        specs: EnvSpecs,
        hparams: Hyperparams,
        strategy: tf.distribute.Strategy,
        watchdog: Watchdog,
        failover: ShardFailover,
        should_stop: Callable[[], bool],
        connect_timeout_s: float,
    ):
        self._connection = connection
        self._specs = specs
        self._hp = hparams
        self._strategy = strategy
        self._watchdog = watchdog
        self._failover = failover
        self._should_stop = should_stop
        self._connect_timeout_s = connect_timeout_s
        self.shards_in_use: Tuple[int, ...] = ()  # the shards the newest iterator samples

    def make(self) -> Iterator:
        """A new iterator over the live shards."""
        connection = self._connection
        shards = tuple(connection.live_shards())
        addresses = [connection.replay_addresses[i] for i in shards]
        # One server: the plain single-address dataset, exactly as before shards.
        source = addresses[0] if connection.num_shards == 1 else addresses

        def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
            per_replica = context.get_per_replica_batch_size(self._hp.batch_size)
            return make_dataset(
                source,
                self._specs,
                per_replica,
                rate_limiter_timeout_ms=SAMPLE_TIMEOUT_MS,
                transitions_per_item=self._hp.transitions_per_item,  # checked on the server
                with_sample_info=self._hp.prioritized_replay,
                shard_ids=shards,
            )

        iterator = iter(self._strategy.distribute_datasets_from_function(dataset_fn))
        self._watchdog.addresses = tuple(addresses)
        self.shards_in_use = shards
        return iterator

    def make_when_ready(self) -> Iterator:
        """A new iterator; the first attempts after a restart may still see the old socket."""
        return retry(
            lambda _: self.make(),
            (tf.errors.UnavailableError,),
            self._connect_timeout_s,
            self._should_stop,
            initial_delay_s=0.5,
            max_delay_s=0.5,
        )

    def after_sampling_timeout(self, step: int) -> Iterator:
        """The rate limiter held samples back (actors slow, stopped or gone): a new iterator."""
        logging.log_every_n_seconds(
            logging.INFO,
            "No replay sample for %.0f s at train_step %d: the rate limiter is waiting "
            "for actors to insert. Retrying.",
            30,
            SAMPLE_TIMEOUT_MS / 1000,
            step,
        )
        return self.make_when_ready()

    def wait_for_data(self) -> bool:
        """Polls (interruptibly) until the replay holds enough to sample from."""
        if self._connection.num_shards == 1:
            return wait_for_table_size(
                self._connection.replay, REPLAY_TABLE, self._hp.min_replay_items, self._should_stop
            )
        # Over several shards their items together count.
        return self._failover.wait_for_items(self._hp.min_replay_items, self._should_stop)
