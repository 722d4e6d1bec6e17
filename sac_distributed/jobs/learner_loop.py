"""The learner job's loop: feeds a SacLearner from Reverb and keeps its schedule.

The SAC update itself, its checkpoints and exports live in `sac_learner.py`.
This loop owns what makes it a distributed job: the Reverb dataset iterator
(one tf.function call runs up to `steps_per_call` updates over it, so Python
runs once per call rather than once per step), a watchdog that notices a lost
or restarted server while a call runs, reconnection, and the schedule of
periodic work between calls (`Every` triggers): checkpoints, SavedModel
exports, weight pushes to the variable container and summaries.

With several replay shards the iterator samples from every live shard
(`replay.make_dataset`). A shard that stops answering is dropped and the
iterator rebuilt over the others, without touching the variable container;
missing shards are pinged every `shard_probe_interval_s` (ClientConfig) between calls and taken
back once they answer (`shard_failover.py`, which the actors use too). Only a
lost variable container, or no shard left, leads to the full reconnect.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import reverb
import tensorflow as tf
from absl import logging

from sac_distributed import paths
from sac_distributed.algorithm.agent import EnvSpecs
from sac_distributed.algorithm.learners import make_learner
from sac_distributed.algorithm.sac_learner import Diagnostics, Losses
from sac_distributed.config import LearnerConfig
from sac_distributed.jobs.shard_failover import ShardFailover
from sac_distributed.replay import (
    REPLAY_TABLE,
    make_dataset,
    priorities,
    wait_for_table_size,
)
from sac_distributed.replay.connection import TRANSIENT_ERRORS, Connection
from sac_distributed.replay.variables import VariableContainer
from sac_distributed.results import last_evaluated_step
from sac_distributed.retry import retry
from sac_distributed.runtime import Metrics

# How long a sample may wait on the rate limiter before the loop regains
# control (to notice a stop signal) and starts a fresh iterator.
SAMPLE_TIMEOUT_MS = 2_000
# While a training call runs, the replay server is pinged this often.
HEALTH_CHECK_INTERVAL_S = 5.0
HEALTH_CHECK_TIMEOUT_S = 5
# A call of an already traced function that runs this long is stuck on a stream
# to a server that restarted between two health checks (samples wait at most
# SAMPLE_TIMEOUT_MS on the rate limiter, so a healthy call never gets close).
STALL_TIMEOUT_S = 120.0
# With wait_for_eval: how long the learner waits for one evaluation before it
# trains on without waiting for any more (the evaluator is gone or writes elsewhere).
EVAL_WAIT_TIMEOUT_S = 600.0


class ServerLostError(ConnectionError):
    """The replay server stopped answering while a training call was running."""

    def __init__(self, message: str, address: Optional[str] = None):
        super().__init__(message)
        self.address = address  # the server that stopped answering, if known


RECOVERABLE_ERRORS = (ServerLostError, tf.errors.UnavailableError) + TRANSIENT_ERRORS


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


class Watchdog:
    """Runs learner calls off the main thread while watching the replay server.

    A Reverb dataset whose server died blocks forever and cannot be
    interrupted, so each call runs in a daemon thread while the main thread
    pings the server; if the server stops answering, or an already traced
    call stalls, ServerLostError leaves that call behind (it holds only its
    own iterator) and the loop recovers with new functions and iterator.
    """

    def __init__(self, addresses: Sequence[str]):
        self.addresses = tuple(addresses)  # the replay shards the current iterator reads
        self._traced: set = set()  # names of functions that completed a call

    def forget_traces(self) -> None:
        """The next call of each function traces anew (tracing may take long)."""
        self._traced.clear()

    def call(self, name: str, fn: Callable, *args):
        """`fn(*args)`, guarded; `name` tells whether `fn` has traced yet."""
        result: dict = {}
        finished = threading.Event()

        def target() -> None:
            try:
                result["value"] = fn(*args)
            except BaseException as error:  # handed to the main thread below
                result["error"] = error
            finally:
                finished.set()

        threading.Thread(target=target, daemon=True, name="learner-call").start()
        started = time.monotonic()
        next_check = started + HEALTH_CHECK_INTERVAL_S
        traced = name in self._traced
        while not finished.wait(0.25):
            now = time.monotonic()
            if now >= next_check:
                self._check_server()
                next_check = now + HEALTH_CHECK_INTERVAL_S
            if traced and now - started > STALL_TIMEOUT_S:
                raise ServerLostError(
                    f"a training call made no progress for {STALL_TIMEOUT_S:.0f} s although "
                    "the server answers (it probably restarted)"
                )
        if "error" in result:
            raise result["error"]
        self._traced.add(name)
        return result["value"]

    def _check_server(self) -> None:
        for address in self.addresses:
            try:
                # A fresh client: a channel to a dead server backs off for minutes.
                reverb.Client(address).server_info(timeout=HEALTH_CHECK_TIMEOUT_S)
            except TRANSIENT_ERRORS as error:
                raise ServerLostError(
                    f"the Reverb server at {address} stopped answering during training ({error})",
                    address,
                ) from error


class LearnerLoop:
    """Trains a SacLearner on the Reverb replay, publishing, checkpointing and exporting.

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
        self._config = config
        self._check_owner = check_owner or (lambda: None)
        self._hp = config.hparams
        self._specs = specs
        self._connection = connection
        self._container = VariableContainer(connection.variables)
        self._metrics = metrics
        self._should_stop = should_stop
        self.learner = make_learner(  # SacLearner, or CrossQLearner for --algorithm=crossq
            specs,
            config.hparams,
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
        # Prioritized replay: sends |TD error| priorities to the shards, off the hot path.
        self._updater: Optional[priorities.PriorityUpdater] = None
        self._shards_in_use: Tuple[int, ...] = ()
        self._failover = ShardFailover(connection, config.client.shard_probe_interval_s)
        self._watchdog = Watchdog(connection.replay_addresses)
        self._last_losses: Optional[Losses] = None
        self._start = self._window = (time.monotonic(), self.step)
        self._wait_for_eval = self._hp.wait_for_eval
        # Local files first, so that a server loss skips none of them.
        self._schedule: Sequence[Every] = (
            Every(config.checkpoint_interval, self.learner.save_checkpoint),
            Every(self._hp.policy_save_interval, self.learner.export_policies),
            Every(config.variable_push_interval, self.publish),
            Every(config.summary_interval, self._summarize),
        ) + (
            (Every(self._hp.eval_interval, self._await_evaluation),) if self._wait_for_eval else ()
        )

    @property
    def step(self) -> int:
        return self.learner.train_step_numpy

    @property
    def shards_in_use(self) -> Tuple[int, ...]:
        """The replay shards the current iterator samples from (indices)."""
        return self._shards_in_use

    def run(self) -> LearnerResult:
        """Trains until num_iterations or a stop; returns where it stopped and why."""
        if not self.start():
            return self._finish("stop signal")
        self._start = self._window = (time.monotonic(), self.step)
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
                self._start_priority_updater()
                self.publish()
                if self.step < self._hp.num_iterations and not self._wait_for_data():
                    return False
                self._iterator = self._make_iterator()
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
                    self._on_sampling_timeout()
            except RECOVERABLE_ERRORS as error:
                if self._should_stop():
                    break
                self._recover(error)
        return self.step - first

    # --- the data feed -------------------------------------------------------------

    def _make_iterator(self):
        batch_size = self._hp.batch_size
        connection = self._connection
        shards = tuple(connection.live_shards())
        addresses = [connection.replay_addresses[i] for i in shards]
        # One server: the plain single-address dataset, exactly as before shards.
        source = addresses[0] if connection.num_shards == 1 else addresses

        def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
            per_replica = context.get_per_replica_batch_size(batch_size)
            return make_dataset(
                source,
                self._specs,
                per_replica,
                rate_limiter_timeout_ms=SAMPLE_TIMEOUT_MS,
                transitions_per_item=self._hp.transitions_per_item,  # checked on the server
                with_sample_info=self._hp.prioritized_replay,
                shard_ids=shards,
            )

        dataset = self.learner.strategy.distribute_datasets_from_function(dataset_fn)
        iterator = iter(dataset)
        self._watchdog.addresses = tuple(addresses)
        self._shards_in_use = shards
        return iterator

    def _wait_for_data(self) -> bool:
        """Polls (interruptibly) until the replay holds enough to sample from."""
        if self._connection.num_shards == 1:
            return wait_for_table_size(
                self._connection.replay, REPLAY_TABLE, self._hp.min_replay_items, self._should_stop
            )
        # Over several shards their items together count.
        return self._failover.wait_for_items(self._hp.min_replay_items, self._should_stop)

    def _train_once(self, target: int) -> None:
        """One training call up to the next event (or `target`), then that event's work."""
        step = self.step
        to_event = min(trigger.steps_to_next(step) for trigger in self._schedule)
        n = max(1, min(self._config.steps_per_call, to_event, target - step))
        if self._updater is None:
            self._last_losses = self._watchdog.call("train", self.learner.step, self._iterator, n)
        else:
            self._last_losses, update = self._watchdog.call(
                "train", self.learner.step_prioritized, self._iterator, n
            )
            self._updater.submit(*update)
        self._connection.made_progress()
        self._check_owner()
        for trigger in self._schedule:
            trigger(self.step)
        self._maybe_rejoin_shards()

    def _on_sampling_timeout(self) -> None:
        """The rate limiter held samples back: actors are slow, stopped or gone."""
        logging.log_every_n_seconds(
            logging.INFO,
            "No replay sample for %.0f s at train_step %d: the rate limiter is waiting "
            "for actors to insert. Retrying.",
            30,
            SAMPLE_TIMEOUT_MS / 1000,
            self.step,
        )
        self._iterator = self._make_iterator_when_ready()

    def _make_iterator_when_ready(self):
        """A new iterator; the first attempts after a restart may still see the old socket."""
        return retry(
            lambda _: self._make_iterator(),
            (tf.errors.UnavailableError,),
            self._config.client.connect_timeout_s,
            self._should_stop,
            initial_delay_s=0.5,
            max_delay_s=0.5,
        )

    # --- reconnects ------------------------------------------------------------------

    def _reconnect(self, error: Exception) -> None:
        self._connection.recover(error)
        self._container = VariableContainer(self._connection.variables)

    def _recover(self, error: Exception) -> None:
        """After a server loss: drop lost shards if others live, else reconnect all."""
        lost = self._failover.lost_shards(self._shards_in_use)
        if lost:
            self._drop_shards(lost, error)
            return
        self._reconnect(error)
        # The abandoned call may still hold the old functions: trace new ones.
        self.learner.retrace()
        self._watchdog.forget_traces()
        self._iterator = self._make_iterator_when_ready()
        self.publish()
        logging.info("Learner resumed at train_step %d after reconnecting.", self.step)

    def _drop_shards(self, lost: List[int], error: Exception) -> None:
        """Rebuilds the iterator over the remaining shards; the variable container stays."""
        self._failover.drop(lost, error)
        self.learner.retrace()  # the abandoned call may still hold the old functions
        self._watchdog.forget_traces()
        self._iterator = self._make_iterator_when_ready()
        logging.info(
            "Learner carries on at train_step %d, sampling from replay shards %s.",
            self.step,
            list(self._shards_in_use),
        )

    def _maybe_rejoin_shards(self) -> None:
        """Every shard probe interval: samples again from the missing shards that
        answer and hold enough items to be sampled (`ShardFailover.rejoin_sampleable`)."""
        if not self._failover.rejoin_sampleable():
            return
        self._iterator = self._make_iterator_when_ready()
        logging.info(
            "Learner samples from replay shards %s again, from train_step %d.",
            list(self._shards_in_use),
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
        if self._updater is not None:
            self._container.push_max_priority(self._updater.max_priority)
        return pushed

    def _await_evaluation(self) -> None:
        """With wait_for_eval: publishes, then waits for the evaluator's row of this step.

        Actors wait meanwhile too (the rate limiter holds their inserts), so the
        row's env_steps is where training stopped. After one wait of
        EVAL_WAIT_TIMEOUT_S without a row the learner stops waiting for good.
        """
        if not self._wait_for_eval:
            return
        self.publish()
        step, started = self.step, time.monotonic()
        results_path = paths.results_path(self._config.root_dir)
        while not self._should_stop():
            evaluated = last_evaluated_step(results_path)
            if evaluated is not None and evaluated >= step:
                logging.info(
                    "train_step %d evaluated; waited %.1f s.", step, time.monotonic() - started
                )
                return
            if time.monotonic() - started > EVAL_WAIT_TIMEOUT_S:
                logging.warning(
                    "No evaluation of train_step %d in %s after %.0f s: training on without "
                    "waiting for evaluations (is the evaluator running, on this root_dir?).",
                    step,
                    results_path,
                    EVAL_WAIT_TIMEOUT_S,
                )
                self._wait_for_eval = False
                return
            time.sleep(0.05)

    def _start_priority_updater(self) -> None:
        """With prioritized replay: the updater, its running max resumed from the
        published one (a restarted learner keeps inserting at the same level)."""
        if not self._hp.prioritized_replay or self._updater is not None:
            return
        published = self._container.pull_max_priority()
        self._updater = priorities.PriorityUpdater(
            self._connection.replay_addresses,
            initial_max_priority=priorities.initial_max_priority(published),
        )

    def _close_priority_updater(self) -> None:
        if self._updater is None:
            return
        not_sent = self._updater.close()
        logging.info(
            "Priority updates: %d sent, %d dropped (shard down), %d not sent at exit.",
            self._updater.sent,
            self._updater.dropped,
            not_sent,
        )

    def _summarize(self) -> None:
        t0, s0 = self._window
        now, step = time.monotonic(), self.step
        rate = (step - s0) / max(now - t0, 1e-9)
        try:
            diagnostics = self._watchdog.call(
                "diagnostics", self.learner.diagnostics, self._iterator
            )
        except tf.errors.OutOfRangeError:
            diagnostics = Diagnostics(float("nan"), float("nan"), self.learner.alpha)
            self._on_sampling_timeout()
        self._metrics.scalars(_scalars(self._last_losses, diagnostics, rate), step)
        logging.info(
            "train_step %d: %s; %s",
            step,
            _summary_line(self._last_losses, diagnostics, rate),
            progress(step, self._hp.num_iterations, rate),
        )
        self._window = (now, step)

    def _finish(self, reason: str) -> LearnerResult:
        self._check_owner()
        self.learner.save_checkpoint()
        self.learner.export_policies()
        self._publish_final(done=reason == "num_iterations reached")
        self._close_priority_updater()
        self._metrics.flush()
        t0, s0 = self._start
        rate = (self.step - s0) / max(time.monotonic() - t0, 1e-9)
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


def _scalars(losses: Losses, diagnostics: Diagnostics, rate: float) -> Dict[str, float]:
    return {
        "learner/entropy": diagnostics.entropy,
        "learner/q_value": diagnostics.q_value,
        "learner/loss": losses.total,
        "learner/critic_loss": losses.critic,
        "learner/actor_loss": losses.actor,
        "learner/alpha_loss": losses.alpha,
        "learner/alpha": diagnostics.alpha,
        "learner/steps_per_sec": rate,
    }


def _summary_line(losses: Losses, diagnostics: Diagnostics, rate: float) -> str:
    return (
        f"loss {losses.total:.3f} (critic {losses.critic:.3f}, actor {losses.actor:.3f}), "
        f"alpha {diagnostics.alpha:.4f}, entropy {diagnostics.entropy:.3f}, {rate:.1f} steps/s"
    )


def progress(done: int, total: int, rate: float) -> str:
    """'1000/8000 (12%), about 50 s left' at `rate` per second."""
    text = f"{done}/{total} ({100.0 * done / max(total, 1):.0f}%)"
    if done < total and rate > 0:
        text += f", about {format_duration((total - done) / rate)} left"
    return text


def format_duration(seconds: float) -> str:
    """3725 -> '1 h 2 min', 95 -> '1 min 35 s', 7.2 -> '7 s'."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{secs} s"
