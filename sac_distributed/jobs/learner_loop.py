"""The learner job's loop: feeds a `Learner` from Reverb and keeps its schedule.

The update itself, its checkpoints and exports live in `algorithm/` (one folder
per algorithm, chosen by `algorithm.registry`; the loop calls the methods that
`algorithm.learner.Learner` declares).
This loop owns what makes it a distributed job: the Reverb dataset iterator
(learner_feed.py; one tf.function call runs up to `steps_per_call` updates
over it, so Python runs once per call rather than once per step), a watchdog
that notices a lost or restarted server while a call runs (watchdog.py),
reconnection (with spare traced functions swapped in: algorithm/traced.py),
and the schedule of periodic work between calls (`Every` triggers):
checkpoints, SavedModel exports, weight pushes to the variable container,
summaries (learner_summaries.py) and, with wait_for_eval, the wait for each
evaluation (eval_wait.py). Prioritized replay's part is
learner_priorities.py.

With several replay shards the iterator samples from every live shard
(`replay.make_dataset`). A shard that stops answering is dropped and the
iterator rebuilt over the others, without touching the variable container;
missing shards are pinged every `shard_probe_interval_s` (ClientConfig) between calls and taken
back once they answer (`shard_failover.py`, which the actors use too). Only a
lost variable container, or no shard left, leads to the full reconnect.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, List, Optional, Sequence, Tuple

import tensorflow as tf
from absl import logging

from sac_distributed import paths
from sac_distributed.algorithm import registry
from sac_distributed.algorithm.learner import Diagnostics, Learner, Losses
from sac_distributed.config import LearnerConfig
from sac_distributed.envs.specs import EnvSpecs
from sac_distributed.jobs.eval_wait import EvaluationWait
from sac_distributed.jobs.learner_feed import LearnerFeed
from sac_distributed.jobs.learner_priorities import LearnerPriorities
from sac_distributed.jobs.learner_summaries import LearnerSummaries
from sac_distributed.jobs.shard_failover import ShardFailover
from sac_distributed.jobs.watchdog import ServerLostError, Watchdog
from sac_distributed.replay.connection import TRANSIENT_ERRORS, Connection
from sac_distributed.replay.variables import VariableContainer
from sac_distributed.runtime import Metrics

RECOVERABLE_ERRORS = (ServerLostError, tf.errors.UnavailableError) + TRANSIENT_ERRORS
# Spare traced functions (algorithm/traced.py) cost a few CPU-seconds each time; runs
# are worth them from this train step on (shorter ones retrace on a reconnect instead).
SPARES_FROM_STEP = 1000


@dataclasses.dataclass
class LearnerResult:
    train_step: int
    steps_per_sec: float
    last_loss: float
    stop_reason: str


class Every:
    """A trigger: calls `fn` whenever train_step reaches a multiple of `interval`.

    TF-Agents' `IntervalTrigger` fires "interval steps after the last firing";
    this one fires on multiples and also says how far the next one is, so that
    one traced call can run exactly up to it.
    """

    def __init__(self, interval: int, fn: Callable[[], object]):
        self.interval = interval
        self._fn = fn

    def steps_to_next(self, step: int) -> int:
        return self.interval - step % self.interval

    def __call__(self, step: int) -> None:
        if step % self.interval == 0:
            self._fn()


class LearnerLoop:
    """Trains a Learner on the Reverb replay, publishing, checkpointing and exporting.

    `run()` is the whole job: publish the first weights, wait for warm
    replay, train to num_iterations (or a stop signal), then checkpoint,
    export and publish the final weights with the done flag. `start()` and
    `train(num_steps)` are its first two parts, for callers that time or
    interleave training (benchmarks).
    """

    def __init__(
        self,
        config: LearnerConfig,
        specs: EnvSpecs,
        strategy: tf.distribute.Strategy,
        connection: Connection,
        metrics: Metrics,
        should_stop: Callable[[], bool] = lambda: False,
        check_owner: Optional[Callable[[], None]] = None,
    ):
        """`check_owner` raises when another learner took the run over (ownership.py);
        it runs before every checkpoint, export and weight push."""
        self._check_owner = check_owner or (lambda: None)
        self._hp = hp = config.hparams
        self._connection = connection
        self._container = VariableContainer(connection.variables)
        self._metrics = metrics
        self._should_stop = should_stop
        self.learner: Learner = registry.make_learner(  # the one --algorithm names
            specs,
            hp,
            strategy,
            config.root_dir,
            seed=config.seed,
            max_checkpoints_to_keep=config.max_checkpoints_to_keep,
        )
        if self.step > 0:  # sac-launch shows this line: the console's sign of a resume
            logging.info(
                "Learner resumed from train_step %d (checkpoints in %s).",
                self.step,
                paths.checkpoint_dir(config.root_dir),
            )
        self._iterator = None
        self._steps_per_call = config.steps_per_call
        self._priorities = LearnerPriorities(
            hp.prioritized_replay, connection.replay_addresses, self.learner
        )
        self._failover = ShardFailover(connection, config.client.shard_probe_interval_s)
        self._watchdog = Watchdog(connection.replay_addresses)
        self._feed = LearnerFeed(
            connection,
            specs,
            hp,
            strategy,
            self._watchdog,
            self._failover,
            should_stop,
            config.client.connect_timeout_s,
        )
        self._last_losses: Optional[Losses] = None
        self._summaries = LearnerSummaries(metrics, hp.num_iterations, self.step)
        self._eval_wait = EvaluationWait(config.root_dir, self.publish, should_stop)
        # Local files first, so that a server loss skips none of them.
        self._schedule: Sequence[Every] = (
            Every(config.checkpoint_interval, self.learner.save_checkpoint),
            Every(hp.policy_save_interval, self.learner.export_policies),
            Every(config.variable_push_interval, self.publish),
            Every(config.summary_interval, self._summarize),
            Every(config.summary_interval, self._trace_spares),
        ) + (
            (Every(hp.eval_interval, lambda: self._eval_wait(self.step)),)
            if hp.wait_for_eval
            else ()
        )

    @property
    def step(self) -> int:
        return self.learner.train_step_numpy

    @property
    def shards_in_use(self) -> Tuple[int, ...]:
        """The replay shards the current iterator samples from (indices)."""
        return self._feed.shards_in_use

    def run(self) -> LearnerResult:
        """Trains until num_iterations or a stop; returns where it stopped and why."""
        if not self.start():
            return self._finish("stop signal")
        self._summaries.restart(self.step)
        self.train(self._hp.num_iterations - self.step)
        if self.step >= self._hp.num_iterations:
            return self._finish("num_iterations reached")
        return self._finish("stop signal")

    def start(self) -> bool:
        """Publishes the first weights and waits for warm replay; False if stopped.

        Reconnects like the training loop does if the server goes away meanwhile.
        """
        while True:
            try:
                self._priorities.start(self._container)
                self.publish()
                if self.step < self._hp.num_iterations and not self._feed.wait_for_data():
                    return False
                self._iterator = self._feed.make()
                return True
            except RECOVERABLE_ERRORS as error:
                if self._should_stop():
                    return False
                self._reconnect(error)

    def train(self, num_steps: int) -> int:
        """Trains `num_steps` more steps on the schedule, or until a stop signal.

        Sampling timeouts and lost servers are handled as in `run()`. Returns
        the steps done. Call `start()` once first.
        """
        first = self.step
        target = first + num_steps
        while self.step < target and not self._should_stop():
            try:
                try:
                    self._train_once(target)
                except tf.errors.OutOfRangeError:
                    # Rebuilding the iterator reads the shards' sizes: a loss shows here too.
                    self._iterator = self._feed.after_sampling_timeout(self.step)
            except RECOVERABLE_ERRORS as error:
                if self._should_stop():
                    break
                self._recover(error)
        return self.step - first

    def _train_once(self, target: int) -> None:
        """One training call up to the next event (or `target`), then that event's work."""
        step = self.step
        to_event = min(trigger.steps_to_next(step) for trigger in self._schedule)
        n = max(1, min(self._steps_per_call, to_event, target - step))
        self._last_losses = self._priorities.train(
            self._watchdog.call, self.learner, self._iterator, n
        )
        self._connection.made_progress()
        self._summaries.trained(self.step)
        self._check_owner()
        for trigger in self._schedule:
            trigger(self.step)
        self._maybe_rejoin_shards()

    # --- reconnects ------------------------------------------------------------------

    def _reconnect(self, error: Exception) -> None:
        self._container = None  # its client must go before the new ones come (connection.py)
        self._connection.recover(error)
        self._container = VariableContainer(self._connection.variables)

    def _recover(self, error: Exception) -> None:
        """After a server loss: drop lost shards if others live, else reconnect all."""
        lost = self._failover.lost_shards(self.shards_in_use)
        if lost:
            self._drop_shards(lost, error)
            return
        self._iterator = None  # its dataset's client goes before the reconnect
        how = "update traced ahead" if self._forget_traces() else "the update traces again"
        self._reconnect(error)
        t0 = time.monotonic()
        self._iterator = self._feed.make_when_ready()
        t1 = time.monotonic()
        self.publish()
        self._summaries.resumed(self.step, how, t1 - t0, time.monotonic() - t1)

    def _forget_traces(self) -> bool:
        """New functions for those an abandoned call may run; True if traced ahead."""
        self._watchdog.forget_traces()
        return self.learner.retrace()

    def _trace_spares(self) -> None:
        """At a summary (both functions have run by then), spares for the next reconnect."""
        ready = self._iterator is None or self.learner.spares_ready
        if SPARES_FROM_STEP <= self.step < self._hp.num_iterations and not ready:
            self.learner.trace_spares(self._iterator)

    def _drop_shards(self, lost: List[int], error: Exception) -> None:
        """Rebuilds the iterator over the remaining shards; the variable container stays."""
        self._failover.drop(lost, error)
        self._forget_traces()  # an abandoned call may still run the old functions
        self._iterator = self._feed.make_when_ready()
        logging.info(
            "Learner carries on at train_step %d, sampling from replay shards %s.",
            self.step,
            list(self.shards_in_use),
        )

    def _maybe_rejoin_shards(self) -> None:
        """Every shard probe interval: samples again from the missing shards that
        answer and hold enough items to be sampled (`ShardFailover.rejoin_sampleable`)."""
        if not self._failover.rejoin_sampleable():
            return
        self._iterator = self._feed.make_when_ready()
        logging.info(
            "Learner samples from replay shards %s again, from train_step %d.",
            list(self.shards_in_use),
            self.step,
        )

    # --- scheduled work --------------------------------------------------------------

    def publish(self, done: bool = False) -> int:
        """Pushes weights, train_step and observation statistics to the container."""
        variables = self.learner.variables()
        pushed = self._container.push(
            variables.policy_weights,
            variables.train_step,
            learner_done=done,
            normalization=variables.normalization,
        )
        self._priorities.publish(self._container)
        return pushed

    def _summarize(self) -> None:
        try:
            diagnostics = self._watchdog.call(
                "diagnostics", self.learner.diagnostics, self._iterator
            )
        except tf.errors.OutOfRangeError:
            diagnostics = Diagnostics(float("nan"), float("nan"), self.learner.alpha)
            self._iterator = self._feed.after_sampling_timeout(self.step)
        self._summaries.write(self.step, self._last_losses, diagnostics)

    def _finish(self, reason: str) -> LearnerResult:
        self._check_owner()
        self.learner.save_checkpoint()
        self.learner.export_policies()
        self._publish_final(done=reason == "num_iterations reached")
        self._priorities.close()
        self._metrics.flush()
        rate = self._summaries.overall_rate(self.step)
        logging.info("Learner stopped at train_step %d: %s.", self.step, reason)
        last_loss = self._last_losses.total if self._last_losses else float("nan")
        return LearnerResult(self.step, rate, last_loss, reason)

    def _publish_final(self, done: bool) -> None:
        """The last push (with the done flag actors wait for), reconnecting once if needed."""
        try:
            self.publish(done=done)
        except RECOVERABLE_ERRORS as error:
            if self._should_stop():
                logging.warning("Could not publish the final weights while stopping: %s", error)
                return
            self._reconnect(error)
            self.publish(done=done)
