"""sac-actor: collects experience into the replay table.

    sac-actor --root_dir=/tmp/sac --task=0 --replay_buffer_server_address=localhost:8008 \
        --variable_container_server_address=localhost:8008
"""

from absl import flags

from sac_distributed import config as config_lib
from sac_distributed.bin import _common
from sac_distributed.runtime import StopSignal

flags.DEFINE_integer("task", 0, "Index of this actor (logs, summaries, seeds).")
flags.DEFINE_bool(
    "claim_task",
    False,
    "Instead of --task, take the lowest index no running actor of this --root_dir "
    "holds: for replicas that all run one command (docker compose --scale, a "
    "Kubernetes Deployment).",
)
flags.DEFINE_integer("num_envs", 1, "Environments stepped together with one policy call.")
flags.DEFINE_integer(
    "variable_update_interval",
    None,
    "Actor steps between weight pulls (default: 1000 for an env with a preset, 10 without).",
)
flags.DEFINE_integer("max_env_steps", None, "Stop after this many env steps (default: never).")
FLAGS = flags.FLAGS


def _config_from_flags() -> config_lib.ActorConfig:
    return config_lib.ActorConfig(
        env_name=FLAGS.env_name,
        env_kwargs=FLAGS.env_kwargs,
        hparams=_common.hyperparams(),
        root_dir=_common.root_dir(),
        client=_common.client_config(),
        task=FLAGS.task,
        claim_task=FLAGS.claim_task,
        num_envs=FLAGS.num_envs,
        max_env_steps=FLAGS.max_env_steps,
        seed=FLAGS.seed,
        **_pull_interval(),
    )


def _pull_interval() -> dict:
    """The flag's interval, else the env's default (none given: ActorConfig's)."""
    interval = config_lib.variable_update_interval_for(
        FLAGS.env_name, FLAGS.variable_update_interval
    )
    return {} if interval is None else {"variable_update_interval": interval}


def main() -> None:
    config = _config_from_flags()
    _common.refuse_another_run(config)
    from sac_distributed import jobs  # TensorFlow only now, once the flags have passed

    jobs.run_actor(config, StopSignal().install())


def run() -> None:
    _common.run_job(main)


if __name__ == "__main__":
    run()
