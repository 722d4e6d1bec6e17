"""The replay: everything about how experience is stored, in one package.

Like Acme's builder, this package owns the replay format end to end, so the
actor, the n-step accumulator, the server and the learner call it and do no
arithmetic on rows of their own. Its modules are layered; each imports only
the ones before it:

* `layout`: one transition as one flat float32 row (`RowLayout`);
* `frames`: a pixel transition's frames stored once (`FrameLayout`, and its
  writer `FrameWriter`);
* `signatures`: the table names and the signatures of their items;
* `tables`: the server's tables, rate limiter and shard sizing;
* `connection`: connecting (with backoff), `TRANSIENT_ERRORS`, a job's clients;
* `counts`: what the tables hold, in items and in transitions;
* `checks`: the start-up checks of a job against the server's tables;
* then, side by side: `writer` (actors), `dataset` (learner), `variables`
  (the variable container), `priorities` (prioritized replay's updater),
  `nstep` (n-step rows) and `replay_checkpoints`.

A new replay format is a change in this package alone. The names below are
re-exported so that `replay.X` keeps working; `variables`, `priorities`,
`nstep`, `connection` and `replay_checkpoints` are imported by module.
"""

from sac_distributed.replay.checks import (
    check_frame_n_step,
    check_max_priority_table,
    check_replay_sampler,
    check_server_tables,
    check_shard_capacity,
    check_table_signature,
    check_transitions_per_item,
)
from sac_distributed.replay.connection import TRANSIENT_ERRORS, connect, open_trajectory_writer
from sac_distributed.replay.counts import (
    TransitionCounts,
    stored_items,
    stored_transitions,
    table_counts,
    table_info,
    table_transitions_per_item,
    transition_counts,
    wait_for_table_size,
)
from sac_distributed.replay.dataset import (
    DEFAULT_PARALLEL_DATASETS,
    SampleInfo,
    batch_shares,
    items_to_transition,
    make_dataset,
    to_transition,
)
from sac_distributed.replay.frames import FrameLayout, FrameWriter, frame_layout
from sac_distributed.replay.layout import (
    ACTION,
    DISCOUNT,
    NEXT_OBSERVATION,
    OBSERVATION,
    REWARD,
    TRANSITION_FIELDS,
    TRANSITIONS,
    RowLayout,
    pack_row,
    pack_transition,
    row_layout,
)
from sac_distributed.replay.signatures import (
    LEARNER_DONE,
    MAX_PRIORITY,
    MAX_PRIORITY_TABLE,
    OBSERVATION_CLIP,
    OBSERVATION_MEAN,
    OBSERVATION_STD,
    POLICY_VARIABLES,
    REPLAY_TABLE,
    TRAIN_STEP,
    VARIABLE_TABLE,
    describe_signature,
    max_priority_signature,
    signatures_match,
    transition_signature,
    transitions_per_item_of,
    variable_signature,
)
from sac_distributed.replay.tables import (
    INITIAL_PRIORITY,
    latest_value_table,
    make_rate_limiter,
    make_tables,
    max_priority_table,
    replay_sampler,
    shard_capacity_items,
    shard_error_buffer,
    shard_min_size_items,
    validate_server_config,
)
from sac_distributed.replay.writer import MAX_ITEMS_IN_FLIGHT, TransitionWriter

__all__ = [
    "ACTION",
    "DEFAULT_PARALLEL_DATASETS",
    "DISCOUNT",
    "INITIAL_PRIORITY",
    "LEARNER_DONE",
    "MAX_ITEMS_IN_FLIGHT",
    "MAX_PRIORITY",
    "MAX_PRIORITY_TABLE",
    "NEXT_OBSERVATION",
    "OBSERVATION",
    "OBSERVATION_CLIP",
    "OBSERVATION_MEAN",
    "OBSERVATION_STD",
    "POLICY_VARIABLES",
    "REPLAY_TABLE",
    "REWARD",
    "TRAIN_STEP",
    "TRANSIENT_ERRORS",
    "TRANSITIONS",
    "TRANSITION_FIELDS",
    "VARIABLE_TABLE",
    "RowLayout",
    "SampleInfo",
    "TransitionCounts",
    "TransitionWriter",
    "batch_shares",
    "check_max_priority_table",
    "check_frame_n_step",
    "check_replay_sampler",
    "check_server_tables",
    "check_shard_capacity",
    "check_table_signature",
    "check_transitions_per_item",
    "connect",
    "describe_signature",
    "items_to_transition",
    "latest_value_table",
    "make_dataset",
    "make_rate_limiter",
    "make_tables",
    "max_priority_signature",
    "max_priority_table",
    "open_trajectory_writer",
    "pack_row",
    "pack_transition",
    "replay_sampler",
    "row_layout",
    "FrameLayout",
    "FrameWriter",
    "frame_layout",
    "shard_capacity_items",
    "shard_error_buffer",
    "shard_min_size_items",
    "signatures_match",
    "stored_items",
    "stored_transitions",
    "table_counts",
    "table_info",
    "table_transitions_per_item",
    "to_transition",
    "transition_counts",
    "transition_signature",
    "transitions_per_item_of",
    "validate_server_config",
    "variable_signature",
    "wait_for_table_size",
]
