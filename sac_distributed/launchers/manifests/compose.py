"""Docker Compose: the command lines of launch/docker-compose.yml and, for replay
shards, the override file's services."""

from __future__ import annotations

from typing import Dict, List

from sac_distributed.config import LaunchConfig
from sac_distributed.launchers import job_definitions
from sac_distributed.launchers.manifests.common import (
    ACTOR,
    DATA_DIR,
    DEFAULT_IMAGE,
    TENSORBOARD,
    TENSORBOARD_COMMAND,
    healthcheck_argv,
    job_commands,
)

COMPOSE_SERVICES = {
    job_definitions.SERVER: "reverb_server",
    job_definitions.LEARNER: "learner",
    ACTOR: "actor",
    job_definitions.EVALUATOR: "evaluator",
    TENSORBOARD: "tensorboard",
}
COMPOSE_ENV_VARIABLE = "SAC_ENV_NAME"
COMPOSE_SERVER_GRACE = "120s"  # launch/docker-compose.yml's stop_grace_period of the server
# launch/Dockerfile's FROM: Docker Hub's image unless SAC_BASE_IMAGE names another.
BASE_IMAGE_VARIABLE = "SAC_BASE_IMAGE"
DEFAULT_BASE_IMAGE = "python:3.11-slim"


def compose_server_services(num_shards: int) -> List[str]:
    """Each shard's Compose service: `reverb_server` for shard 0, `reverb_server_<i>` after."""
    base = COMPOSE_SERVICES[job_definitions.SERVER]
    return [base] + [f"{base}_{shard}" for shard in range(1, num_shards)]


def compose_commands(launch: LaunchConfig) -> Dict[str, List[str]]:
    """Compose service -> its `command:`, as launch/docker-compose.yml must have it
    (for replay shards: the override file's services, see `compose_services`)."""
    servers = compose_server_services(launch.num_replay_shards)
    commands = job_commands(launch, servers, preset_hparams=True)
    env_flag = f"--env_name={launch.env_name}"
    variable = f"--env_name=${{{COMPOSE_ENV_VARIABLE}:-{launch.env_name}}}"
    services = dict(zip(job_definitions.server_names(len(servers)), servers))
    services.update({job: COMPOSE_SERVICES[job] for job in commands if job not in services})
    rendered = {
        services[job]: [variable if arg == env_flag else arg for arg in argv]
        for job, argv in commands.items()
    }
    rendered[COMPOSE_SERVICES[TENSORBOARD]] = list(TENSORBOARD_COMMAND)
    return rendered


def compose_services(launch: LaunchConfig) -> Dict[str, dict]:
    """What `sac-render --engine=compose` prints: each service's `command:`.

    With replay shards the result is an override file for
    launch/docker-compose.yml (`docker compose -f launch/docker-compose.yml -f
    <it> up`): the servers of shards 1.. are new services, defined in full like
    `reverb_server` (image, volume, internal network, health check, grace), and
    the clients also wait for them (depends_on).
    """
    commands = compose_commands(launch)
    services: Dict[str, dict] = {name: {"command": argv} for name, argv in commands.items()}
    servers = compose_server_services(launch.num_replay_shards)
    for name in servers[1:]:
        services[name].update(_compose_server_extras())
    if len(servers) > 1:
        for job in (job_definitions.LEARNER, ACTOR, job_definitions.EVALUATOR):
            services[COMPOSE_SERVICES[job]]["depends_on"] = list(servers)
    return services


def _compose_server_extras() -> dict:
    """What launch/docker-compose.yml gives `reverb_server` besides its command."""
    return {
        "image": DEFAULT_IMAGE,
        "build": {
            "context": "..",
            "dockerfile": "launch/Dockerfile",
            "args": {"BASE_IMAGE": f"${{{BASE_IMAGE_VARIABLE}:-{DEFAULT_BASE_IMAGE}}}"},
        },
        "platform": "linux/amd64",
        "init": True,  # tini as PID 1: a server stopped while importing ends at once
        "volumes": [f"sac_data:{DATA_DIR}"],
        "networks": ["reverb"],
        "restart": "on-failure",
        "stop_grace_period": COMPOSE_SERVER_GRACE,
        "healthcheck": {
            "test": ["CMD", *healthcheck_argv()],
            "interval": "10s",
            "timeout": "10s",
            "retries": 3,
            "start_period": "60s",
        },
    }
