"""Kubernetes: the run's manifests (server StatefulSet and Service, learner and
evaluator Jobs, actor Deployment, TensorBoard, volume claims, NetworkPolicy)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional

from sac_distributed import paths
from sac_distributed.config import ConfigError, LaunchConfig
from sac_distributed.launchers import job_definitions
from sac_distributed.launchers.manifests.common import (
    ACTOR,
    DATA_DIR,
    DEFAULT_IMAGE,
    REVERB_PORT,
    TENSORBOARD,
    TENSORBOARD_COMMAND,
    TENSORBOARD_PORT,
    healthcheck_argv,
    job_commands,
)

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


@dataclasses.dataclass(frozen=True)
class KubernetesConfig:
    """What the cluster adds to a run's job definitions."""

    image: str = DEFAULT_IMAGE
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
