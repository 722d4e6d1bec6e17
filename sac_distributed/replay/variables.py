"""The variable container: policy weights and train_step shared through Reverb.

The learner pushes its policy weights, train_step and a done flag as the one
item of a max_size=1 table; actors and evaluators read it at an interval. It
is a plain table on the same server as the replay, so any process can start
first and nothing goes through the filesystem.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import reverb
import tree

from sac_distributed.algorithm.policy import ObservationNormalization
from sac_distributed.replay.connection import open_trajectory_writer
from sac_distributed.replay.counts import table_counts
from sac_distributed.replay.signatures import (
    LEARNER_DONE,
    MAX_PRIORITY,
    MAX_PRIORITY_TABLE,
    OBSERVATION_CLIP,
    OBSERVATION_MEAN,
    OBSERVATION_STD,
    POLICY_VARIABLES,
    TRAIN_STEP,
    VARIABLE_TABLE,
)

# A push that the server has not confirmed by then raises DeadlineExceededError.
PUSH_TIMEOUT_MS = 10_000


@dataclasses.dataclass(frozen=True)
class VariableSnapshot:
    """What a pull returns: the weights and the learner's progress."""

    policy_weights: List[np.ndarray]
    train_step: int
    learner_done: bool
    normalization: ObservationNormalization
    # The largest replay priority the learner has set (prioritized replay: new
    # items are inserted with it); None when it has published none.
    max_priority: Optional[float] = None


class VariableContainer:
    """Push (learner) and pull (actors, evaluator) of the policy weights."""

    def __init__(self, client: reverb.Client):
        self._client = client
        self._writer: Optional[reverb.TrajectoryWriter] = None
        self._priority_writer: Optional[reverb.TrajectoryWriter] = None
        # table -> (its insert count, the item sampled at that count)
        self._cache: Dict[str, Tuple[int, Any]] = {}

    def push(
        self,
        policy_weights: Sequence[np.ndarray],
        train_step: int,
        learner_done: bool = False,
        normalization: Optional[ObservationNormalization] = None,
    ) -> int:
        """Replaces the container's item; returns the bytes of weights sent.

        `normalization` None means raw observations; the observation shape is
        then read from the first layer's kernel (flat observations).
        """
        if self._writer is None:
            self._writer = open_trajectory_writer(self._client, num_keep_alive_refs=1)
        if normalization is None:
            normalization = ObservationNormalization.identity((np.shape(policy_weights[0])[0],))
        data = {
            POLICY_VARIABLES: tuple(np.asarray(w) for w in policy_weights),
            TRAIN_STEP: np.int64(train_step),
            LEARNER_DONE: np.bool_(learner_done),
            OBSERVATION_MEAN: np.asarray(normalization.mean, np.float32),
            OBSERVATION_STD: np.asarray(normalization.std, np.float32),
            OBSERVATION_CLIP: np.float32(normalization.clip),
        }
        self._writer.append(data)
        item = tree.map_structure(lambda column: column[-1], self._writer.history)
        self._writer.create_item(VARIABLE_TABLE, 1.0, item)
        self._writer.flush(timeout_ms=PUSH_TIMEOUT_MS)
        return int(sum(w.nbytes for w in data[POLICY_VARIABLES]))

    def push_max_priority(self, max_priority: float) -> None:
        """Replaces the published max priority (prioritized replay only)."""
        if self._priority_writer is None:
            self._priority_writer = open_trajectory_writer(self._client, num_keep_alive_refs=1)
        self._priority_writer.append({MAX_PRIORITY: np.float64(max_priority)})
        item = tree.map_structure(lambda column: column[-1], self._priority_writer.history)
        self._priority_writer.create_item(MAX_PRIORITY_TABLE, 1.0, item)
        self._priority_writer.flush(timeout_ms=PUSH_TIMEOUT_MS)

    def pull(self, timeout_s: int = 10) -> Optional[VariableSnapshot]:
        """The latest snapshot, or None while the learner has pushed nothing.

        One cheap ServerInfo call per pull; the weights travel only when the
        learner has pushed since the last pull (its table's insert count moved),
        so actors may pull every few steps.
        """
        try:
            return self._pull(timeout_s)
        except Exception:
            self._cache.clear()  # a restarted server may count its inserts anew
            raise

    def _pull(self, timeout_s: int) -> Optional[VariableSnapshot]:
        infos = table_counts(self._client, timeout_s)
        data = self._latest(infos, VARIABLE_TABLE)
        if data is None:
            return None
        priority = self._latest(infos, MAX_PRIORITY_TABLE)
        return VariableSnapshot(
            policy_weights=[np.array(w) for w in data[POLICY_VARIABLES]],  # own copies
            train_step=int(data[TRAIN_STEP]),
            learner_done=bool(data[LEARNER_DONE]),
            normalization=ObservationNormalization(
                mean=np.array(data[OBSERVATION_MEAN]),
                std=np.array(data[OBSERVATION_STD]),
                clip=float(data[OBSERVATION_CLIP]),
            ),
            max_priority=None if priority is None else float(priority[MAX_PRIORITY]),
        )

    def pull_max_priority(self, timeout_s: int = 10) -> Optional[float]:
        """The published max priority alone (a restarting learner resumes from it)."""
        infos = table_counts(self._client, timeout_s)
        data = self._latest(infos, MAX_PRIORITY_TABLE)
        return None if data is None else float(data[MAX_PRIORITY])

    def _latest(self, infos, table: str):
        """The one item of `table` (a max_size=1 table); None when it is empty or
        absent. Sampled only when its insert count differs from the last sample's."""
        info = infos.get(table)
        if info is None or info.current_size == 0:
            return None
        count = info.rate_limiter_info.insert_stats.completed
        cached = self._cache.get(table)
        if cached is not None and cached[0] == count:
            return cached[1]
        sample = next(
            self._client.sample(table, 1, emit_timesteps=False, unpack_as_table_signature=True)
        )
        self._cache[table] = (count, sample.data)
        return sample.data

    def close(self) -> None:
        for writer in (self._writer, self._priority_writer):
            if writer is not None:
                writer.close()
        self._writer = self._priority_writer = None
