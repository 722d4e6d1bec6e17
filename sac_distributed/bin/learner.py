"""sac-learner: trains SAC on the replay table and publishes weights.

    sac-learner --root_dir=/tmp/sac --strategy=default \
        --replay_buffer_server_address=localhost:8008 \
        --variable_container_server_address=localhost:8008
"""

from absl import flags

from sac_distributed import config as config_lib
from sac_distributed.bin import _common
from sac_distributed.runtime import StopSignal

flags.DEFINE_enum("strategy", "default", list(config_lib.STRATEGIES), "tf.distribute strategy.")
flags.DEFINE_string("tpu", None, "TPU address or name, for --strategy=tpu.")
flags.DEFINE_integer(
    "num_logical_cpus", None, "Split the CPU into N logical devices (mirrored on CPU)."
)
flags.DEFINE_integer("steps_per_call", 50, "SGD steps per tf.function call.")
flags.DEFINE_integer("variable_push_interval", 100, "Train steps between weight pushes.")
flags.DEFINE_integer("checkpoint_interval", 10_000, "Train steps between checkpoints.")
flags.DEFINE_integer("summary_interval", 1_000, "Train steps between TensorBoard summaries.")
FLAGS = flags.FLAGS


def _config_from_flags() -> config_lib.LearnerConfig:
    return config_lib.LearnerConfig(
        env_name=FLAGS.env_name,
        env_kwargs=FLAGS.env_kwargs,
        hparams=_common.hyperparams(),
        root_dir=_common.root_dir(),
        client=_common.client_config(),
        strategy=FLAGS.strategy,
        tpu=FLAGS.tpu,
        steps_per_call=FLAGS.steps_per_call,
        variable_push_interval=FLAGS.variable_push_interval,
        checkpoint_interval=FLAGS.checkpoint_interval,
        summary_interval=FLAGS.summary_interval,
        seed=FLAGS.seed,
    )


def main() -> None:
    config = _config_from_flags()
    _common.refuse_another_run(config)
    # TensorFlow only now, once the flags have passed (see the package docstring).
    from sac_distributed import jobs
    from sac_distributed.algorithm import strategy as strategy_lib

    if FLAGS.num_logical_cpus:
        strategy_lib.use_logical_cpus(FLAGS.num_logical_cpus)
    stop = StopSignal(finishing="writing the last checkpoint and policies")
    jobs.run_learner(config, stop.install())


def run() -> None:
    _common.run_job(main)


if __name__ == "__main__":
    run()
