"""The SAC learner: TF-Agents' SacAgent update, its checkpoints and its exports.

`SacLearner` is the algorithm side of the learner job, in the shape of Acme's
`core.Learner` (`step()`, `get_variables()`) and TF-Agents' `Learner`
(`run(iterations)`, `train_step_numpy`): it owns the agent, the train_step
counter and the observation statistics under a tf.distribute strategy, and
offers

  * `step(iterator, num_steps)`: `num_steps` SAC updates in one traced call,
    over any iterator of distributed batches (a Reverb dataset, a constant
    batch in a benchmark), returning the last step's losses;
  * `step_prioritized(iterator, num_steps)`: the same with prioritized replay,
    over batches that carry each item's sampling facts: the critic loss is
    weighted by importance weights and each item's new priority comes back;
  * `diagnostics(iterator)`: policy entropy and mean Q on one batch;
  * `variables()`: what actors and evaluators need (policy weights,
    train_step, observation statistics);
  * `save_checkpoint()` / restore with fallback past damaged files, and
    `export_policies()` (full SavedModels of the three policies).

It knows nothing of Reverb, processes, threads or schedules: `learner_loop`
feeds it data, watches the server and decides when to checkpoint, export and
publish. It is the only module that reaches into SacAgent's private members,
so a faster SAC update replaces this module alone.
"""

from __future__ import annotations

import glob
import os
import shutil
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging
from tf_agents.agents.sac import sac_agent
from tf_agents.policies import greedy_policy, policy_saver
from tf_agents.trajectories import trajectory
from tf_agents.utils import common, object_identity

from sac_distributed import paths
from sac_distributed.algorithm import agent as agent_lib
from sac_distributed.algorithm.agent import EnvSpecs
from sac_distributed.algorithm.policy import ObservationNormalization
from sac_distributed.config import Hyperparams
from sac_distributed.errors import CheckpointError, NonFiniteLossError
from sac_distributed.runtime import replace_dir

DEFAULT_CHECKPOINTS_TO_KEEP = 3
# Added to every new priority: an item at priority 0 would never be sampled
# again, although its TD error changes as the critics learn.
PRIORITY_EPSILON = 1e-6


class Losses(NamedTuple):
    """The losses of one SAC update (summed over replicas)."""

    total: float
    critic: float
    actor: float
    alpha: float


class Diagnostics(NamedTuple):
    """How the policy and critics look on one batch."""

    entropy: float  # -E[log pi(a|s)], a ~ pi
    q_value: float  # mean Q1(s, a ~ pi)
    alpha: float  # the temperature


class PriorityUpdate(NamedTuple):
    """New priorities of the replay items one `step_prioritized` call trained on.

    One entry per item and step, in step order (an item sampled twice appears
    twice; the later priority is the newer one).
    """

    keys: np.ndarray  # uint64: the items' Reverb keys
    shards: np.ndarray  # int32: the shard each item came from
    priorities: np.ndarray  # float64: mean |TD error| over the item's rows, + epsilon


class LearnerVariables(NamedTuple):
    """What acting needs from the learner: the policy and the inputs it expects."""

    policy_weights: List[np.ndarray]  # the actor network's, in `policy_variables` order
    train_step: int
    normalization: ObservationNormalization


def policy_variables(agent: sac_agent.SacAgent) -> List[tf.Variable]:
    """The actor network's variables, in a fixed order (kernel, bias per layer).

    Not `collect_policy.variables()`: with normalization that also lists the
    normalizer's statistics, which travel separately (see variables.py).
    """
    return list(agent._actor_network.variables)  # noqa: SLF001


class SacLearner:
    """SacAgent, its train_step and observation statistics, checkpoints and exports.

    Construction builds everything under `strategy.scope()` and restores the
    newest readable checkpoint in root_dir (falling back past damaged ones);
    it raises CheckpointError when checkpoints exist and none can be used.
    """

    def __init__(
        self,
        specs: EnvSpecs,
        hparams: Hyperparams,
        strategy: tf.distribute.Strategy,
        root_dir: str,
        seed: Optional[int] = None,
        max_checkpoints_to_keep: int = DEFAULT_CHECKPOINTS_TO_KEEP,
    ):
        self._specs = specs
        self._root_dir = root_dir
        self._rows_per_item = hparams.transitions_per_item
        self._critic_layer_norm = hparams.critic_layer_norm
        self._beta = hparams.importance_sampling_exponent
        self.strategy = strategy
        if seed is not None:
            tf.keras.utils.set_random_seed(seed)  # the same initial weights every run
        with strategy.scope():
            self.train_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
            self.normalizer = agent_lib.make_normalizer(specs, hparams)
            self.agent = agent_lib.make_agent(specs, hparams, self.train_step, self.normalizer)
            self.averager = _make_averager(self.agent, specs, hparams, self.normalizer)
            self._savers = self._make_savers()
        # What actors, the evaluator and exports act with: the trained actor or its average.
        self._policy_variables = (
            policy_variables(self.agent)
            if self.averager is None
            else list(self.averager.network.variables)
        )
        tracked = {"normalizer": self.normalizer} if self.normalizer is not None else {}
        if self.averager is not None:
            tracked["averaged_actor"] = self.averager.network
        checkpoint = tf.train.Checkpoint(agent=self.agent, train_step=self.train_step, **tracked)
        # TensorFlow ignores an unparsable index file; _restore then scans the directory.
        self._checkpoints = tf.train.CheckpointManager(
            checkpoint,
            paths.checkpoint_dir(root_dir),
            max_to_keep=max_checkpoints_to_keep,
            checkpoint_name=paths.CHECKPOINT_PREFIX,
        )
        self._restore()
        self._last_exported_step = -1
        self.retrace()

    @property
    def train_step_numpy(self) -> int:
        return int(self.train_step.numpy())

    @property
    def alpha(self) -> float:
        """The entropy temperature SAC has learned so far."""
        return float(tf.exp(self.agent._log_alpha))  # noqa: SLF001

    @property
    def latest_checkpoint(self) -> Optional[str]:
        return self._checkpoints.latest_checkpoint

    def _make_savers(self) -> Dict[str, policy_saver.PolicySaver]:
        # SacAgent's policy and collect_policy are one stochastic policy: one saver
        # serves both names, and an export writes it once and copies the directory.
        acting = self.agent.policy if self.averager is None else self.averager.policy
        acting_saver = policy_saver.PolicySaver(acting, batch_size=None, train_step=self.train_step)
        greedy = greedy_policy.GreedyPolicy(acting)
        savers = {
            "policy": acting_saver,
            "collect_policy": acting_saver,
            "greedy_policy": policy_saver.PolicySaver(
                greedy, batch_size=None, train_step=self.train_step
            ),
        }
        assert tuple(savers) == paths.POLICY_NAMES
        return savers

    # --- the update --------------------------------------------------------------

    def retrace(self) -> None:
        """Drops the traced functions; the next call traces new ones.

        A call abandoned on a lost server may still be running the old ones.
        """
        self._train_fn = _function(self._train_steps)
        self._prioritized_fn = _function(self._prioritized_steps)
        self._diagnostics_fn = _function(self._diagnostics)

    def step(self, iterator: Iterator, num_steps: int = 1) -> Losses:
        """Runs `num_steps` SAC updates on batches from `iterator`; the last step's losses.

        Raises NonFiniteLossError (naming the step and the checkpoint kept)
        when a loss becomes NaN or inf, and the iterator's own errors
        (OutOfRangeError when a sample timed out, the client's on a lost server).
        """
        return self._checked_losses(self._call(self._train_fn, iterator, num_steps))

    def step_prioritized(
        self, iterator: Iterator, num_steps: int = 1
    ) -> Tuple[Losses, PriorityUpdate]:
        """`step` for prioritized replay: also the new priorities of every item used.

        `iterator` yields `(Transition, info)` where `info` has per-item fields
        `key` (uint64), `shard` (int32), `probability` (float64, within the
        whole replay) and `replay_size` (int64, items), and the batch's rows are
        its items' K = transitions_per_item rows, item by item. The critic loss
        weights each row by its item's importance weight (`importance_weights`);
        the actor and temperature losses are unweighted, as in PER and Ape-X.
        Raises what `step` raises.
        """
        losses, keys, shards, priorities = self._call(self._prioritized_fn, iterator, num_steps)
        update = PriorityUpdate(
            keys=keys.numpy().view(np.uint64),  # carried as int64 bits (see below)
            shards=shards.numpy(),
            priorities=priorities.numpy(),
        )
        return self._checked_losses(losses), update

    def _call(self, fn, iterator: Iterator, num_steps: int):
        """`fn(iterator, num_steps)`, turning SacAgent's numerics check into our error."""
        try:
            return fn(iterator, tf.constant(num_steps))
        except tf.errors.InvalidArgumentError as error:
            # SacAgent and weighted_sac_update check losses with tf.debugging.check_numerics.
            if "inf or nan" not in error.message:
                raise
            raise self._non_finite(error.message.splitlines()[0]) from None

    def _checked_losses(self, outputs) -> Losses:
        losses = Losses(*(float(x) for x in outputs))
        if not all(np.isfinite(losses)):
            raise self._non_finite(f"total, critic, actor, alpha losses = {list(losses)}")
        return losses

    def _train_steps(self, iterator, num_steps: tf.Tensor):
        """The traced body of `step`: a tf.while_loop of replicated SAC updates.

        Traced without autograph (see `_function`), so the loop is an explicit
        tf.while_loop and the update is SacAgent's `_train`: its public `train`
        wraps it in an autograph-converted function of its own.
        """

        def replica_step(experience):
            if self.normalizer is not None:
                self.normalizer.update(experience.time_step.observation)
            info = self.agent._train(experience, weights=None)  # noqa: SLF001
            if self.averager is not None:
                self.averager.update()
            extra = info.extra
            return info.loss, extra.critic_loss, extra.actor_loss, extra.alpha_loss

        def body(i, _losses):
            per_replica = self.strategy.run(replica_step, args=(next(iterator),))
            total = tf.distribute.ReduceOp.SUM
            losses = tuple(self.strategy.reduce(total, x, axis=None) for x in per_replica)
            return i + 1, losses

        zero = tf.constant(0.0)
        start = (tf.constant(0, num_steps.dtype), (zero, zero, zero, zero))
        _, losses = tf.while_loop(lambda i, _: i < num_steps, body, start)
        return losses

    def _prioritized_steps(self, iterator, num_steps: tf.Tensor):
        """The traced body of `step_prioritized`: like `_train_steps`, collecting
        every step's item keys, shards and priorities in TensorArrays.

        Keys travel as int64 bit patterns (a free bitcast each way), so the
        TensorArrays and cross-replica gathers need only int64 kernels, which
        every device has.
        """

        def body(i, _losses, keys, shards, priorities):
            experience, info = next(iterator)
            per_replica = self.strategy.run(self._prioritized_replica_step, (experience, info))
            replica_losses, replica_keys, replica_shards, replica_priorities = per_replica
            total = tf.distribute.ReduceOp.SUM
            losses = tuple(self.strategy.reduce(total, x, axis=None) for x in replica_losses)
            keys = keys.write(i, self.strategy.gather(replica_keys, axis=0))
            shards = shards.write(i, self.strategy.gather(replica_shards, axis=0))
            priorities = priorities.write(i, self.strategy.gather(replica_priorities, axis=0))
            return i + 1, losses, keys, shards, priorities

        zero = tf.constant(0.0)
        start = (
            tf.constant(0, num_steps.dtype),
            (zero, zero, zero, zero),
            tf.TensorArray(tf.int64, size=num_steps),
            tf.TensorArray(tf.int32, size=num_steps),
            tf.TensorArray(tf.float64, size=num_steps),
        )
        _, losses, keys, shards, priorities = tf.while_loop(
            lambda i, *_: i < num_steps, body, start
        )
        flat = [tf.reshape(array.stack(), [-1]) for array in (keys, shards, priorities)]
        return (losses, *flat)

    def _prioritized_replica_step(self, experience, info):
        """One replica's weighted update; its losses and its items' keys, shards, priorities."""
        if self.normalizer is not None:
            self.normalizer.update(experience.time_step.observation)
        weights = importance_weights(
            info.probability, info.replay_size, self._beta, self._rows_per_item
        )
        losses, td_errors = weighted_sac_update(self.agent, experience, weights)
        if self.averager is not None:
            self.averager.update()
        priorities = item_priorities(td_errors, self._rows_per_item)
        keys = tf.bitcast(tf.cast(info.key, tf.uint64), tf.int64)
        return losses, keys, tf.cast(info.shard, tf.int32), priorities

    def diagnostics(self, iterator: Iterator) -> Diagnostics:
        """Entropy and mean Q on one batch from `iterator`, and the temperature."""
        entropy, q_value = (float(x) for x in self._diagnostics_fn(iterator))
        return Diagnostics(entropy, q_value, self.alpha)

    def _diagnostics(self, iterator):
        """Policy entropy estimate -E[log pi(a|s)] and mean Q1(s, a ~ pi) on one batch."""

        def replica_fn(experience):
            if not isinstance(experience, trajectory.Transition):
                experience = experience[0]  # (Transition, SampleInfo) with prioritized replay
            time_steps = experience.time_step
            # SacAgent's own sampler, so the estimate matches what the loss sees.
            actions, log_pi = self.agent._actions_and_log_probs(time_steps)  # noqa: SLF001
            q_values, _ = self.agent._critic_network_1(  # noqa: SLF001
                (time_steps.observation, actions), time_steps.step_type
            )
            return -tf.reduce_mean(log_pi), tf.reduce_mean(q_values)

        entropy, q_value = self.strategy.run(replica_fn, args=(next(iterator),))
        mean = tf.distribute.ReduceOp.MEAN
        return (
            self.strategy.reduce(mean, entropy, axis=None),
            self.strategy.reduce(mean, q_value, axis=None),
        )

    def _non_finite(self, detail: str) -> NonFiniteLossError:
        kept = self.latest_checkpoint or "none yet"
        return NonFiniteLossError(
            f"SAC loss became NaN or inf at train_step {self.train_step_numpy} ({detail}). "
            f"Nothing from this step was saved; the last good checkpoint ({kept}) is kept. "
            "Lower the learning rates or reward_scale_factor, or check the environment's "
            "rewards, then restart to resume from it."
        )

    # --- what acting needs ---------------------------------------------------------

    def policy_weights(self) -> List[np.ndarray]:
        return [v.numpy() for v in self._policy_variables]

    def observation_normalization(self) -> ObservationNormalization:
        """The statistics the policy applies to raw observations (identity if none)."""
        if self.normalizer is None:
            return ObservationNormalization.identity(self._specs.observation.shape)
        return self.normalizer.numpy_params()

    def variables(self) -> LearnerVariables:
        """The policy weights, train_step and observation statistics, as NumPy values."""
        return LearnerVariables(
            self.policy_weights(), self.train_step_numpy, self.observation_normalization()
        )

    # --- checkpoints and exports ---------------------------------------------------

    def save_checkpoint(self) -> bool:
        """Writes ckpt-<train_step>; on failure keeps the previous one as the latest.

        TensorFlow records a checkpoint in the directory's index only after all
        its files are written, so a failed write is never what a restart loads.
        """
        step = self.train_step_numpy
        if self.latest_checkpoint == self._checkpoint_path(step):
            return True
        try:
            path = self._checkpoints.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as error:
            logging.error(
                "Could not write the checkpoint at train_step %d (%s). Training goes on; the "
                "latest good checkpoint is still %s. Check free space and permissions of %s.",
                step,
                str(error).splitlines()[0][:200],
                self.latest_checkpoint,
                self._checkpoints.directory,
            )
            return False
        logging.info("Saved checkpoint %s.", path)
        return True

    def _checkpoint_path(self, step: int) -> str:
        return os.path.join(self._checkpoints.directory, f"{paths.CHECKPOINT_PREFIX}-{step}")

    def export_policies(self) -> None:
        """Writes full SavedModels of all three policies, replacing the old ones."""
        step = self.train_step_numpy
        if step == self._last_exported_step:
            return
        root = paths.policies_dir(self._root_dir)
        written: Dict[int, str] = {}  # id(saver) -> the directory it wrote in this export
        for name, saver in self._savers.items():
            tmp = os.path.join(root, f".{name}.tmp")
            if id(saver) in written:  # the same policy under another name: same files
                if os.path.exists(tmp):
                    shutil.rmtree(tmp)
                shutil.copytree(written[id(saver)], tmp)
            else:
                saver.save(tmp)
            final = paths.policy_dir(self._root_dir, name)
            replace_dir(tmp, final)
            written[id(saver)] = final
        self._last_exported_step = step
        logging.info("Exported policies at train_step %d to %s.", step, root)

    def _restore(self) -> None:
        """Restores the newest readable checkpoint, falling back past damaged ones."""
        candidates = _checkpoints_newest_first(self._checkpoints)
        if not candidates:
            logging.info("No checkpoint in %s: starting from scratch.", self._checkpoints.directory)
            return
        failures = []
        for path in candidates:
            self._check_normalization_matches(path)
            self._check_averaging_matches(path)
            self._check_critic_matches(path)
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
            logging.info("Restored %s (train_step=%d).", path, self.train_step_numpy)
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
            normalized = _checkpoint_holds(path, "normalizer")
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

    def _check_averaging_matches(self, path: str) -> None:
        """Refuses a checkpoint without an averaged policy when averaging is on.

        Restoring would fail on the missing average (and then on every older
        checkpoint, which would read as damaged). The other way round is allowed:
        without averaging the learner publishes the trained actor and ignores it.
        """
        if self.averager is None:
            return
        try:
            averaged = _checkpoint_holds(path, "averaged_actor")
        except Exception:  # an unreadable index: restore() reports it, then falls back
            return
        if averaged:
            return
        raise CheckpointError(
            f"The checkpoint {path} was written without policy averaging, so it holds no "
            "averaged policy for --policy_averaging_tau to go on from. Pass "
            "--policy_averaging_tau=0 to resume this run as it was trained, or use a new "
            "root_dir."
        )

    def _check_critic_matches(self, path: str) -> None:
        """Refuses a checkpoint of the other critic (with or without layer norm).

        Restoring would fail on every checkpoint alike and read as damage.
        """
        try:
            layer_norm = _checkpoint_has_layer_norm_critic(path)
        except Exception:  # an unreadable index: restore() reports it, then falls back
            return
        if layer_norm is None or layer_norm == self._critic_layer_norm:
            return
        raise CheckpointError(
            f"The checkpoint {path} was written with critic_layer_norm={layer_norm}, but "
            f"this learner runs with critic_layer_norm={not layer_norm}. Pass "
            f"--critic_layer_norm={str(layer_norm).lower()} to resume it, or use a new root_dir."
        )


def _make_averager(
    agent: sac_agent.SacAgent,
    specs: EnvSpecs,
    hparams: Hyperparams,
    normalizer,
) -> Optional[agent_lib.PolicyAverager]:
    if not hparams.policy_averaging_tau:
        return None
    actor = agent._actor_network  # noqa: SLF001
    return agent_lib.PolicyAverager(actor, specs, hparams.policy_averaging_tau, normalizer)


def importance_weights(
    probability: tf.Tensor, replay_size: tf.Tensor, beta: float, rows_per_item: int
) -> tf.Tensor:
    """Per-row importance weights (N * P(i)) ** -beta / their batch maximum, float32.

    `probability` is each item's sampling probability P(i) within the whole
    replay and `replay_size` N its size in items, so the weights undo the
    bias of prioritized sampling by a fraction beta (Schaul et al. 2016);
    dividing by the batch's largest weight keeps them in (0, 1], so they only
    ever scale updates down (under a multi-replica strategy, each replica's
    batch is normalized on its own). Each of an item's K = `rows_per_item` rows gets
    the item's weight (rows are item-major). float64 inside: N * P(i) of a
    rarely drawn item is tiny. Uniform sampling (P = 1/N) gives weights of 1.
    """
    size = tf.cast(replay_size, tf.float64)
    weights = tf.pow(size * tf.cast(probability, tf.float64), -float(beta))
    weights /= tf.reduce_max(weights)
    return tf.cast(tf.repeat(weights, rows_per_item), tf.float32)


def item_priorities(td_errors: tf.Tensor, rows_per_item: int) -> tf.Tensor:
    """Each item's new priority: the mean |TD error| of its K rows, + epsilon (float64).

    The mean, not the max: an item's K rows are consecutive steps of one
    episode, sampled together, and the mean says how much the item as a whole
    has left to teach without one outlier step deciding it.
    """
    per_item = tf.reduce_mean(tf.reshape(td_errors, [-1, rows_per_item]), axis=1)
    return tf.cast(per_item, tf.float64) + PRIORITY_EPSILON


def critic_loss_and_td_errors(
    agent: sac_agent.SacAgent, experience, weights: Optional[tf.Tensor] = None
) -> Tuple[tf.Tensor, tf.Tensor]:
    """SacAgent's critic loss on a batch of Transitions, weighted per row, and each
    row's |TD error| (the mean over both critics).

    The same math as `SacAgent.critic_loss` (target = reward_scale * r + gamma *
    discount * (min of the target critics at a' ~ pi(s') - alpha log pi(a'|s')),
    the agent's td_errors_loss_fn per critic, summed, averaged over the global
    batch), but it also returns the TD errors from the same forward pass, for
    the priorities. The mean over both critics: each critic is trained on the
    item, so each one's error says how surprising it still is.
    """
    time_steps, policy_steps, next_time_steps = experience
    next_actions, next_log_pis = agent._actions_and_log_probs(next_time_steps, training=False)  # noqa: SLF001
    target_input = (next_time_steps.observation, next_actions)
    step_type = next_time_steps.step_type
    target_q1, _ = agent._target_critic_network_1(target_input, step_type, training=False)  # noqa: SLF001
    target_q2, _ = agent._target_critic_network_2(target_input, step_type, training=False)  # noqa: SLF001
    soft_value = tf.minimum(target_q1, target_q2) - tf.exp(agent._log_alpha) * next_log_pis  # noqa: SLF001
    targets = tf.stop_gradient(
        agent._reward_scale_factor * next_time_steps.reward  # noqa: SLF001
        + agent._gamma * next_time_steps.discount * soft_value  # noqa: SLF001
    )
    pred_input = (time_steps.observation, policy_steps.action)
    q1, _ = agent._critic_network_1(pred_input, time_steps.step_type, training=True)  # noqa: SLF001
    q2, _ = agent._critic_network_2(pred_input, time_steps.step_type, training=True)  # noqa: SLF001
    loss_fn = agent._td_errors_loss_fn  # noqa: SLF001
    per_row = loss_fn(targets, q1) + loss_fn(targets, q2)
    loss = common.aggregate_losses(
        per_example_loss=per_row,
        sample_weight=weights,
        regularization_loss=agent._critic_network_1.losses + agent._critic_network_2.losses,  # noqa: SLF001
    ).total_loss
    td_errors = 0.5 * (tf.abs(q1 - targets) + tf.abs(q2 - targets))
    return agent._critic_loss_weight * loss, tf.stop_gradient(td_errors)  # noqa: SLF001


def weighted_sac_update(
    agent: sac_agent.SacAgent, experience, weights: tf.Tensor
) -> Tuple[Tuple[tf.Tensor, ...], tf.Tensor]:
    """SacAgent's `_train` with importance `weights` on the critic loss alone.

    In SacAgent's order: critic, actor, temperature (each with its own tape,
    optimizer and the agent's gradient clipping), then train_step + 1 and the
    target update on its period. Returns ((total, critic, actor, alpha losses),
    per-row |TD error|).
    """
    critic_variables = list(
        object_identity.ObjectIdentitySet(
            agent._critic_network_1.trainable_variables  # noqa: SLF001
            + agent._critic_network_2.trainable_variables  # noqa: SLF001
        )
    )
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(critic_variables)
        critic_loss, td_errors = critic_loss_and_td_errors(agent, experience, weights)
    tf.debugging.check_numerics(critic_loss, "Critic loss is inf or nan.")
    _apply(agent, tape.gradient(critic_loss, critic_variables), critic_variables, "critic")
    time_steps = experience.time_step
    actor_variables = agent._actor_network.trainable_variables  # noqa: SLF001
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(actor_variables)
        actor_loss = agent._actor_loss_weight * agent.actor_loss(time_steps, training=True)  # noqa: SLF001
    tf.debugging.check_numerics(actor_loss, "Actor loss is inf or nan.")
    _apply(agent, tape.gradient(actor_loss, actor_variables), actor_variables, "actor")
    alpha_variables = [agent._log_alpha]  # noqa: SLF001
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(alpha_variables)
        alpha_loss = agent._alpha_loss_weight * agent.alpha_loss(time_steps, training=True)  # noqa: SLF001
    tf.debugging.check_numerics(alpha_loss, "Alpha loss is inf or nan.")
    _apply(agent, tape.gradient(alpha_loss, alpha_variables), alpha_variables, "alpha")
    agent.train_step_counter.assign_add(1)
    agent._update_target()  # noqa: SLF001
    total = critic_loss + actor_loss + alpha_loss
    return (total, critic_loss, actor_loss, alpha_loss), td_errors


def _apply(agent: sac_agent.SacAgent, gradients, variables, which: str) -> None:
    """SacAgent's own gradient step (clipping included) with its `which` optimizer."""
    optimizer = getattr(agent, f"_{which}_optimizer")
    agent._apply_gradients(gradients, variables, optimizer)  # noqa: SLF001


def _function(fn):
    """tf.function without autograph: SacAgent's update has only static Python
    control flow, and converting it made tracing ~7x slower (about 19 s instead
    of under 3 s for Pendulum-v1 on 2 cores), which every start and every
    reconnect pays."""
    return tf.function(fn, autograph=False)


_SHAPE_MISMATCH = "incompatible tensor with shape"


def _other_networks_error(path: str, reason: str) -> CheckpointError:
    """A readable checkpoint of other network sizes (without run_info.json to name them)."""
    return CheckpointError(
        f"The checkpoint {path} is readable but was written with other network sizes "
        f"({reason}). Pass the actor_fc_layer_params and critic_joint_fc_layer_params it was "
        "trained with, or use a new --root_dir for new sizes."
    )


def _checkpoint_holds(path: str, attribute: str) -> bool:
    """Whether the checkpoint at `path` holds the tracked object `attribute`
    (e.g. "normalizer": observation statistics; "averaged_actor": an averaged policy)."""
    prefix = f"{attribute}/"
    return any(name.startswith(prefix) for name, _ in tf.train.list_variables(path))


def _checkpoint_has_layer_norm_critic(path: str) -> Optional[bool]:
    """Whether the checkpoint's first critic is a LayerNormCriticNetwork (its
    layers are tracked as `_hidden`; TF-Agents' CriticNetwork's as
    `_joint_layers`); None when it holds no critic."""
    names = [
        n for n, _ in tf.train.list_variables(path) if n.startswith("agent/_critic_network_1/")
    ]
    if not names:
        return None
    return any("/_hidden/" in n for n in names)


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
