"""sac-evaluator: the run's evaluator job, evaluating the learner's weights during training.

It reads the learner's latest weights from the run's Reverb server (the variable
container) while the run trains and appends one row of greedy-policy returns per
--eval_interval to root_dir/eval/results.csv. To evaluate an exported policy
directory after or outside a run (no server, with --video), use sac-evaluate.

    sac-evaluator --root_dir=/tmp/sac --variable_container_server_address=localhost:8008

The replay address (read only for the env-step count of each row) defaults to
the variable container's.
"""

from absl import flags

from sac_distributed import config as config_lib
from sac_distributed.bin import _common
from sac_distributed.runtime import StopSignal

flags.DEFINE_float("poll_interval", 1.0, "Seconds between checks of the learner's progress.")
FLAGS = flags.FLAGS


def _config_from_flags() -> config_lib.EvaluatorConfig:
    return config_lib.EvaluatorConfig(
        env_name=FLAGS.env_name,
        env_kwargs=FLAGS.env_kwargs,
        hparams=_common.hyperparams(),
        root_dir=_common.root_dir(),
        client=_common.client_config(replay_defaults_to_variables=True),
        poll_interval_s=FLAGS.poll_interval,
        seed=FLAGS.seed,
    )


def main() -> None:
    config = _config_from_flags()
    _common.refuse_another_run(config)
    from sac_distributed import jobs  # TensorFlow only now, once the flags have passed

    jobs.run_evaluator(config, StopSignal().install())


def run() -> None:
    _common.run_job(main)


if __name__ == "__main__":
    run()
