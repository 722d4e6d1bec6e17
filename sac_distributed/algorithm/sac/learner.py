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
    `export_policies()` (full SavedModels of the three policies), done by
    algorithm/checkpoints.py after the compatibility checks of checkpoint_checks.py.

It knows nothing of Reverb, processes, threads or schedules: `learner_loop`
feeds it data, watches the server and decides when to checkpoint, export and
publish. It and update.py (the SacAgent and its weighted update) are the
only modules that reach into SacAgent's private members, so a faster SAC
update replaces these alone.
"""

from __future__ import annotations

import functools
from typing import Iterator, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from tf_agents.agents.sac import sac_agent
from tf_agents.trajectories import trajectory

from sac_distributed.algorithm.checkpoint_checks import check_written_by
from sac_distributed.algorithm.checkpoints import (
    DEFAULT_CHECKPOINTS_TO_KEEP,
    LearnerCheckpoints,
    PolicyExporter,
    make_policy_savers,
)
from sac_distributed.algorithm.learner import (
    Diagnostics,
    LearnerBase,
    Losses,
    PriorityUpdate,
    call_update,
    checked_losses,
)
from sac_distributed.algorithm.policy import ObservationNormalization
from sac_distributed.algorithm.priorities import importance_weights, item_priorities
from sac_distributed.algorithm.sac import checkpoint_checks
from sac_distributed.algorithm.sac.config import CHECKPOINT_KEY
from sac_distributed.algorithm.sac.networks import PolicyAverager, make_normalizer
from sac_distributed.algorithm.sac.update import make_agent, weighted_sac_update
from sac_distributed.algorithm.traced import TracedFunctions
from sac_distributed.config import Hyperparams
from sac_distributed.envs.specs import EnvSpecs


def policy_variables(agent: sac_agent.SacAgent) -> List[tf.Variable]:
    """The actor network's variables, in a fixed order (kernel, bias per layer).

    Not `collect_policy.variables()`: with normalization that also lists the
    normalizer's statistics, which travel separately (see variables.py).
    """
    return list(agent._actor_network.variables)  # noqa: SLF001


class SacLearner(LearnerBase):
    """SacAgent, its train_step and observation statistics, checkpoints and exports.

    Construction builds everything under `strategy.scope()` and restores the
    newest readable checkpoint in root_dir (falling back past damaged ones);
    it raises CheckpointError when checkpoints exist and none can be used.
    """

    supports_prioritized_replay = True

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
        self._rows_per_item = hparams.transitions_per_item
        # Items per step over all replicas: a known shape lets a 0-step call stack.
        self._items_per_step = hparams.batch_size // hparams.transitions_per_item
        self._beta = hparams.importance_sampling_exponent
        self.strategy = strategy
        if seed is not None:
            tf.keras.utils.set_random_seed(seed)  # the same initial weights every run
        with strategy.scope():
            self.train_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
            self.normalizer = make_normalizer(specs, hparams)
            self.agent = make_agent(specs, hparams, self.train_step, self.normalizer)
            self.averager = _make_averager(self.agent, specs, hparams, self.normalizer)
            acting = self.agent.policy if self.averager is None else self.averager.policy
            savers = make_policy_savers(acting, self.train_step, specs.env_action)
        # What actors, the evaluator and exports act with: the trained actor or its average.
        self._policy_variables = (
            policy_variables(self.agent)
            if self.averager is None
            else list(self.averager.network.variables)
        )
        tracked = {CHECKPOINT_KEY: self.agent}
        if self.normalizer is not None:
            tracked[checkpoint_checks.NORMALIZER_KEY] = self.normalizer
        if self.averager is not None:
            tracked[checkpoint_checks.AVERAGED_ACTOR_KEY] = self.averager.network
        checkpoint = tf.train.Checkpoint(train_step=self.train_step, **tracked)
        self._checkpoints = LearnerCheckpoints(
            checkpoint, self.train_step, root_dir, max_checkpoints_to_keep
        )
        self._checkpoints.restore(checks=self._checkpoint_checks(hparams))
        self._exporter = PolicyExporter(savers, self.train_step, root_dir)
        self._functions = TracedFunctions(
            {
                "train": (self._train_steps, True),
                "prioritized": (self._prioritized_steps, True),
                "diagnostics": (self._diagnostics, False),
            }
        )

    @property
    def alpha(self) -> float:
        """The entropy temperature SAC has learned so far."""
        return float(tf.exp(self.agent._log_alpha))  # noqa: SLF001

    def _checkpoint_checks(self, hparams: Hyperparams):
        """What a checkpoint must match to be restored into this learner."""
        return (
            functools.partial(check_written_by, algorithm=hparams.algorithm),
            functools.partial(
                checkpoint_checks.check_normalization,
                normalize_observations=self.normalizer is not None,
            ),
            functools.partial(
                checkpoint_checks.check_averaging, averaging=self.averager is not None
            ),
            functools.partial(
                checkpoint_checks.check_critic, critic_layer_norm=hparams.critic_layer_norm
            ),
        )

    # --- the update --------------------------------------------------------------

    def step(self, iterator: Iterator, num_steps: int = 1) -> Losses:
        """Runs `num_steps` SAC updates on batches from `iterator`; the last step's losses.

        Raises NonFiniteLossError (naming the step and the checkpoint kept)
        when a loss becomes NaN or inf, and the iterator's own errors
        (OutOfRangeError when a sample timed out, the client's on a lost server).
        """
        outputs = call_update(self._functions["train"], iterator, num_steps, self._non_finite)
        return checked_losses(outputs, self._non_finite)

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
        losses, keys, shards, priorities = call_update(
            self._functions["prioritized"], iterator, num_steps, self._non_finite
        )
        update = PriorityUpdate(
            keys=keys.numpy().view(np.uint64),  # carried as int64 bits (see below)
            shards=shards.numpy(),
            priorities=priorities.numpy(),
        )
        return checked_losses(losses, self._non_finite), update

    def _train_steps(self, iterator, num_steps: tf.Tensor):
        """The traced body of `step`: a tf.while_loop of replicated SAC updates.

        Traced without autograph (see `traced.traced`), so the loop is an explicit
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
            *(
                tf.TensorArray(dtype, size=num_steps, element_shape=[self._items_per_step])
                for dtype in (tf.int64, tf.int32, tf.float64)
            ),
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
        entropy, q_value = (float(x) for x in self._functions["diagnostics"](iterator))
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

    # --- what acting needs ---------------------------------------------------------

    def policy_weights(self) -> List[np.ndarray]:
        return [v.numpy() for v in self._policy_variables]

    def observation_normalization(self) -> ObservationNormalization:
        """The statistics the policy applies to raw observations (identity if none)."""
        if self.normalizer is None:
            return ObservationNormalization.identity(self._specs.observation.shape)
        return self.normalizer.numpy_params()


def _make_averager(
    agent: sac_agent.SacAgent,
    specs: EnvSpecs,
    hparams: Hyperparams,
    normalizer,
) -> Optional[PolicyAverager]:
    if not hparams.policy_averaging_tau:
        return None
    actor = agent._actor_network  # noqa: SLF001
    return PolicyAverager(actor, specs, hparams.policy_averaging_tau, normalizer)


def make_learner(
    specs: EnvSpecs,
    hparams: Hyperparams,
    strategy: tf.distribute.Strategy,
    root_dir: str,
    **kwargs,
) -> LearnerBase:
    """SAC's learner for `specs`: SacLearner, or PixelSacLearner (DrQ's update with a
    conv encoder) when the env observes a camera image."""
    if specs.is_image:
        from sac_distributed.algorithm.sac.pixel_learner import PixelSacLearner

        return PixelSacLearner(specs, hparams, strategy, root_dir, **kwargs)
    return SacLearner(specs, hparams, strategy, root_dir, **kwargs)
