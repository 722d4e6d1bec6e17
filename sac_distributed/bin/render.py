"""sac-render: a run's jobs as Kubernetes manifests or Docker Compose commands.

    sac-render --engine=kubernetes --output_dir=launch/kubernetes   # the committed default
    sac-render --engine=kubernetes --env_name=HalfCheetahBulletEnv-v0 --num_actors=8 \
        --image=registry.example.com/sac-distributed:0.1.0 --output_dir=cheetah/
    sac-render --engine=kubernetes --learner_gpus=1 | kubectl apply -f -   # a GPU learner
    sac-render --engine=compose          # the `command:` of each launch/docker-compose.yml service
    sac-render --engine=compose --num_replay_shards=2 > launch/shards.yml   # an override file:
        # docker compose -f launch/docker-compose.yml -f launch/shards.yml up
    sac-render --engine=kubernetes --num_replay_shards=2 --output_dir=sharded/

The run flags are sac-launch's (hyperparameters, --env_name, --num_actors,
--num_replay_shards, --num_envs, --strategy, --connect_timeout, ...; defined
once in bin/_run_flags.py, with two actor replicas by default here) and go
through the same job definitions (`sac_distributed.launchers.manifests`). --root_dir is
the path inside the containers, on the volume mounted at /data.
"""

import os
import sys

from absl import flags

from sac_distributed import config as config_lib
from sac_distributed.bin import _common, _run_flags
from sac_distributed.launchers import manifests

flags.DEFINE_enum("engine", None, list(manifests.ENGINES), "What to render.")
flags.DEFINE_string(
    "output_dir", None, "Kubernetes: write one file per component and kustomization.yaml here."
)
flags.DEFINE_string("image", manifests.KubernetesConfig.image, "Container image of every job.")
flags.DEFINE_integer(
    "learner_gpus", 0, "GPUs the learner requests (0: none, it trains on CPU, as in sac-launch)."
)
flags.DEFINE_string("storage_class", None, "StorageClass of the volume claims (unset: default).")
flags.DEFINE_string("data_volume_size", "20Gi", "Size of the shared root_dir volume.")
flags.DEFINE_enum(
    "data_access_mode",
    "ReadWriteMany",
    list(manifests.DATA_ACCESS_MODES),
    "Access mode of the shared root_dir volume: ReadWriteMany for pods on several nodes, "
    "ReadWriteOnce for a one-node cluster (kind, minikube).",
)
flags.DEFINE_string("replay_volume_size", "20Gi", "Size of the server's replay volume.")
flags.mark_flag_as_required("engine")
FLAGS = flags.FLAGS
FLAGS.set_default("num_actors", 2)  # replicas
# Pods wait for an image pull and a scheduler, not for a process on the same machine.
FLAGS.set_default("connect_timeout", 600.0)
FLAGS.set_default("root_dir", manifests.DATA_DIR)

HEADER = (
    "# Rendered by `sac-render {args}` from the job definitions of sac_distributed.\n"
    "# Do not edit: render again with other flags, or patch it in a kustomize overlay.\n"
)


def _launch_config() -> config_lib.LaunchConfig:
    return config_lib.LaunchConfig(
        root_dir=FLAGS.root_dir, port=manifests.REVERB_PORT, **_run_flags.launch_settings()
    )


def _cluster_config() -> manifests.KubernetesConfig:
    return manifests.KubernetesConfig(
        image=FLAGS.image,
        learner_gpus=FLAGS.learner_gpus,
        data_volume_size=FLAGS.data_volume_size,
        replay_volume_size=FLAGS.replay_volume_size,
        storage_class=FLAGS.storage_class,
        data_access_mode=FLAGS.data_access_mode,
    )


def _render_args(argv) -> str:
    """The command line that rendered the files (--output_dir included)."""
    return " ".join(argv[1:])


def main() -> int:
    launch = _launch_config()
    if FLAGS.engine == "compose":
        sys.stdout.write(manifests.to_yaml([{"services": manifests.compose_services(launch)}]))
        return 0
    cluster = _cluster_config()
    warning = manifests.image_warning(cluster.image)
    if warning:
        print(f"sac-render: warning: {warning}", file=sys.stderr, flush=True)
    files = manifests.kubernetes_manifests(launch, cluster)
    header = HEADER.format(args=_render_args(sys.argv))
    if not FLAGS.output_dir:
        sys.stdout.write(header + "".join(manifests.to_yaml(d) for d in files.values()))
        return 0
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    files = dict(files, **{"kustomization.yaml": [manifests.kustomization(list(files))]})
    for name, documents in files.items():
        with open(os.path.join(FLAGS.output_dir, name), "w") as f:
            f.write(header + manifests.to_yaml(documents))
    print(f"sac-render: wrote {len(files)} files to {FLAGS.output_dir}", flush=True)
    return 0


def run() -> None:
    _common.run(main, _common.SHARED_FLAGS + _run_flags.RUN_FLAGS)


if __name__ == "__main__":
    run()
