"""Which learner a run's `Hyperparams.algorithm` names: the one choice of update.

Both learners offer the same interface to `jobs.learner_loop` (step,
diagnostics, variables, checkpoints, exports), so the loop, the replay and
the acting jobs are the same for either.
"""

from __future__ import annotations

from typing import Optional, Union

import tensorflow as tf

from sac_distributed.algorithm.crossq_learner import CrossQLearner
from sac_distributed.algorithm.sac_learner import DEFAULT_CHECKPOINTS_TO_KEEP, SacLearner
from sac_distributed.config import Hyperparams
from sac_distributed.envs.specs import EnvSpecs

Learner = Union[SacLearner, CrossQLearner]


def make_learner(
    specs: EnvSpecs,
    hparams: Hyperparams,
    strategy: tf.distribute.Strategy,
    root_dir: str,
    seed: Optional[int] = None,
    max_checkpoints_to_keep: int = DEFAULT_CHECKPOINTS_TO_KEEP,
) -> Learner:
    """A SacLearner, or a CrossQLearner for algorithm="crossq"; restores root_dir's checkpoint."""
    learner_class = CrossQLearner if hparams.algorithm == "crossq" else SacLearner
    return learner_class(
        specs,
        hparams,
        strategy,
        root_dir,
        seed=seed,
        max_checkpoints_to_keep=max_checkpoints_to_keep,
    )
