"""sac-launch: the whole job, each piece in its own process (here or on a Ray cluster) or thread.

    sac-launch                                 # embedded default: Pendulum-v1
    sac-launch --env_name=HalfCheetahBulletEnv-v0 --num_actors=2 --root_dir=/tmp/cheetah
    sac-launch --engine=ray --ray_address=auto --num_actors=8   # on a running Ray cluster
    sac-launch --num_replay_shards=2 --num_actors=4   # the replay split over 2 Reverb servers
    sac-launch --engine=threads                # every job a thread of one process: quick start

The flags here (hyperparameters, --seed, --connect_timeout, --num_envs, --strategy,
--num_replay_shards, ...; the run-shape ones shared with sac-render in
bin/_run_flags.py) build one typed config per job (`job_definitions.make_run_configs`), validated
before any process starts; each job then gets the flags that rebuild its config
(`job_definitions.job_specs`), every hyperparameter included.

With --num_replay_shards=N, N servers run, on ports --port, --port+1, ... (or N
free ports when --port is 0; on Ray each on its node), and the last lines say
what each shard held, inserted and had sampled when the run ended.
"""

import dataclasses
import os
import re
import sys
import time
from typing import Callable, List, Optional, Sequence, Tuple

from absl import flags

from sac_distributed import config as config_lib
from sac_distributed import paths
from sac_distributed.algorithm.pixel_policy import check_image_size
from sac_distributed.bin import _common, _run_flags
from sac_distributed.envs import observations, random_rollout
from sac_distributed.envs import sources as env_sources
from sac_distributed.errors import ConfigError, PortInUseError
from sac_distributed.launchers import job_definitions
from sac_distributed.launchers.supervisor import (
    LaunchResult,
    Supervisor,
    print_shards,
    print_summary,
)
from sac_distributed.run_info import check_same_run
from sac_distributed.runtime import StopSignal, check_root_dir, port_in_use

flags.DEFINE_integer(
    "port", 0, "Reverb server port (0 picks a free one); replay shard i listens on port + i."
)
flags.DEFINE_enum(
    "engine",
    "local",
    list(config_lib.ENGINES),
    "local: processes on this machine; ray: Ray actors on a Ray cluster (pip install "
    "'.[ray]'); threads: every job as a thread of this process (one TensorFlow import: "
    "quicker to start, but one log and no restart of a single job).",
)
flags.DEFINE_string(
    "ray_address",
    None,
    "Ray cluster to join: auto, host:port or ray://host:port (unset: a local one).",
)
flags.DEFINE_float("learner_gpus", 0.0, "GPUs the learner asks Ray for (--engine=ray).")
flags.DEFINE_float(
    "actor_cpus", 1.0, "CPUs each actor asks Ray for (--engine=ray); a fraction or 0 is allowed."
)
flags.DEFINE_integer(
    "max_restarts", 3, "Times Ray restarts a job whose process died (--engine=ray; -1: always)."
)
FLAGS = flags.FLAGS
# What a second Ctrl-C (or SIGTERM) to the launcher is told it does not interrupt.
_STOPPING_JOBS = "stopping the jobs, each within its grace period"


def _config_from_flags() -> config_lib.LaunchConfig:
    camera = _check_env()
    run_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", FLAGS.env_name)  # module:factory names too
    root_dir = FLAGS.root_dir or os.path.join(
        "sac_runs", f"{run_name}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    check_root_dir(root_dir)
    if FLAGS.engine in ("local", "threads") and FLAGS.port:
        for port in job_definitions.shard_ports(FLAGS.port, max(1, FLAGS.num_replay_shards)):
            _check_port_free(port)
    config = config_lib.LaunchConfig(
        root_dir=os.path.abspath(root_dir),
        port=FLAGS.port,
        engine=FLAGS.engine,
        ray_address=FLAGS.ray_address,
        learner_gpus=FLAGS.learner_gpus,
        actor_cpus=FLAGS.actor_cpus,
        max_restarts=FLAGS.max_restarts,
        **_run_flags.launch_settings(),  # hyperparameters resolved once, here, for every job
    )
    if camera:
        observations.check_camera_options(config.hparams, config.env_name)
        check_image_size(camera, config.env_name)
    return config


def _check_env() -> Optional[Tuple[int, ...]]:
    """Makes the env once: a wrong name, a missing package or an env SAC cannot train
    is refused here, before any directory or process exists. A user module's folder
    goes on PYTHONPATH, so every job (and a restarted one) imports it too. The image
    shape of an env observing a camera, else None."""
    source, observed, camera = env_sources.check_env_name(FLAGS.env_name, FLAGS.env_kwargs)
    if source.kind not in (env_sources.GYM, env_sources.PYBULLET) or source.module:
        print(f"sac-launch: env {source.describe()}", flush=True)
    if observed:
        print(f"sac-launch: {observed}", flush=True)
    os.environ.update(env_sources.with_pythonpath(os.environ, source.module_dir))
    return camera


def untuned_warnings(config: config_lib.LaunchConfig) -> List[str]:
    """What a random rollout of an env without a preset says the generic defaults may not
    handle (config.untuned_warnings), each line naming the flag to change."""
    kwargs = config_lib.parse_env_kwargs(config.env_kwargs)
    try:
        rollout = random_rollout.rollout_of(config.env_name, kwargs)
    except Exception as e:  # the jobs' checked env names a failing step; warn only here
        first = str(e).splitlines()[0] if str(e) else ""
        return [f"a random rollout of {config.env_name} failed ({type(e).__name__}: {first})"]
    return config_lib.untuned_warnings(config.env_name, rollout, config.hparams)


def _check_port_free(port: int) -> None:
    if port_in_use(port):
        raise PortInUseError(
            f"Port {port} is already in use (by a running Reverb server or another program). "
            "Stop it first, or pass another --port (0 picks free ones; replay shard i uses "
            "--port + i)."
        )


def main() -> int:
    config = _config_from_flags()
    # A root_dir of another run is refused before any job starts (each job checks too).
    check_same_run(config.root_dir, config.env_name, config.hparams, config.env_kwargs)
    if config.env_name not in config_lib.PRESETS:
        banner = config_lib.describe_generic_defaults(
            config.env_name, config.hparams, config.variable_update_interval
        )
        print(f"sac-launch: {banner}")
        for line in untuned_warnings(config):
            print(f"sac-launch: warning: {line}", flush=True)
    if config.engine == "ray":
        result = _run_on_ray(config)
    elif config.engine == "threads":
        result = _run_in_threads(config)
    else:
        result = _run_here(config)
    print(f"sac-launch: {result.message}", flush=True)
    print_summary(config.root_dir)
    print_shards(result.shards, result.exit_codes)
    if result.exit_code:
        sys.exit(result.exit_code)
    return 0


def _run_here(config: config_lib.LaunchConfig) -> LaunchResult:
    ports = job_definitions.shard_ports(config.port, config.num_replay_shards)
    configs = job_definitions.make_run_configs(config, ports)
    specs = job_definitions.job_specs(configs, verbose=FLAGS.verbose)
    addresses = configs.learner.client.replay_addresses
    print(
        f"sac-launch: {config.env_name} with {config.num_actors} actor(s), Reverb on "
        f"{_shards_text(addresses)}, root_dir {config.root_dir}",
        flush=True,
    )
    servers = job_definitions.server_names(config.num_replay_shards)
    shards: List = []
    supervisor = Supervisor(
        specs,
        paths.log_dir(config.root_dir),
        verbose=FLAGS.verbose,
        server_ports=dict(zip(servers, ports)),
        server_start_timeout_s=config.connect_timeout_s,
        before_servers_stop=_read_shards_into(shards, addresses),
    )
    # A second Ctrl-C must not end the launcher while its jobs, each in its own
    # session, still run: it is logged, and the stop goes on within its deadlines.
    stop = StopSignal(finishing=_STOPPING_JOBS).install()
    stop_watch = _relay(stop, supervisor)
    result = supervisor.run()
    stop_watch.set()
    return dataclasses.replace(result, shards=tuple(shards))


def _run_in_threads(config: config_lib.LaunchConfig) -> LaunchResult:
    from sac_distributed.launchers.thread_launch import ThreadRun

    ports = job_definitions.shard_ports(config.port, config.num_replay_shards)
    configs = job_definitions.make_run_configs(config, ports)
    addresses = configs.learner.client.replay_addresses
    print(
        f"sac-launch: {config.env_name} with {config.num_actors} actor(s) as threads of this "
        f"process, Reverb on {_shards_text(addresses)}, root_dir {config.root_dir}",
        flush=True,
    )
    shards: List = []
    run = ThreadRun(
        configs,
        ports,
        StopSignal(finishing="stopping the jobs and writing the replay checkpoint").install(),
        before_servers_stop=_read_shards_into(shards, addresses),
        server_start_timeout_s=config.connect_timeout_s,
    )
    return dataclasses.replace(run.run(), shards=tuple(shards))


def _shards_text(addresses: Sequence[str]) -> str:
    if len(addresses) == 1:
        return addresses[0]
    return f"{', '.join(addresses)} ({len(addresses)} replay shards)"


def _read_shards_into(shards: List, addresses: Sequence[str]) -> Callable[[], None]:
    """A last read of every shard's replay counters, for the summary (Reverb and TF load here)."""

    def read() -> None:
        from sac_distributed.tools import status

        shards.extend(status.read_shards(addresses))

    return read


def _run_on_ray(config: config_lib.LaunchConfig) -> LaunchResult:
    try:
        import ray

        from sac_distributed.launchers import ray_launch
    except ImportError as error:
        raise ConfigError(
            f"--engine=ray needs Ray ({error}): pip install -e '.[ray]' on every node."
        ) from error
    started_here = ray_launch.connect(config.ray_address, ray_launch.cpus_needed(config))
    try:
        actors, addresses = ray_launch.start_jobs(config, FLAGS.verbose)
        nodes = len([n for n in ray.nodes() if n.get("Alive")])
        print(
            f"sac-launch: {config.env_name} with {config.num_actors} actor(s) on a Ray cluster "
            f"of {nodes} node(s), Reverb on {_shards_text(addresses)}, root_dir "
            f"{config.root_dir}",
            flush=True,
        )
        stop = StopSignal(finishing=_STOPPING_JOBS).install()
        shards: List = []
        run = ray_launch.RayRun(
            actors, stop, before_servers_stop=_read_shards_into(shards, addresses)
        )
        return dataclasses.replace(run.run(), shards=tuple(shards))
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
    _common.run(main, _common.SHARED_FLAGS + _run_flags.RUN_FLAGS)


if __name__ == "__main__":
    run()
