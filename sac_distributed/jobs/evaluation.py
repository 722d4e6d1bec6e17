"""The evaluator: greedy-policy returns at the learner's latest weights.

It reads weights from the variable container (no waiting on exported files),
evaluates every `eval_interval` train steps, and appends one row per
evaluation to root_dir/eval/results.csv.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, List, Optional

import numpy as np
from absl import logging
from tf_agents.environments import py_environment

from sac_distributed import paths
from sac_distributed.algorithm.pixel_policy import make_acting_policy
from sac_distributed.algorithm.policy import NumpyActorPolicy, add_batch, limit_blas_threads
from sac_distributed.config import EvaluatorConfig
from sac_distributed.envs import loader as env_loader
from sac_distributed.replay import REPLAY_TABLE, table_info, transition_counts
from sac_distributed.replay.connection import TRANSIENT_ERRORS, Connection
from sac_distributed.replay.variables import VariableContainer, VariableSnapshot
from sac_distributed.results import EvalPoint, append_result
from sac_distributed.runtime import Metrics

# Seconds between weight pulls when the learner waits for each evaluation (wait_for_eval).
WAITED_ON_POLL_INTERVAL_S = 0.2


@dataclasses.dataclass(frozen=True)
class EvalResult:
    train_step: int
    env_steps: int
    average_return: float
    average_episode_length: float


def run_episodes(
    env: py_environment.PyEnvironment,
    policy: NumpyActorPolicy,
    num_episodes: int,
    greedy: bool = True,
    should_stop: Callable[[], bool] = lambda: False,
) -> tuple:
    """Returns (returns, lengths) of `num_episodes` full episodes."""
    returns: List[float] = []
    lengths: List[int] = []
    for _ in range(num_episodes):
        time_step = env.reset()
        total, length = 0.0, 0
        while not time_step.is_last():
            if should_stop():
                return returns, lengths
            action = policy.action(add_batch(time_step.observation), greedy=greedy)[0]
            time_step = env.step(action)
            total += float(time_step.reward)
            length += 1
        returns.append(total)
        lengths.append(length)
    return returns, lengths


def eval_due(train_step: int, last_step: Optional[int], interval: int, learner_done: bool) -> bool:
    """Whether the weights at `train_step` are due for an evaluation.

    Evaluations fall on the first weights at or after each multiple of
    `interval`, so a slow evaluation delays one row but never shifts the rest
    of the schedule (with "last + interval" a busy machine made rows drift to
    6200, 8400, 10500 instead of 6000, 8000, 10000). The learner's final
    weights are always evaluated.
    """
    if last_step is None:
        return True
    if learner_done:
        return train_step != last_step
    return train_step // interval > last_step // interval


class EvalLoop:
    """Evaluates each new `eval_interval` of training until the learner is done."""

    def __init__(
        self,
        config: EvaluatorConfig,
        env: py_environment.PyEnvironment,
        connection: Connection,
        metrics: Metrics,
        should_stop: Callable[[], bool],
    ):
        self._config = config
        self._env = env
        self._connection = connection
        self._container = VariableContainer(connection.variables)
        self._metrics = metrics
        self._should_stop = should_stop
        self._policy = make_acting_policy(
            env_loader.env_specs(env, config.env_name), config.hparams, seed=config.seed
        )
        # As in the actor: a batch-1 policy call must not wake OpenBLAS threads, which
        # spin between calls and doubled this loop's CPU (a second core, taken from
        # the learner, during every evaluation).
        limit_blas_threads(1)
        self.results_path = paths.results_path(config.root_dir)
        self.results: List[EvalResult] = []
        # A learner that waits for each evaluation idles until this loop notices its weights.
        self._poll_interval_s = config.poll_interval_s
        if config.hparams.wait_for_eval:
            self._poll_interval_s = min(self._poll_interval_s, WAITED_ON_POLL_INTERVAL_S)

    def run(self) -> List[EvalResult]:
        last_step: Optional[int] = None
        while not self._should_stop():
            try:
                snapshot = self._container.pull()
                self._connection.made_progress()
                if snapshot is not None and self._due(snapshot, last_step):
                    self.evaluate(snapshot)
                    last_step = snapshot.train_step
            except TRANSIENT_ERRORS as error:
                self._container = None  # its client goes first (connection.py)
                self._connection.recover(error)
                self._container = VariableContainer(self._connection.variables)
                continue
            if snapshot is not None and snapshot.learner_done and last_step == snapshot.train_step:
                logging.info("Learner finished at train_step %d; evaluator done.", last_step)
                break
            self._should_stop_wait()
        self._metrics.flush()
        return self.results

    def _should_stop_wait(self) -> None:
        deadline = time.monotonic() + self._poll_interval_s
        while time.monotonic() < deadline and not self._should_stop():
            time.sleep(min(0.1, self._poll_interval_s))

    def _due(self, snapshot: VariableSnapshot, last_step: Optional[int]) -> bool:
        return eval_due(
            snapshot.train_step,
            last_step,
            self._config.hparams.eval_interval,
            snapshot.learner_done,
        )

    def evaluate(self, snapshot: VariableSnapshot) -> Optional[EvalResult]:
        # Counted before the episodes: the actors go on collecting while they
        # run, and the row must say how much data the evaluated weights saw.
        env_steps = self._env_steps()
        self._policy.set_weights(snapshot.policy_weights, snapshot.normalization)
        returns, lengths = run_episodes(
            self._env,
            self._policy,
            self._config.hparams.num_eval_episodes,
            should_stop=self._should_stop,
        )
        if not returns:
            return None
        result = EvalResult(
            train_step=snapshot.train_step,
            env_steps=env_steps,
            average_return=float(np.mean(returns)),
            average_episode_length=float(np.mean(lengths)),
        )
        self._record(result)
        return result

    def _env_steps(self) -> int:
        """Transitions inserted into the replay so far (over all actors and shards)."""
        return sum(
            transition_counts(table_info(client, REPLAY_TABLE)).inserted
            for client in self._connection.live_clients()
        )

    def _record(self, result: EvalResult) -> None:
        self.results.append(result)
        append_result(
            self.results_path,
            EvalPoint(
                result.train_step,
                result.env_steps,
                result.average_return,
                result.average_episode_length,
                time.time(),
            ),
        )
        self._metrics.scalars(
            {
                "eval/AverageReturn": result.average_return,
                "eval/AverageEpisodeLength": result.average_episode_length,
            },
            result.train_step,
        )
        logging.info(
            "Eval at train_step %d (env steps %d): AverageReturn %.1f, AverageEpisodeLength %.0f",
            result.train_step,
            result.env_steps,
            result.average_return,
            result.average_episode_length,
        )
