"""The run-shape flags of sac-launch and sac-render: how many of each job, and their options.

Both binaries build a `LaunchConfig` from the same flags, so they are defined
once, here; a binary that needs another default (sac-render's two actor
replicas) sets it with `FLAGS.set_default` after importing this module.
"""

from __future__ import annotations

from absl import flags

from sac_distributed import config as config_lib
from sac_distributed.bin import _common

FLAGS = flags.FLAGS

flags.DEFINE_integer("num_actors", 1, "Actors to start (processes, Ray actors or replicas).")
flags.DEFINE_integer(
    "num_replay_shards",
    1,
    "Reverb servers that share the replay, each holding 1/N of it (the first also holds "
    "the policy weights); clients insert into and sample from all of them.",
)
flags.DEFINE_integer("num_envs", None, "Environments per actor.")
flags.DEFINE_integer(
    "variable_update_interval",
    None,
    "Actor steps between weight pulls (default: 1000 for an env with a preset, 10 without).",
)
flags.DEFINE_float(
    "samples_per_insert_error_buffer",
    None,
    "How far (in samples) the learner and the actors may drift from --samples_per_insert "
    "before Reverb blocks one of them; the actors may run ahead by this / samples_per_insert "
    "transitions. Unset: derived (a tenth of the warm-up).",
)
flags.DEFINE_enum("strategy", None, list(config_lib.STRATEGIES), "Learner strategy.")
flags.DEFINE_integer(
    "checkpoint_interval",
    None,
    "Train steps between the learner's checkpoints (default 10000); a run resumed in the "
    "same --root_dir after a crash restarts from the last one.",
)

# The flags above, for --help (bin/_common.run).
RUN_FLAGS = (
    "num_actors",
    "num_replay_shards",
    "num_envs",
    "variable_update_interval",
    "samples_per_insert_error_buffer",
    "strategy",
    "checkpoint_interval",
)


def launch_settings() -> dict:
    """The LaunchConfig fields that the flags give (all but root_dir, port and the engine's).

    Resolves the hyperparameters once, here, for every job.
    """
    return dict(
        env_name=FLAGS.env_name,
        env_kwargs=FLAGS.env_kwargs,
        hparams=_common.hyperparams(),
        num_actors=FLAGS.num_actors,
        num_replay_shards=FLAGS.num_replay_shards,
        connect_timeout_s=FLAGS.connect_timeout,
        shard_probe_interval_s=FLAGS.shard_probe_interval,
        seed=FLAGS.seed,
        num_envs=FLAGS.num_envs,
        variable_update_interval=FLAGS.variable_update_interval,
        samples_per_insert_error_buffer=FLAGS.samples_per_insert_error_buffer,
        strategy=FLAGS.strategy,
        checkpoint_interval=FLAGS.checkpoint_interval,
    )
