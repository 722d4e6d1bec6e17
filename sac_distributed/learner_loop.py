"""The learner: trains SacAgent on replay samples under a tf.distribute strategy.

One tf.function call runs up to `steps_per_call` SGD steps over the replay
iterator, so Python runs once per call rather than once per step. Between
calls the loop does the periodic work: pushing weights to the variable
container, TensorBoard summaries, checkpoints and SavedModel exports.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import threading
import time
from typing import Callable, Dict, List, Optional

import numpy as np
import reverb
import tensorflow as tf
from absl import logging
from tf_agents.policies import greedy_policy, policy_saver

from sac_distributed import agent as agent_lib
from sac_distributed import paths
from sac_distributed.agent import EnvSpecs
from sac_distributed.config import LearnerConfig
from sac_distributed.connection import TRANSIENT_ERRORS, Connection
from sac_distributed.errors import CheckpointError, NonFiniteLossError
from sac_distributed.policy import ObservationNormalization
from sac_distributed.replay import REPLAY_TABLE, make_dataset, wait_for_table_size
from sac_distributed.runtime import Metrics, replace_dir
from sac_distributed.variables import VariableContainer

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


class ServerLostError(ConnectionError):
    """The replay server stopped answering while a training call was running."""


RECOVERABLE_ERRORS = (ServerLostError, tf.errors.UnavailableError) + TRANSIENT_ERRORS


@dataclasses.dataclass
class LearnerResult:
    train_step: int
    steps_per_sec: float
    last_loss: float
    stop_reason: str


class LearnerLoop:
    """Owns the agent, its checkpoints and exports, and the training loop."""

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
        self._strategy = strategy
        self._connection = connection
        self._container = VariableContainer(connection.variables)
        self._metrics = metrics
        self._should_stop = should_stop
        if config.seed is not None:
            tf.keras.utils.set_random_seed(config.seed)  # the same initial weights every run
        with strategy.scope():
            self.train_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
            self.normalizer = agent_lib.make_normalizer(specs, self._hp)
            self.agent = agent_lib.make_agent(specs, self._hp, self.train_step, self.normalizer)
            self._savers = self._make_savers()
        self._policy_variables = agent_lib.policy_variables(self.agent)
        tracked = {"normalizer": self.normalizer} if self.normalizer is not None else {}
        checkpoint = tf.train.Checkpoint(agent=self.agent, train_step=self.train_step, **tracked)
        # TensorFlow ignores an unparsable index file; _restore then scans the directory.
        self._checkpoints = tf.train.CheckpointManager(
            checkpoint,
            paths.checkpoint_dir(config.root_dir),
            max_to_keep=config.max_checkpoints_to_keep,
            checkpoint_name=paths.CHECKPOINT_PREFIX,
        )
        self._restore()
        self._specs = specs
        self._iterator = None
        self._train_fn = _function(self._train_steps)
        self._diagnostics_fn = _function(self._diagnostics)
        self._last_saved_policy_step = -1
        self._traced: set = set()  # functions that completed a call (tracing is slow)
        self._last_loss = float("nan")
        self._start = self._window = (time.monotonic(), self.step)

    @property
    def step(self) -> int:
        return int(self.train_step.numpy())

    # --- setup -------------------------------------------------------------------

    def _make_savers(self) -> Dict[str, policy_saver.PolicySaver]:
        policies = {
            "policy": self.agent.policy,
            "collect_policy": self.agent.collect_policy,
            "greedy_policy": greedy_policy.GreedyPolicy(self.agent.policy),
        }
        return {
            name: policy_saver.PolicySaver(p, batch_size=None, train_step=self.train_step)
            for name, p in policies.items()
        }

    def _restore(self) -> None:
        """Restores the newest readable checkpoint, falling back past damaged ones."""
        candidates = _checkpoints_newest_first(self._checkpoints)
        if not candidates:
            logging.info("No checkpoint in %s: starting from scratch.", self._checkpoints.directory)
            return
        failures = []
        for path in candidates:
            self._check_normalization_matches(path)
            try:
                self._checkpoints.checkpoint.restore(path).assert_existing_objects_matched()
            except Exception as error:  # any unreadable file; an older one restores in full
                reason = str(error).splitlines()[0][:300]
                if _SHAPE_MISMATCH in reason:
                    raise _other_networks_error(path, reason) from None
                failures.append(f"{path}: {type(error).__name__}: {reason}")
                logging.warning(
                    "Checkpoint %s is unreadable (%s); trying an older one.", path, reason
                )
                continue
            if failures:
                logging.warning(
                    "Fell back to %s after %d unreadable checkpoint(s).", path, len(failures)
                )
            logging.info("Restored %s (train_step=%d).", path, self.step)
            return
        raise CheckpointError(
            f"None of the checkpoints in {self._checkpoints.directory} could be read:\n  "
            + "\n  ".join(failures)
            + "\nMove the directory aside to start from scratch, or restore it from a backup."
        )

    def _check_normalization_matches(self, path: str) -> None:
        """Refuses a checkpoint trained with the other normalize_observations setting.

        Restoring would succeed either way (unused values are ignored) and give
        weights that expect other inputs than they will get.
        """
        try:
            normalized = _has_normalizer(path)
        except Exception:  # an unreadable index: restore() reports it, then falls back
            return
        if normalized == (self.normalizer is not None):
            return
        raise CheckpointError(
            f"The checkpoint {path} was written with normalize_observations={normalized}, "
            f"but this learner runs with normalize_observations={not normalized}: its "
            f"weights expect {'normalized' if normalized else 'raw'} observations. Pass "
            f"--normalize_observations={str(normalized).lower()}, or use a new root_dir."
        )

    def _make_iterator(self):
        batch_size = self._hp.batch_size
        address = self._config.client.replay_buffer_server_address

        def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
            per_replica = context.get_per_replica_batch_size(batch_size)
            return make_dataset(
                address, self._specs, per_replica, rate_limiter_timeout_ms=SAMPLE_TIMEOUT_MS
            )

        dataset = self._strategy.distribute_datasets_from_function(dataset_fn)
        return iter(dataset)

    # --- the update --------------------------------------------------------------

    def _train_steps(self, iterator, num_steps: tf.Tensor):
        """Runs `num_steps` SAC updates; returns the last step's losses.

        Traced without autograph (see `_function`), so the loop is an explicit
        tf.while_loop and the update is SacAgent's `_train`: its public `train`
        wraps it in an autograph-converted function of its own.
        """

        def replica_step(experience):
            if self.normalizer is not None:
                self.normalizer.update(experience.time_step.observation)
            info = self.agent._train(experience, weights=None)  # noqa: SLF001
            extra = info.extra
            return info.loss, extra.critic_loss, extra.actor_loss, extra.alpha_loss

        def body(i, _losses):
            per_replica = self._strategy.run(replica_step, args=(next(iterator),))
            total = tf.distribute.ReduceOp.SUM
            losses = tuple(self._strategy.reduce(total, x, axis=None) for x in per_replica)
            return i + 1, losses

        zero = tf.constant(0.0)
        start = (tf.constant(0, num_steps.dtype), (zero, zero, zero, zero))
        _, losses = tf.while_loop(lambda i, _: i < num_steps, body, start)
        return losses

    def _diagnostics(self, iterator):
        """Policy entropy estimate -E[log pi(a|s)] and mean Q1(s, a ~ pi) on one batch."""

        def replica_fn(experience):
            time_steps = experience.time_step
            # SacAgent's own sampler, so the estimate matches what the loss sees.
            actions, log_pi = self.agent._actions_and_log_probs(time_steps)  # noqa: SLF001
            q_values, _ = self.agent._critic_network_1(  # noqa: SLF001
                (time_steps.observation, actions), time_steps.step_type
            )
            return -tf.reduce_mean(log_pi), tf.reduce_mean(q_values)

        entropy, q_value = self._strategy.run(replica_fn, args=(next(iterator),))
        mean = tf.distribute.ReduceOp.MEAN
        return (
            self._strategy.reduce(mean, entropy, axis=None),
            self._strategy.reduce(mean, q_value, axis=None),
        )

    # --- the loop ----------------------------------------------------------------

    def run(self) -> LearnerResult:
        """Trains until num_iterations or a stop; returns where it stopped and why."""
        if not self._start_up():
            return self._finish("stop signal")
        self._start = (time.monotonic(), self.step)
        self._window = self._start
        while self.step < self._hp.num_iterations:
            if self._should_stop():
                return self._finish("stop signal")
            try:
                self._train_once()
            except tf.errors.OutOfRangeError:
                self._on_sampling_timeout()
            except RECOVERABLE_ERRORS as error:
                if self._should_stop():
                    return self._finish("stop signal")
                self._recover(error)
        return self._finish("num_iterations reached")

    def _start_up(self) -> bool:
        """Publishes the first weights and waits for warm replay; False if stopped.

        Reconnects like the training loop does if the server goes away meanwhile.
        """
        while True:
            try:
                self.publish()
                if self.step < self._hp.num_iterations and not self._wait_for_data():
                    return False
                self._iterator = self._make_iterator()
                return True
            except RECOVERABLE_ERRORS as error:
                if self._should_stop():
                    return False
                self._connection.recover(error)
                self._container = VariableContainer(self._connection.variables)

    def _wait_for_data(self) -> bool:
        """Polls (interruptibly) until the replay holds enough to sample from."""
        return wait_for_table_size(
            self._connection.replay, REPLAY_TABLE, self._hp.min_replay_items, self._should_stop
        )

    def _train_once(self) -> None:
        """One tf.function call up to the next event, then that event's work."""
        n = self._steps_until_next_event()
        try:
            outputs = self._guarded(self._train_fn, self._iterator, tf.constant(n))
        except tf.errors.InvalidArgumentError as error:
            # SacAgent checks its losses with tf.debugging.check_numerics.
            if "inf or nan" not in error.message:
                raise
            self._raise_non_finite(error.message.splitlines()[0])
        losses = [float(x) for x in outputs]
        self._connection.made_progress()
        self._last_loss = losses[0]
        self._check_finite(losses)
        self._periodic(losses)

    def _guarded(self, fn, *args):
        """Runs `fn(*args)` in a daemon thread, watching the replay server meanwhile.

        A Reverb dataset whose server died blocks forever and cannot be
        interrupted, so the call runs off the main thread; if the server stops
        answering, ServerLostError leaves that call behind (it holds only its
        own iterator) and the loop recovers with a new function and iterator.
        """
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
        traced = fn in self._traced
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
        self._traced.add(fn)
        return result["value"]

    def _check_server(self) -> None:
        address = self._config.client.replay_buffer_server_address
        try:
            # A fresh client: a channel to a dead server backs off for minutes.
            reverb.Client(address).server_info(timeout=HEALTH_CHECK_TIMEOUT_S)
        except TRANSIENT_ERRORS as error:
            raise ServerLostError(
                f"the Reverb server at {address} stopped answering during training ({error})"
            ) from error

    def _recover(self, error: Exception) -> None:
        """After a server loss: fresh clients, function and iterator; refill weights."""
        self._connection.recover(error)
        self._container = VariableContainer(self._connection.variables)
        # The abandoned call may still hold the old functions: trace new ones.
        self._train_fn = _function(self._train_steps)
        self._diagnostics_fn = _function(self._diagnostics)
        self._iterator = self._make_iterator_when_ready()
        self.publish()
        logging.info("Learner resumed at train_step %d after reconnecting.", self.step)

    def _make_iterator_when_ready(self):
        """A new iterator; the first attempts after a restart may still see the old socket."""
        deadline = time.monotonic() + self._config.client.connect_timeout_s
        while True:
            try:
                return self._make_iterator()
            except tf.errors.UnavailableError:
                if time.monotonic() > deadline or self._should_stop():
                    raise
                time.sleep(0.5)

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

    def _steps_until_next_event(self) -> int:
        step = self.step
        intervals = (
            self._config.variable_push_interval,
            self._config.summary_interval,
            self._config.checkpoint_interval,
            self._hp.policy_save_interval,
        )
        to_event = min(i - step % i for i in intervals)
        return max(1, min(self._config.steps_per_call, to_event, self._hp.num_iterations - step))

    def _check_finite(self, losses) -> None:
        if not all(np.isfinite(losses)):
            self._raise_non_finite(f"total, critic, actor, alpha losses = {losses}")

    def _raise_non_finite(self, detail: str) -> None:
        kept = self._checkpoints.latest_checkpoint or "none yet"
        raise NonFiniteLossError(
            f"SAC loss became NaN or inf at train_step {self.step} ({detail}). Nothing from "
            f"this step was saved; the last good checkpoint ({kept}) is kept. Lower the "
            "learning rates or reward_scale_factor, or check the environment's rewards, "
            "then restart to resume from it."
        )

    def _periodic(self, losses) -> None:
        """Event work at this step; local files first, so a server loss skips none."""
        self._check_owner()
        step = self.step
        if step % self._config.checkpoint_interval == 0:
            self.save_checkpoint()
        if step % self._hp.policy_save_interval == 0:
            self.export_policies()
        if step % self._config.variable_push_interval == 0:
            self.publish()
        if step % self._config.summary_interval == 0:
            self._summarize(losses)

    def _summarize(self, losses) -> None:
        t0, s0 = self._window
        now, step = time.monotonic(), self.step
        rate = (step - s0) / max(now - t0, 1e-9)
        total, critic, actor, alpha_loss = losses
        alpha = float(tf.exp(self.agent._log_alpha))  # noqa: SLF001
        try:
            outputs = self._guarded(self._diagnostics_fn, self._iterator)
            entropy, q_value = (float(x) for x in outputs)
        except tf.errors.OutOfRangeError:
            entropy = q_value = float("nan")
            self._on_sampling_timeout()
        self._metrics.scalars(
            {
                "learner/entropy": entropy,
                "learner/q_value": q_value,
                "learner/loss": total,
                "learner/critic_loss": critic,
                "learner/actor_loss": actor,
                "learner/alpha_loss": alpha_loss,
                "learner/alpha": alpha,
                "learner/steps_per_sec": rate,
            },
            step,
        )
        logging.info(
            "train_step %d: loss %.3f (critic %.3f, actor %.3f), alpha %.4f, entropy %.3f, "
            "%.1f steps/s; %s",
            step,
            total,
            critic,
            actor,
            alpha,
            entropy,
            rate,
            progress(step, self._hp.num_iterations, rate),
        )
        self._window = (now, step)

    # --- outputs -------------------------------------------------------------------

    def policy_weights(self):
        return [v.numpy() for v in self._policy_variables]

    def observation_normalization(self) -> ObservationNormalization:
        """The statistics the policy applies to raw observations (identity if none)."""
        if self.normalizer is None:
            return ObservationNormalization.identity(self._specs.observation.shape)
        return self.normalizer.numpy_params()

    def publish(self, done: bool = False) -> int:
        """Pushes weights, train_step and observation statistics to the container."""
        return self._container.push(
            self.policy_weights(),
            self.step,
            learner_done=done,
            normalization=self.observation_normalization(),
        )

    def save_checkpoint(self) -> bool:
        """Writes ckpt-<train_step>; on failure keeps the previous one as the latest.

        TensorFlow records a checkpoint in the directory's index only after all
        its files are written, so a failed write is never what a restart loads.
        """
        if self._checkpoints.latest_checkpoint == self._checkpoint_path(self.step):
            return True
        try:
            path = self._checkpoints.save(checkpoint_number=self.step)
        except (tf.errors.OpError, OSError) as error:
            logging.error(
                "Could not write the checkpoint at train_step %d (%s). Training goes on; the "
                "latest good checkpoint is still %s. Check free space and permissions of %s.",
                self.step,
                str(error).splitlines()[0][:200],
                self._checkpoints.latest_checkpoint,
                self._checkpoints.directory,
            )
            return False
        logging.info("Saved checkpoint %s.", path)
        return True

    def _checkpoint_path(self, step: int) -> str:
        return os.path.join(self._checkpoints.directory, f"{paths.CHECKPOINT_PREFIX}-{step}")

    def export_policies(self) -> None:
        """Writes full SavedModels of all three policies, replacing the old ones."""
        step = self.step
        if step == self._last_saved_policy_step:
            return
        root = paths.policies_dir(self._config.root_dir)
        for name, saver in self._savers.items():
            tmp = os.path.join(root, f".{name}.tmp")
            saver.save(tmp)
            replace_dir(tmp, os.path.join(root, name))
        self._last_saved_policy_step = step
        logging.info("Exported policies at train_step %d to %s.", step, root)

    def _finish(self, reason: str) -> LearnerResult:
        self._check_owner()
        self.save_checkpoint()
        self.export_policies()
        self._publish_final(done=reason == "num_iterations reached")
        self._metrics.flush()
        t0, s0 = self._start
        rate = (self.step - s0) / max(time.monotonic() - t0, 1e-9)
        logging.info("Learner stopped at train_step %d: %s.", self.step, reason)
        return LearnerResult(self.step, rate, self._last_loss, reason)

    def _publish_final(self, done: bool) -> None:
        """The last push (with the done flag actors wait for), reconnecting once if needed."""
        try:
            self.publish(done=done)
        except RECOVERABLE_ERRORS as error:
            if self._should_stop():
                logging.warning("Could not publish the final weights while stopping: %s", error)
                return
            self._connection.recover(error)
            self._container = VariableContainer(self._connection.variables)
            self.publish(done=done)


def _function(fn: Callable) -> Callable:
    """tf.function without autograph: SacAgent's update has only static Python
    control flow, and converting it made tracing ~7x slower (about 19 s instead
    of under 3 s for Pendulum-v1 on 2 cores), which every start and every
    reconnect pays."""
    return tf.function(fn, autograph=False)


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


_SHAPE_MISMATCH = "incompatible tensor with shape"


def _other_networks_error(path: str, reason: str) -> CheckpointError:
    """A readable checkpoint of other network sizes (without run_info.json to name them)."""
    return CheckpointError(
        f"The checkpoint {path} is readable but was written with other network sizes "
        f"({reason}). Pass the actor_fc_layer_params and critic_joint_fc_layer_params it was "
        "trained with, or use a new --root_dir for new sizes."
    )


def _has_normalizer(path: str) -> bool:
    """Whether the checkpoint at `path` holds observation statistics."""
    return any(name.startswith("normalizer/") for name, _ in tf.train.list_variables(path))


def _checkpoints_newest_first(manager: tf.train.CheckpointManager) -> List[str]:
    """The manager's checkpoints plus any complete ckpt-N on disk, newest first.

    TensorFlow writes ckpt-N.index last, after the data files, so every
    ckpt-N.index on disk belongs to a checkpoint that was written in full.
    """
    found = set(manager.checkpoints)
    for index in glob.glob(os.path.join(manager.directory, f"{paths.CHECKPOINT_PREFIX}-*.index")):
        found.add(index[: -len(".index")])

    def step(path: str) -> int:
        suffix = path.rsplit("-", 1)[-1]
        return int(suffix) if suffix.isdigit() else -1

    return sorted(found, key=step, reverse=True)
