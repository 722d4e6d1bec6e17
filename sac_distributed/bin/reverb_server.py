"""sac-reverb-server: the Reverb server with the replay and variable tables.

sac-reverb-server --root_dir=/tmp/sac --env_name=Pendulum-v1 --port=8008
"""

from absl import flags

from sac_distributed import config as config_lib
from sac_distributed.bin import _common
from sac_distributed.runtime import StopSignal

flags.DEFINE_integer("port", config_lib.DEFAULT_PORT, "Port to serve on (0 picks a free one).")
flags.DEFINE_float(
    "samples_per_insert_error_buffer", None, "Error buffer of SampleToInsertRatio (derived)."
)
flags.DEFINE_float("stats_interval", 30.0, "Seconds between table statistics log lines.")
flags.DEFINE_float(
    "replay_checkpoint_interval", 600.0, "Seconds between replay checkpoints (0: only at exit)."
)
flags.DEFINE_integer(
    "replay_checkpoints_to_keep",
    2,
    "Replay checkpoints kept; an unreadable newest one falls back to the one before.",
)
flags.DEFINE_boolean(
    "replay_start_empty",
    False,
    "Start with an empty replay when no replay checkpoint can be read (they are moved to "
    "replay_checkpoints/.unreadable) instead of refusing to start.",
)
flags.DEFINE_integer(
    "num_replay_shards",
    1,
    "Servers sharing the replay; this one holds replay_buffer_capacity / num_replay_shards.",
)
flags.DEFINE_integer("replay_shard", 0, "This server's shard index in [0, num_replay_shards - 1].")
FLAGS = flags.FLAGS


def _config_from_flags() -> config_lib.ServerConfig:
    return config_lib.ServerConfig(
        env_name=FLAGS.env_name,
        env_kwargs=FLAGS.env_kwargs,
        hparams=_common.hyperparams(),
        root_dir=_common.root_dir(),
        port=FLAGS.port,
        samples_per_insert_error_buffer=FLAGS.samples_per_insert_error_buffer,
        stats_interval_s=FLAGS.stats_interval,
        replay_checkpoint_interval_s=FLAGS.replay_checkpoint_interval,
        replay_checkpoints_to_keep=FLAGS.replay_checkpoints_to_keep,
        replay_start_empty=FLAGS.replay_start_empty,
        num_replay_shards=FLAGS.num_replay_shards,
        replay_shard=FLAGS.replay_shard,
    )


def main() -> None:
    config = _config_from_flags()
    _common.refuse_another_run(config)
    from sac_distributed import jobs  # TensorFlow only now, once the flags have passed

    stop = StopSignal(finishing="writing the replay checkpoint").install()
    jobs.run_server(config, stop, stop.wait)


def run() -> None:
    _common.run_job(main)


if __name__ == "__main__":
    run()
