"""The table names and signatures the server builds and every job checks.

Each replay item holds K = `transitions_per_item` consecutive rows (layout.py)
in a single column. One column and K rows per item keep the server's per-item
and per-column overhead small (about 0.4 KB instead of 4 KB per HalfCheetah
transition at K=8) and make writing and sampling cheap. An item is complete
the moment it is written, so a killed actor never leaves a half-written
trajectory behind, and batched actors need no per-env streams: their rows
simply interleave. The learner samples batch_size / K items and reshapes them
to batch_size rows. K comes from `Hyperparams.transitions_per_item` alone; a
job whose K differs from the server's table is refused (checks.py).

The variable container is a one-item table beside the replay (variables.py),
and so is the largest replay priority the learner has set (tables.py).
"""

from __future__ import annotations

from typing import Dict, Optional

import tensorflow as tf
import tree

from sac_distributed.algorithm.pixel_policy import acting_weight_shapes_for
from sac_distributed.config import Hyperparams
from sac_distributed.envs.specs import EnvSpecs
from sac_distributed.replay.frames import FRAMES, FRAMES_OF, REWARDS, frame_layout
from sac_distributed.replay.layout import ROWS_OF, TRANSITIONS, row_layout

REPLAY_TABLE = "uniform_table"
VARIABLE_TABLE = "variables"
MAX_PRIORITY_TABLE = "max_priority"

# Fields of the single item in the variable container table.
POLICY_VARIABLES = "policy_variables"
TRAIN_STEP = "train_step"
LEARNER_DONE = "learner_done"
# The learner's observation statistics; clip is inf when it does not normalize.
OBSERVATION_MEAN = "observation_mean"
OBSERVATION_STD = "observation_std"
OBSERVATION_CLIP = "observation_clip"

# The one field of the max-priority item.
MAX_PRIORITY = "max_priority"


def transition_signature(
    specs: EnvSpecs, transitions_per_item: Optional[int] = None, n_step: int = 1
) -> Dict[str, tf.TensorSpec]:
    """Signature of one replay item: K consecutive transitions as flat float32 rows.

    With `transitions_per_item=None` the leading dimension is left unknown: a
    signature that `signatures_match` accepts for a table of any K. An env with
    image observations stores frames once instead (frames.py), as many as its
    items' `n_step` returns reach (vector rows fold n-step returns in place).
    """
    if specs.is_image:
        return frame_layout(specs, n_step).signature(transitions_per_item)
    layout = row_layout(specs)
    shape = (transitions_per_item, layout.width)
    # The name (kept by the server) records the layout for error messages.
    return {TRANSITIONS: tf.TensorSpec(shape, tf.float32, layout.describe())}


def frame_n_step_of(signature: object, specs: EnvSpecs) -> int:
    """n of a pixel replay table's n-step items, from its frames column's length."""
    k = transitions_per_item_of(signature)
    return int(signature[FRAMES].shape[0]) - specs.frame_stack - k + 1


def transitions_per_item_of(signature: object) -> int:
    """K of a replay table signature; 1 for tables without a transitions column."""
    for column in (TRANSITIONS, REWARDS):
        if isinstance(signature, dict) and column in signature:
            k = signature[column].shape[0]
            if k is not None:
                return int(k)
    return 1


def variable_signature(specs: EnvSpecs, hparams: Hyperparams) -> Dict[str, object]:
    """Signature of the variable container item: policy weights, train_step, done
    flag and observation statistics (present whether or not the learner
    normalizes, so actors need not know; only the learner's setting counts).

    The policy weights' shapes follow the actor network's layer sizes
    (policy.acting_weight_shapes: the same layout for every algorithm; with
    image observations the conv encoder's first, pixel_policy.py), so a job
    built with other sizes than the server's does not match it.
    """
    shapes = acting_weight_shapes_for(specs, hparams)
    policy = tuple(
        tf.TensorSpec(shape, tf.float32, f"{POLICY_VARIABLES}_{i}")
        for i, shape in enumerate(shapes)
    )
    # A camera's statistics have the image's shape (the pixel learner's are the identity).
    observation_shape = specs.image.shape if specs.is_image else specs.observation.shape
    return {
        POLICY_VARIABLES: policy,
        TRAIN_STEP: tf.TensorSpec((), tf.int64, TRAIN_STEP),
        LEARNER_DONE: tf.TensorSpec((), tf.bool, LEARNER_DONE),
        OBSERVATION_MEAN: tf.TensorSpec(observation_shape, tf.float32, OBSERVATION_MEAN),
        OBSERVATION_STD: tf.TensorSpec(observation_shape, tf.float32, OBSERVATION_STD),
        OBSERVATION_CLIP: tf.TensorSpec((), tf.float32, OBSERVATION_CLIP),
    }


def max_priority_signature() -> Dict[str, tf.TensorSpec]:
    """Signature of the max-priority item: one float64 scalar."""
    return {MAX_PRIORITY: tf.TensorSpec((), tf.float64, MAX_PRIORITY)}


def describe_signature(signature: object) -> str:
    """A compact, readable form of a signature for error messages."""
    flat = tree.flatten_with_path(signature)
    parts = [
        f"{'/'.join(str(p) for p in path)}: {spec.dtype.name}{list(spec.shape)}"
        + (f" {spec.name}" if (spec.name or "").startswith((ROWS_OF, FRAMES_OF)) else "")
        for path, spec in flat
    ]
    return "{" + ", ".join(parts) + "}"


def signatures_match(expected: object, actual: object) -> bool:
    """True when both signatures have the same structure, shapes and dtypes.

    A dimension `expected` leaves unknown (None) matches any size.
    """
    try:
        tf.nest.assert_same_structure(expected, actual)
    except (ValueError, TypeError):
        return False
    pairs = zip(tf.nest.flatten(expected), tf.nest.flatten(actual))
    return all(_shape_matches(a.shape, b.shape) and a.dtype == b.dtype for a, b in pairs)


def _shape_matches(expected: tf.TensorShape, actual: tf.TensorShape) -> bool:
    if expected.rank is None or actual.rank is None or expected.rank != actual.rank:
        return expected.rank == actual.rank
    return all(e is None or e == a for e, a in zip(expected.as_list(), actual.as_list()))
