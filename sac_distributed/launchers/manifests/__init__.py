"""Kubernetes manifests and Docker Compose commands, rendered from the job definitions.

A cluster runs the same jobs as `sac-launch` (one Reverb server, one learner,
N actors, one evaluator), so their command lines come from the same place:
`job_definitions.make_run_configs` builds the typed configs and
`job_definitions.job_specs` writes each job's flags. This module only adds
what a container platform needs around them: the server's address is its
Service name instead of localhost, the run directory is a shared volume at
DATA_DIR, and the binary is the console script that the image installs.

* `kubernetes_manifests()`: a StatefulSet and Service for the server (with a
  volume claim for replay checkpoints), a Deployment of actors, a Job each for
  the learner (GPU request optional) and the evaluator, TensorBoard, a shared
  volume claim for root_dir and a NetworkPolicy that admits only the run's
  client pods to the Reverb port. Hyperparameters are written in full, as the
  local launcher writes them, so a manifest says what runs whatever presets
  the image carries.
* `compose_commands()`: the command lines of launch/docker-compose.yml. That
  file takes the environment from $SAC_ENV_NAME, so its commands leave out the
  hyperparameters that equal the environment's preset (each binary fills them
  from the same preset) and spell --env_name as a Compose variable.

Replay shards (--num_replay_shards=N > 1): on Kubernetes the server's
StatefulSet gets N replicas, started in parallel, each with its own replay
volume, and its Service becomes headless, so that pod i is reachable as
`sac-reverb-server-<i>.sac-reverb-server`; every replica runs one command whose
--replay_shard comes from the pod's ordinal, which Kubernetes (1.28 and later)
puts in the pod label `apps.kubernetes.io/pod-index`: an environment variable
reads it through the downward API and the command refers to it as
$(REPLAY_SHARD), which Kubernetes expands. (One StatefulSet per shard would
also work on older clusters, at the price of N copies of every object; a
shell wrapper that cuts the ordinal off $HOSTNAME would hide the command
line in a string.) For Compose, the rendered services are an override file
for launch/docker-compose.yml: shard 0 is its `reverb_server`, shard i a new
service `reverb_server_<i>` with the same image, volume, network, health check
and stop grace period.

Every replica of the actor Deployment (and of the Compose service) runs the
same command, i.e. --task=0, which is safe without --seed: each replica seeds
itself from OS entropy. `to_yaml` writes the manifests without PyYAML, which
is not a dependency of the package.

The package's modules: `common` (command lines, scripts, ports, the health
check), `compose`, `kubernetes` and `yaml_text`; import the names from
`sac_distributed.launchers.manifests`.
"""

from sac_distributed.launchers.manifests.common import (
    ACTOR,
    DATA_DIR,
    DEFAULT_IMAGE,
    ENGINES,
    JOBS,
    PLACEHOLDER_IMAGE,
    REVERB_PORT,
    SCRIPTS,
    TENSORBOARD,
    TENSORBOARD_COMMAND,
    TENSORBOARD_PORT,
    healthcheck_argv,
    image_warning,
    job_commands,
)
from sac_distributed.launchers.manifests.compose import (
    COMPOSE_ENV_VARIABLE,
    COMPOSE_SERVER_GRACE,
    COMPOSE_SERVICES,
    compose_commands,
    compose_server_services,
    compose_services,
)
from sac_distributed.launchers.manifests.kubernetes import (
    APP,
    CLIENT_LABEL,
    COMPONENT_LABEL,
    COMPONENTS,
    DATA_ACCESS_MODES,
    DATA_CLAIM,
    GPU_RESOURCE,
    GRACE_S,
    IMAGE_UID,
    NAME_LABEL,
    POD_INDEX_LABEL,
    PREFIX,
    REPLAY_CLAIM,
    RESOURCES,
    RESTART_LIMIT,
    SHARD_VARIABLE,
    KubernetesConfig,
    kubernetes_manifests,
    kubernetes_server_hosts,
    kustomization,
    labels_of,
    name_of,
    replay_mounts,
)
from sac_distributed.launchers.manifests.yaml_text import (
    to_yaml,
)

__all__ = [
    "ACTOR",
    "APP",
    "CLIENT_LABEL",
    "COMPONENTS",
    "COMPONENT_LABEL",
    "COMPOSE_ENV_VARIABLE",
    "COMPOSE_SERVER_GRACE",
    "COMPOSE_SERVICES",
    "DATA_ACCESS_MODES",
    "DATA_CLAIM",
    "DATA_DIR",
    "DEFAULT_IMAGE",
    "ENGINES",
    "GPU_RESOURCE",
    "GRACE_S",
    "IMAGE_UID",
    "JOBS",
    "KubernetesConfig",
    "NAME_LABEL",
    "PLACEHOLDER_IMAGE",
    "POD_INDEX_LABEL",
    "PREFIX",
    "REPLAY_CLAIM",
    "RESOURCES",
    "RESTART_LIMIT",
    "REVERB_PORT",
    "SCRIPTS",
    "SHARD_VARIABLE",
    "TENSORBOARD",
    "TENSORBOARD_COMMAND",
    "TENSORBOARD_PORT",
    "compose_commands",
    "compose_server_services",
    "compose_services",
    "healthcheck_argv",
    "image_warning",
    "job_commands",
    "kubernetes_manifests",
    "kubernetes_server_hosts",
    "kustomization",
    "labels_of",
    "name_of",
    "replay_mounts",
    "to_yaml",
]
