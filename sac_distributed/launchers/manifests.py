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
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from sac_distributed import config as config_lib
from sac_distributed import paths
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

# --- Compose ---------------------------------------------------------------------
COMPOSE_SERVICES = {
    job_definitions.SERVER: "reverb_server",
    job_definitions.LEARNER: "learner",
    ACTOR: "actor",
    job_definitions.EVALUATOR: "evaluator",
    TENSORBOARD: "tensorboard",
}
COMPOSE_ENV_VARIABLE = "SAC_ENV_NAME"
COMPOSE_SERVER_GRACE = "120s"  # launch/docker-compose.yml's stop_grace_period of the server

# --- Kubernetes --------------------------------------------------------------------
PREFIX = "sac-"  # resource names: sac-reverb-server, sac-actor, ...
COMPONENTS = {
    job_definitions.SERVER: "reverb-server",
    job_definitions.LEARNER: "learner",
    ACTOR: "actor",
    job_definitions.EVALUATOR: "evaluator",
    TENSORBOARD: "tensorboard",
}
DATA_CLAIM = "sac-data"  # root_dir, shared by every pod (ReadWriteMany)
DATA_ACCESS_MODES = ("ReadWriteMany", "ReadWriteOnce")
REPLAY_CLAIM = "replay"  # the server's replay checkpoints (its own ReadWriteOnce volume)
NAME_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"
APP = "sac-distributed"
# Carried by the pods that may reach the Reverb port (the NetworkPolicy's only admission).
CLIENT_LABEL = "sac-distributed/reverb-client"
GPU_RESOURCE = "nvidia.com/gpu"
# The label Kubernetes (1.28+) puts on each StatefulSet pod with its ordinal, and the
# variable that carries it into the sharded server's command as $(REPLAY_SHARD).
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
SHARD_VARIABLE = "REPLAY_SHARD"
IMAGE_UID = 1000  # the `sac` user of launch/Dockerfile
# Requests sized for the HalfCheetah preset (1M-transition replay); patch them to taste.
RESOURCES = {
    job_definitions.SERVER: {"cpu": "1", "memory": "4Gi"},
    job_definitions.LEARNER: {"cpu": "2", "memory": "4Gi"},
    ACTOR: {"cpu": "1", "memory": "1Gi"},
    job_definitions.EVALUATOR: {"cpu": "500m", "memory": "1Gi"},
    TENSORBOARD: {"cpu": "100m", "memory": "512Mi"},
}
# Seconds a stopped pod gets before SIGKILL: the server saves the replay buffer and
# the learner checkpoints and exports (launch/docker-compose.yml's stop_grace_period).
GRACE_S = {job_definitions.SERVER: 120, job_definitions.LEARNER: 120, ACTOR: 45}
RESTART_LIMIT = 10  # a Job's backoffLimit: clients exit non-zero when the server is away


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


@dataclasses.dataclass(frozen=True)
class KubernetesConfig:
    """What the cluster adds to a run's job definitions."""

    image: str = "sac-distributed:latest"
    learner_gpus: int = 0  # 0: the learner requests no GPU and trains on CPU (as sac-launch)
    data_volume_size: str = "20Gi"  # root_dir: checkpoints, policies, summaries
    replay_volume_size: str = "20Gi"  # replay checkpoints (a full HalfCheetah table: 203 MiB)
    storage_class: Optional[str] = None  # None: the cluster's default class
    # Every pod mounts root_dir, so pods on several nodes need ReadWriteMany (NFS, CephFS,
    # a cloud file store). ReadWriteOnce serves a one-node cluster (kind, minikube).
    data_access_mode: str = "ReadWriteMany"

    def __post_init__(self) -> None:
        if self.data_access_mode not in DATA_ACCESS_MODES:
            raise ConfigError(
                f"data_access_mode must be one of {DATA_ACCESS_MODES}, "
                f"got {self.data_access_mode!r}."
            )
        if self.learner_gpus < 0:
            raise ConfigError(f"learner_gpus must be >= 0, got {self.learner_gpus}.")
        if not self.image:
            raise ConfigError("image must name a container image.")


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


def replay_mounts(num_shards: int) -> List[str]:
    """Where each server pod mounts its own replay volume: at every shard's replay
    checkpoint directory (`paths.replay_checkpoint_dir`), because the replicas
    share one pod template and pod i writes to shard i's. The paths of the
    other shards are unused aliases of the same volume."""
    return [paths.replay_checkpoint_dir(DATA_DIR, shard) for shard in range(num_shards)]


def kubernetes_server_hosts(num_shards: int) -> List[str]:
    """Each shard's host name in the cluster: the Service, or pod i of the headless one."""
    name = name_of(job_definitions.SERVER)
    if num_shards == 1:
        return [name]
    return [f"{name}-{shard}.{name}" for shard in range(num_shards)]


def compose_server_services(num_shards: int) -> List[str]:
    """Each shard's Compose service: `reverb_server` for shard 0, `reverb_server_<i>` after."""
    base = COMPOSE_SERVICES[job_definitions.SERVER]
    return [base] + [f"{base}_{shard}" for shard in range(1, num_shards)]


# --- Compose -----------------------------------------------------------------------


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
        "image": KubernetesConfig.image,
        "build": {"context": "..", "dockerfile": "launch/Dockerfile"},
        "platform": "linux/amd64",
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


# --- Kubernetes --------------------------------------------------------------------


def name_of(job: str) -> str:
    return PREFIX + COMPONENTS[job]


def labels_of(job: str) -> Dict[str, str]:
    return {NAME_LABEL: APP, COMPONENT_LABEL: COMPONENTS[job]}


def kubernetes_manifests(
    launch: LaunchConfig, cluster: KubernetesConfig = KubernetesConfig()
) -> Dict[str, List[dict]]:
    """File name -> the Kubernetes objects in it, for `kubectl apply -k` on the folder."""
    if launch.root_dir != DATA_DIR and not launch.root_dir.startswith(DATA_DIR + "/"):
        raise ConfigError(
            f"root_dir must be on the data volume ({DATA_DIR}), got {launch.root_dir}."
        )
    num_shards = launch.num_replay_shards
    commands = job_commands(launch, kubernetes_server_hosts(num_shards))
    return {
        "data-volume.yaml": [
            _claim(DATA_CLAIM, cluster.data_access_mode, cluster.data_volume_size, cluster)
        ],
        "reverb-server.yaml": [
            _server_service(num_shards),
            _server(_server_command(commands, num_shards), num_shards, cluster),
        ],
        "network-policy.yaml": [_network_policy()],
        "learner.yaml": [_learner(commands, cluster)],
        "actor.yaml": [_actors(commands, launch.num_actors, cluster)],
        "evaluator.yaml": [_job(job_definitions.EVALUATOR, commands, cluster)],
        "tensorboard.yaml": [_tensorboard_service(), _tensorboard(cluster)],
    }


def kustomization(files: List[str]) -> dict:
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": list(files),
    }


def _metadata(name: str, job: str) -> dict:
    return {"name": name, "labels": labels_of(job)}


def _claim(name: str, access_mode: str, size: str, cluster: KubernetesConfig) -> dict:
    spec: Dict[str, Any] = {"accessModes": [access_mode]}
    if cluster.storage_class:
        spec["storageClassName"] = cluster.storage_class
    spec["resources"] = {"requests": {"storage": size}}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}}
    claim["spec"] = spec
    return claim


def _container(job: str, command: List[str], cluster: KubernetesConfig, **extra) -> dict:
    read_only = job == TENSORBOARD  # the only pod that serves a port to people
    mounts = [{"name": "data", "mountPath": DATA_DIR}]
    if read_only:
        mounts[0]["readOnly"] = True
    container = {
        "name": COMPONENTS[job],
        "image": cluster.image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(command),
        "resources": {"requests": dict(RESOURCES[job])},
        "volumeMounts": mounts,
        "securityContext": {"allowPrivilegeEscalation": False},
    }
    container.update(extra)
    return container


def _pod(job: str, container: dict, restart_policy: str, client: bool = True) -> dict:
    labels = labels_of(job)
    if client:
        labels[CLIENT_LABEL] = "true"
    spec: Dict[str, Any] = {"restartPolicy": restart_policy}
    if job in GRACE_S:
        spec["terminationGracePeriodSeconds"] = GRACE_S[job]
    spec["securityContext"] = {
        "runAsNonRoot": True,
        "runAsUser": IMAGE_UID,
        "runAsGroup": IMAGE_UID,
        "fsGroup": IMAGE_UID,  # makes the volumes writable for the image's user
    }
    spec["containers"] = [container]
    spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": DATA_CLAIM}}]
    return {"metadata": {"labels": labels}, "spec": spec}


def _exec_probe(period_s: int, failures: int) -> dict:
    return {
        "exec": {"command": healthcheck_argv()},
        "periodSeconds": period_s,
        "timeoutSeconds": 10,
        "failureThreshold": failures,
    }


def _server_service(num_shards: int) -> dict:
    """The server's Service; headless for shards, so that each pod has its own name."""
    job = job_definitions.SERVER
    spec: Dict[str, Any] = {}
    if num_shards > 1:
        spec["clusterIP"] = "None"
    spec["selector"] = labels_of(job)
    spec["ports"] = [{"name": "reverb", "port": REVERB_PORT, "targetPort": REVERB_PORT}]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(name_of(job), job),
        "spec": spec,
    }


def _server_command(commands: Mapping[str, List[str]], num_shards: int) -> List[str]:
    """The one command of every server replica: shard 0's, with the pod's own shard index."""
    names = job_definitions.server_names(num_shards)
    command = list(commands[names[0]])
    if num_shards > 1:
        command = [a for a in command if not a.startswith("--replay_shard=")]
        command.append(f"--replay_shard=$({SHARD_VARIABLE})")
    return command


def _server(command: List[str], num_shards: int, cluster: KubernetesConfig) -> dict:
    job = job_definitions.SERVER
    extra: Dict[str, Any] = {}
    if num_shards > 1:
        index = {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}}
        extra["env"] = [{"name": SHARD_VARIABLE, "valueFrom": index}]
    container = _container(
        job,
        command,
        cluster,
        **extra,
        ports=[{"name": "reverb", "containerPort": REVERB_PORT}],
        # Loading a large replay checkpoint comes before the port opens: 10 min.
        startupProbe=_exec_probe(period_s=10, failures=60),
        readinessProbe=_exec_probe(period_s=10, failures=3),
        livenessProbe=_exec_probe(period_s=10, failures=3),
    )
    for path in replay_mounts(num_shards):
        container["volumeMounts"].append({"name": REPLAY_CLAIM, "mountPath": path})
    replay = _claim(REPLAY_CLAIM, "ReadWriteOnce", cluster.replay_volume_size, cluster)
    del replay["apiVersion"], replay["kind"]
    spec: Dict[str, Any] = {"serviceName": name_of(job)}
    spec["replicas"] = num_shards  # one per replay shard; the first also holds the weights
    if num_shards > 1:
        spec["podManagementPolicy"] = "Parallel"  # shards need not wait for each other
    spec["selector"] = {"matchLabels": labels_of(job)}
    spec["template"] = _pod(job, container, "Always", client=False)
    spec["volumeClaimTemplates"] = [replay]  # each replica its own replay volume
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _metadata(name_of(job), job),
        "spec": spec,
    }


def _network_policy() -> dict:
    job = job_definitions.SERVER
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(name_of(job), job),
        "spec": {
            "podSelector": {"matchLabels": labels_of(job)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"podSelector": {"matchLabels": {CLIENT_LABEL: "true"}}}],
                    "ports": [{"protocol": "TCP", "port": REVERB_PORT}],
                }
            ],
        },
    }


def _job(job: str, commands: Mapping[str, List[str]], cluster: KubernetesConfig, **extra) -> dict:
    """A batch Job: it ends when the binary exits 0 (the learner reached num_iterations)."""
    container = _container(job, commands[job], cluster, **extra)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(name_of(job), job),
        "spec": {"backoffLimit": RESTART_LIMIT, "template": _pod(job, container, "OnFailure")},
    }


def _learner(commands: Mapping[str, List[str]], cluster: KubernetesConfig) -> dict:
    learner = _job(job_definitions.LEARNER, commands, cluster)
    if cluster.learner_gpus:
        container = learner["spec"]["template"]["spec"]["containers"][0]
        container["resources"]["limits"] = {GPU_RESOURCE: cluster.learner_gpus}
    return learner


def _actors(commands: Mapping[str, List[str]], replicas: int, cluster: KubernetesConfig) -> dict:
    container = _container(ACTOR, commands[ACTOR], cluster)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(name_of(ACTOR), ACTOR),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels_of(ACTOR)},
            "template": _pod(ACTOR, container, "Always"),
        },
    }


def _tensorboard_service() -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(name_of(TENSORBOARD), TENSORBOARD),
        "spec": {
            "selector": labels_of(TENSORBOARD),
            "ports": [{"name": "http", "port": TENSORBOARD_PORT, "targetPort": TENSORBOARD_PORT}],
        },
    }


def _tensorboard(cluster: KubernetesConfig) -> dict:
    container = _container(
        TENSORBOARD,
        list(TENSORBOARD_COMMAND),
        cluster,
        ports=[{"name": "http", "containerPort": TENSORBOARD_PORT}],
        readinessProbe={"httpGet": {"path": "/", "port": TENSORBOARD_PORT}, "periodSeconds": 10},
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(name_of(TENSORBOARD), TENSORBOARD),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels_of(TENSORBOARD)},
            "template": _pod(TENSORBOARD, container, "Always", client=False),
        },
    }


# --- YAML without PyYAML -------------------------------------------------------------

# A string that YAML reads back as the same string when written bare.
_PLAIN = re.compile(r"(?:[A-Za-z/_]|-[-A-Za-z])[A-Za-z0-9_./=:,@+-]*")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def to_yaml(documents: List[Any]) -> str:
    """Block-style YAML, one `---` document per object (dicts, lists, str, int, bool)."""
    return "".join("---\n" + "\n".join(_lines(doc)) + "\n" for doc in documents)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict) and not value:
        return "{}"
    if isinstance(value, list) and not value:
        return "[]"
    if not isinstance(value, str):
        raise TypeError(f"to_yaml writes str, int, bool, dict and list, not {value!r}")
    if _PLAIN.fullmatch(value) and not value.endswith(":") and value.lower() not in _YAML_WORDS:
        return value
    if "'" not in value and value.isprintable():
        return f"'{value}'"  # single-quoted: nothing inside is special
    return json.dumps(value)  # a JSON string is a YAML double-quoted scalar


def _is_block(value: Any) -> bool:
    return isinstance(value, (dict, list)) and bool(value)


def _lines(node: Any) -> List[str]:
    lines: List[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if _is_block(value):
                lines.append(f"{_scalar(key)}:")
                lines += ["  " + line for line in _lines(value)]
            else:
                lines.append(f"{_scalar(key)}: {_scalar(value)}")
    elif isinstance(node, list):
        for item in node:
            if _is_block(item):
                first, *rest = _lines(item)
                lines.append("- " + first)
                lines += ["  " + line for line in rest]
            else:
                lines.append(f"- {_scalar(item)}")
    else:
        lines.append(_scalar(node))
    return lines
