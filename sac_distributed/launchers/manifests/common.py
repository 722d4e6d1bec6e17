"""What Kubernetes and Compose share: the jobs' command lines from the job definitions,
the console scripts, the data directory, ports and the server's health check."""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, List, Optional, Sequence, Union

from sac_distributed import config as config_lib
from sac_distributed.config import ConfigError, LaunchConfig
from sac_distributed.launchers import job_definitions

ENGINES = ("kubernetes", "compose")
DATA_DIR = "/data"  # where every job's volume is mounted; --root_dir
REVERB_PORT = config_lib.DEFAULT_PORT
TENSORBOARD_PORT = 6006
ACTOR = "actor"  # the job name of every actor replica
JOBS = (job_definitions.SERVER, job_definitions.LEARNER, ACTOR, job_definitions.EVALUATOR)
TENSORBOARD = "tensorboard"
# The console script of each binary (setup.py's entry points): what the image runs.
SCRIPTS = {
    "sac_distributed.bin.reverb_server": "sac-reverb-server",
    "sac_distributed.bin.learner": "sac-learner",
    "sac_distributed.bin.actor": "sac-actor",
    "sac_distributed.bin.evaluator": "sac-evaluator",
}
TENSORBOARD_COMMAND = (
    "tensorboard",
    f"--logdir={DATA_DIR}",
    "--host=0.0.0.0",
    f"--port={TENSORBOARD_PORT}",
)

DEFAULT_IMAGE = "sac-distributed:latest"  # what launch/docker-compose.yml builds


# The image name the READMEs write for "yours"; rendering it is almost surely a mistake.
PLACEHOLDER_IMAGE = re.compile(r"(^|/)REGISTRY/|:TAG$")


def image_warning(image: str) -> Optional[str]:
    """A warning when `image` is still the documentation's placeholder, else None."""
    if not PLACEHOLDER_IMAGE.search(image):
        return None
    return (
        f"--image={image} is the documentation's placeholder: build launch/Dockerfile's image, "
        "push it where the cluster pulls from, and pass its name "
        "(e.g. --image=registry.example.com/sac-distributed:0.1.0)."
    )


def healthcheck_argv(port: int = REVERB_PORT) -> List[str]:
    """The server's health check, run inside its container: a TCP connect to the port.

    Compose's healthcheck and the Kubernetes probes run this same command.
    """
    probe = f'import socket; socket.create_connection(("localhost", {port}), 5).close()'
    return ["python", "-c", probe]


def job_commands(
    launch: LaunchConfig, server_hosts: Union[str, Sequence[str]], preset_hparams: bool = False
) -> Dict[str, List[str]]:
    """Job -> its container's command line: each server (`job_definitions.server_names`),
    the learner, the actor and the evaluator.

    Clients address shard i's server as `server_hosts[i]`:REVERB_PORT (one host
    for an unsharded run). With `preset_hparams`, hyperparameters equal to the
    environment's preset are left out (the binaries fill them in from that preset).
    """
    if launch.seed is not None and launch.num_actors > 1:
        raise ConfigError(
            "--seed with several actors: every replica runs the same command, so they "
            "would all collect the same experience. Leave --seed out (each replica "
            "seeds itself from OS entropy)."
        )
    configs = job_definitions.make_run_configs(
        dataclasses.replace(launch, num_actors=1), REVERB_PORT, hosts=server_hosts
    )
    # Replicas share the command and the volume, so each takes a free task index
    # at start (jobs/actor_slot.py) instead of all writing task 0's files.
    actor = dataclasses.replace(configs.actors[0], claim_task=True)
    configs = dataclasses.replace(configs, actors=(actor,))
    preset = config_lib.hyperparams_for(launch.env_name)
    # An env without a preset derives some values from others (config.generic_defaults),
    # so each of its jobs gets every value spelled out.
    drop = preset_hparams and launch.env_name in config_lib.PRESETS
    dropped = set(job_definitions.hyperparam_flags(preset)) if drop else set()
    commands = {}
    for spec in job_definitions.job_specs(configs):
        job = ACTOR if spec.name.startswith(f"{ACTOR}_") else spec.name
        commands[job] = [SCRIPTS[spec.module], *(f for f in spec.flags if f not in dropped)]
    return commands
