"""SAC's entry in the registry: its name, its learner and its checkpoint key.

Imports no TensorFlow, so the registry can be consulted wherever a config is
built. SAC follows every option of Hyperparams, so it has no checks of its own
and takes a preset as it is.
"""

from __future__ import annotations

from sac_distributed.algorithm.registry import Algorithm

# The checkpoint's name for the SacAgent (with train_step beside it).
CHECKPOINT_KEY = "agent"

ALGORITHM = Algorithm(
    name="sac",
    title="SAC",
    learner="sac_distributed.algorithm.sac.learner:make_learner",
    checkpoint_key=CHECKPOINT_KEY,
    help="TF-Agents' SacAgent; DrQ's update on camera observations",
)
