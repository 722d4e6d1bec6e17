"""sac-launch: the whole job, each piece in its own process, here or on a Ray cluster.

    sac-launch                                 # embedded default: Pendulum-v1
    sac-launch --env_name=HalfCheetahBulletEnv-v0 --num_actors=2 --root_dir=/tmp/cheetah
    sac-launch --engine=ray --ray_address=auto --num_actors=8   # on a running Ray cluster

The flags here (hyperparameters, --seed, --connect_timeout, --num_envs, --strategy,
...) build one typed config per job (`job_definitions.make_run_configs`), validated
before any process starts; each job then gets the flags that rebuild its config
(`job_definitions.job_specs`), every hyperparameter included.
"""

import os
import sys
import time

import portpicker
from absl import flags

from sac_distributed import config as config_lib
from sac_distributed import job_definitions, paths
from sac_distributed.bin import _common
from sac_distributed.errors import ConfigError, PortInUseError
from sac_distributed.launch import LaunchResult, Supervisor, print_summary
from sac_distributed.runtime import StopSignal, check_root_dir, port_in_use

flags.DEFINE_integer("num_actors", 1, "Actor processes to start.")
flags.DEFINE_integer("port", 0, "Reverb server port (0 picks a free one).")
flags.DEFINE_integer("num_envs", None, "Environments per actor.")
flags.DEFINE_integer(
    "variable_update_interval", None, "Actor steps between weight pulls (actor default: 1000)."
)
flags.DEFINE_enum("strategy", None, list(config_lib.STRATEGIES), "Learner strategy.")
flags.DEFINE_enum(
    "engine",
    "local",
    list(config_lib.ENGINES),
    "local: processes on this machine; ray: Ray actors on a Ray cluster (pip install '.[ray]').",
)
flags.DEFINE_string(
    "ray_address",
    None,
    "Ray cluster to join: auto, host:port or ray://host:port (unset: a local one).",
)
flags.DEFINE_float("learner_gpus", 0.0, "GPUs the learner asks Ray for (--engine=ray).")
flags.DEFINE_float("actor_cpus", 1.0, "CPUs each actor asks Ray for (--engine=ray).")
flags.DEFINE_integer(
    "max_restarts", 3, "Times Ray restarts a job whose process died (--engine=ray; -1: always)."
)
FLAGS = flags.FLAGS


def _config_from_flags() -> config_lib.LaunchConfig:
    hparams = _common.hyperparams()  # resolved once, here, and given to every job
    root_dir = FLAGS.root_dir or os.path.join(
        "sac_runs", f"{FLAGS.env_name}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    check_root_dir(root_dir)
    if FLAGS.engine == "local" and FLAGS.port and port_in_use(FLAGS.port):
        raise PortInUseError(
            f"Port {FLAGS.port} is already in use (by a running Reverb server or another "
            "program). Stop it first, or pass another --port (0 picks a free one)."
        )
    return config_lib.LaunchConfig(
        root_dir=os.path.abspath(root_dir),
        env_name=FLAGS.env_name,
        hparams=hparams,
        num_actors=FLAGS.num_actors,
        port=FLAGS.port,
        connect_timeout_s=FLAGS.connect_timeout,
        seed=FLAGS.seed,
        num_envs=FLAGS.num_envs,
        variable_update_interval=FLAGS.variable_update_interval,
        strategy=FLAGS.strategy,
        engine=FLAGS.engine,
        ray_address=FLAGS.ray_address,
        learner_gpus=FLAGS.learner_gpus,
        actor_cpus=FLAGS.actor_cpus,
        max_restarts=FLAGS.max_restarts,
    )


def main() -> int:
    config = _config_from_flags()
    if config.engine == "ray":
        result = _run_on_ray(config)
    else:
        result = _run_here(config)
    print(f"sac-launch: {result.message}", flush=True)
    print_summary(config.root_dir)
    if result.exit_code:
        sys.exit(result.exit_code)
    return 0


def _run_here(config: config_lib.LaunchConfig) -> LaunchResult:
    port = config.port or portpicker.pick_unused_port()
    specs = job_definitions.job_specs(
        job_definitions.make_run_configs(config, port), verbose=FLAGS.verbose
    )
    print(
        f"sac-launch: {config.env_name} with {config.num_actors} actor(s), Reverb on "
        f"localhost:{port}, root_dir {config.root_dir}",
        flush=True,
    )
    supervisor = Supervisor(specs, paths.log_dir(config.root_dir), verbose=FLAGS.verbose)
    stop = StopSignal().install()
    stop_watch = _relay(stop, supervisor)
    result = supervisor.run()
    stop_watch.set()
    return result


def _run_on_ray(config: config_lib.LaunchConfig) -> LaunchResult:
    try:
        import ray

        from sac_distributed import ray_launch
    except ImportError as error:
        raise ConfigError(
            f"--engine=ray needs Ray ({error}): pip install -e '.[ray]' on every node."
        ) from error
    started_here = ray_launch.connect(config.ray_address, ray_launch.cpus_needed(config))
    try:
        actors, address = ray_launch.start_jobs(config, FLAGS.verbose)
        nodes = len([n for n in ray.nodes() if n.get("Alive")])
        print(
            f"sac-launch: {config.env_name} with {config.num_actors} actor(s) on a Ray cluster "
            f"of {nodes} node(s), Reverb on {address}, root_dir {config.root_dir}",
            flush=True,
        )
        stop = StopSignal().install()
        return ray_launch.RayRun(actors, stop).run()
    finally:
        if started_here:
            ray.shutdown()


def _relay(stop: StopSignal, supervisor: Supervisor):
    """Forwards a stop signal to the supervisor from a watcher thread."""
    import threading

    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if stop.wait(0.2):
                supervisor.request_stop()
                return

    threading.Thread(target=watch, daemon=True).start()
    return done


def run() -> None:
    _common.run(main)


if __name__ == "__main__":
    run()
