"""Static checks of launch/kubernetes/ and of the compose commands (no cluster needed).

* The committed manifests are what `sac-render --engine=kubernetes` renders
  from the job definitions today (so they cannot drift from the binaries'
  flags), and launch/docker-compose.yml's commands are what
  `sac-render --engine=compose` renders.
* Every object validates against the Kubernetes OpenAPI schemas bundled with
  the `kubernetes-validate` package (offline, strict: unknown fields fail),
  for every Kubernetes version it bundles.
* The kustomizations render as a user renders them: with `kubectl kustomize`
  where kubectl is installed (skipped otherwise: nothing is downloaded), and
  always with a small Python reading of the features they use, which fails on
  any other feature.
* The wiring: the clients' address is the server's Service and port, the
  NetworkPolicy admits exactly the client pods, the probes run the compose
  healthcheck, every job writes to the shared volume, the GPU request can be
  switched off.

test_kubernetes_run.py runs the containers' commands on localhost.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from typing import Dict, List

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate import utils as k8s_schemas
from support.launch_files import (
    COMPOSE_FILE,
    CPU_OVERLAY,
    K8S_DIR,
    KustomizeLite,
    by_kind_name,
    console_scripts,
    container,
    parse_with_binaries,
    parse_yaml,
    pod_template,
)
from support.repo import REPO

from sac_distributed import config as config_lib
from sac_distributed import paths
from sac_distributed.launchers import job_definitions, manifests

SCHEMA_VERSIONS = sorted(
    set(k8s_schemas.all_versions()), key=lambda v: tuple(map(int, v.split(".")))
)
CLIENT_JOBS = (job_definitions.LEARNER, manifests.ACTOR, job_definitions.EVALUATOR)
RENDER_TIMEOUT_S = 300


def default_launch(**changes) -> config_lib.LaunchConfig:
    """What `sac-render` builds from its default flags."""
    settings = dict(
        root_dir=manifests.DATA_DIR,
        num_actors=2,
        port=manifests.REVERB_PORT,
        connect_timeout_s=600.0,
    )
    return config_lib.LaunchConfig(**{**settings, **changes})


def render_cli(*flags: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "sac_distributed.bin.render", *flags],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=RENDER_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def objects(files: Dict[str, List[dict]]) -> List[dict]:
    return [doc for docs in files.values() for doc in docs]


# launch/kubernetes/ is the default run with a GPU learner (launch/kubernetes-cpu/ drops it).
COMMITTED_RENDER = ("--engine=kubernetes", "--learner_gpus=1")


@pytest.fixture(scope="module")
def rendered() -> Dict[str, List[dict]]:
    return manifests.kubernetes_manifests(
        default_launch(), manifests.KubernetesConfig(learner_gpus=1)
    )


@pytest.fixture(scope="module")
def workloads(rendered) -> Dict[str, dict]:
    """job -> its workload object (StatefulSet, Deployment or Job)."""
    docs = by_kind_name(objects(rendered))
    kinds = {
        job_definitions.SERVER: "StatefulSet",
        job_definitions.LEARNER: "Job",
        manifests.ACTOR: "Deployment",
        job_definitions.EVALUATOR: "Job",
        manifests.TENSORBOARD: "Deployment",
    }
    return {job: docs[(kind, manifests.name_of(job))] for job, kind in kinds.items()}


# --- the committed files are the rendered ones ----------------------------------


def test_committed_manifests_are_what_sac_render_writes(tmp_path):
    render_cli(*COMMITTED_RENDER, f"--output_dir={tmp_path}")
    written = sorted(p.name for p in tmp_path.iterdir())
    committed = sorted(p.name for p in K8S_DIR.iterdir())
    assert written == committed, f"launch/kubernetes has {committed}, sac-render writes {written}"

    def as_committed(name: str) -> str:  # the header names the folder it was written to
        return (tmp_path / name).read_text().replace(str(tmp_path), "launch/kubernetes")

    stale = [n for n in written if as_committed(n) != (K8S_DIR / n).read_text()]
    assert not stale, (
        f"launch/kubernetes/{stale} differ from the job definitions; render them again with "
        f"`python -m sac_distributed.bin.render {' '.join(COMMITTED_RENDER)} "
        "--output_dir=launch/kubernetes`."
    )


def test_the_header_is_the_whole_command_and_names_no_test(tmp_path):
    out = tmp_path / "cheetah"
    flags = ("--engine=kubernetes", "--env_name=HalfCheetahBulletEnv-v0", f"--output_dir={out}")
    render_cli(*flags)
    for path in out.iterdir():
        first, second = path.read_text().splitlines()[:2]
        assert first.startswith(f"# Rendered by `sac-render {' '.join(flags)}` "), first
        assert "tests/" not in first + second, second


def test_the_learner_requests_no_gpu_unless_asked_as_in_sac_launch():
    def learner_limits(*flags: str):
        docs = list(yaml.safe_load_all(render_cli("--engine=kubernetes", *flags).stdout))
        (learner,) = [d for d in docs if d and d["metadata"]["name"] == "sac-learner"]
        return container(learner)["resources"].get("limits")

    assert learner_limits() is None
    assert learner_limits("--learner_gpus=1") == {manifests.GPU_RESOURCE: 1}


@pytest.mark.parametrize(
    "image, warned",
    [
        ("REGISTRY/sac-distributed:TAG", True),
        ("registry.example.com/sac-distributed:TAG", True),
        ("REGISTRY/sac-distributed:0.1.0", True),
        ("registry.example.com/sac-distributed:0.1.0", False),
        ("sac-distributed:latest", False),
    ],
)
def test_the_placeholder_image_is_warned_about(image, warned):
    result = render_cli("--engine=kubernetes", f"--image={image}")
    warning = f"sac-render: warning: --image={image} is the documentation's placeholder"
    assert (warning in result.stderr) == warned, result.stderr
    assert f"image: {image}" in result.stdout  # rendered all the same


def test_committed_files_parse_to_the_rendered_objects(rendered):
    for name, docs in rendered.items():
        assert list(yaml.safe_load_all((K8S_DIR / name).read_text())) == docs, name
    kustomization = yaml.safe_load((K8S_DIR / "kustomization.yaml").read_text())
    assert kustomization == manifests.kustomization(list(rendered))


def test_compose_commands_are_the_job_definitions():
    """The compose file's commands, anchors resolved and ${...} left as written."""
    compose = parse_yaml(COMPOSE_FILE.read_text())
    expected = manifests.compose_commands(default_launch())
    actual = {name: compose["services"][name].get("command") for name in expected}
    for service, argv in expected.items():
        assert actual[service] == argv, (
            f"launch/docker-compose.yml service {service}: command {actual[service]}, the job "
            f"definitions give {argv} (`python -m sac_distributed.bin.render --engine=compose`)."
        )
    server = compose["services"][manifests.COMPOSE_SERVICES[job_definitions.SERVER]]
    assert server["healthcheck"]["test"] == ["CMD", *manifests.healthcheck_argv()]


def test_sac_render_compose_prints_the_compose_commands():
    printed = yaml.safe_load(render_cli("--engine=compose").stdout)
    expected = manifests.compose_commands(default_launch())
    assert printed == {"services": {s: {"command": argv} for s, argv in expected.items()}}


def test_compose_commands_follow_overrides_and_leave_presets_out():
    commands = manifests.compose_commands(
        default_launch(hparams=config_lib.hyperparams_for("Pendulum-v1", {"batch_size": 512}))
    )
    for service in ("reverb_server", "learner", "actor", "evaluator"):
        hparam_flags = [a for a in commands[service] if a.split("=")[0][2:] in _HPARAM_NAMES]
        # The update rate follows the batch size (one SGD step per env step), spelled out.
        expected = ["--batch_size=512", "--samples_per_insert=512.0"]
        assert hparam_flags == expected, (service, commands[service])


_HPARAM_NAMES = {f for f in config_lib.Hyperparams.__dataclass_fields__}


# --- schemas --------------------------------------------------------------------


@pytest.mark.parametrize("learner_gpus", [1, 0])
def test_every_object_validates_against_the_kubernetes_schemas(learner_gpus):
    files = manifests.kubernetes_manifests(
        default_launch(),
        manifests.KubernetesConfig(
            learner_gpus=learner_gpus,
            storage_class="fast",
            data_access_mode="ReadWriteMany" if learner_gpus else "ReadWriteOnce",
        ),
    )
    assert len(SCHEMA_VERSIONS) >= 10, SCHEMA_VERSIONS  # 1.25 ... 1.37 in kubernetes-validate 1.37
    # Every bundled version for the default files; the oldest and newest for the variant.
    versions = SCHEMA_VERSIONS if learner_gpus else [SCHEMA_VERSIONS[0], SCHEMA_VERSIONS[-1]]
    for doc in objects(files):
        for version in versions:
            kubernetes_validate.validate(doc, version, strict=True)


def test_schema_validation_can_fail(workloads):
    version = SCHEMA_VERSIONS[-1]
    misspelt = copy.deepcopy(workloads[manifests.ACTOR])
    container(misspelt)["comand"] = container(misspelt).pop("command")
    wrong_type = copy.deepcopy(workloads[manifests.ACTOR])
    wrong_type["spec"]["replicas"] = "two"
    missing = copy.deepcopy(workloads[job_definitions.LEARNER])
    del container(missing)["name"]
    for broken in (misspelt, wrong_type, missing):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(broken, version, strict=True)


# --- kustomize ------------------------------------------------------------------


def cpu_overlay_expected() -> List[dict]:
    files = manifests.kubernetes_manifests(
        default_launch(num_actors=4), manifests.KubernetesConfig(learner_gpus=0)
    )
    return objects(files)


def test_kustomizations_build_the_rendered_objects(rendered):
    assert KustomizeLite().build(K8S_DIR) == objects(rendered)
    assert by_kind_name(KustomizeLite().build(CPU_OVERLAY)) == by_kind_name(cpu_overlay_expected())


def kubectl_kustomize(directory) -> list:
    """The objects `kubectl kustomize <directory>` builds (it must succeed)."""
    proc = subprocess.run(
        ["kubectl", "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=RENDER_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_kustomize_builds_the_rendered_objects(rendered):
    for directory, expected in (
        (K8S_DIR, objects(rendered)),
        (CPU_OVERLAY, cpu_overlay_expected()),
    ):
        assert by_kind_name(kubectl_kustomize(directory)) == by_kind_name(expected), directory


# --- wiring ---------------------------------------------------------------------


def _flag(argv: List[str], name: str) -> str:
    values = [a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")]
    assert len(values) == 1, f"--{name} given {len(values)} times in {argv}"
    return values[0]


def test_clients_reach_the_server_service(rendered, workloads):
    docs = by_kind_name(objects(rendered))
    server_name = manifests.name_of(job_definitions.SERVER)
    service = docs[("Service", server_name)]
    server = workloads[job_definitions.SERVER]
    (port,) = service["spec"]["ports"]
    assert service["spec"]["selector"] == pod_template(server)["metadata"]["labels"]
    assert server["spec"]["serviceName"] == server_name
    assert _flag(container(server)["command"], "port") == str(port["targetPort"])
    assert [p["containerPort"] for p in container(server)["ports"]] == [port["targetPort"]]
    for job in CLIENT_JOBS:
        argv = container(workloads[job])["command"]
        for key in ("replay_buffer_server_address", "variable_container_server_address"):
            assert _flag(argv, key) == f"{server_name}:{port['port']}", (job, key)


def _selects(selector: Dict[str, str], labels: Dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_network_policy_admits_only_the_clients(rendered, workloads):
    (policy,) = rendered["network-policy.yaml"]
    spec = policy["spec"]
    server_labels = pod_template(workloads[job_definitions.SERVER])["metadata"]["labels"]
    assert _selects(spec["podSelector"]["matchLabels"], server_labels)
    assert spec["policyTypes"] == ["Ingress"]
    (rule,) = spec["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": manifests.REVERB_PORT}]
    (peer,) = rule["from"]
    assert set(peer) == {"podSelector"}, "only pods of this namespace, no namespace or IP peers"
    for job, workload in workloads.items():
        labels = pod_template(workload)["metadata"]["labels"]
        admitted = _selects(peer["podSelector"]["matchLabels"], labels)
        assert admitted == (job in CLIENT_JOBS), f"{job}: admitted={admitted}"
        if job != job_definitions.SERVER:
            assert not _selects(spec["podSelector"]["matchLabels"], labels), job


def test_server_probes_run_the_compose_healthcheck(workloads):
    server = container(workloads[job_definitions.SERVER])
    compose = parse_yaml(COMPOSE_FILE.read_text())
    test = compose["services"]["reverb_server"]["healthcheck"]["test"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert server[probe]["exec"]["command"] == test[1:], probe


def test_every_job_writes_to_the_shared_volume(workloads):
    for job, workload in workloads.items():
        pod = pod_template(workload)["spec"]
        (volume,) = pod["volumes"]
        assert volume["persistentVolumeClaim"]["claimName"] == manifests.DATA_CLAIM, job
        mounts = {m["mountPath"]: m for m in container(workload)["volumeMounts"]}
        data = mounts[manifests.DATA_DIR]
        assert data["name"] == volume["name"], job
        assert data.get("readOnly", False) == (job == manifests.TENSORBOARD), job
        assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsUser"] == 1000
        if job != manifests.TENSORBOARD:
            assert _flag(container(workload)["command"], "root_dir") == manifests.DATA_DIR, job
    server = workloads[job_definitions.SERVER]
    (claim,) = server["spec"]["volumeClaimTemplates"]
    replay = f"{manifests.DATA_DIR}/{paths.REPLAY_CHECKPOINT_DIR}"
    mounts = {m["mountPath"]: m["name"] for m in container(server)["volumeMounts"]}
    assert mounts[replay] == claim["metadata"]["name"]


def test_learner_gpu_request_can_be_switched_off(workloads):
    learner = container(workloads[job_definitions.LEARNER])
    assert learner["resources"]["limits"] == {manifests.GPU_RESOURCE: 1}
    cpu = manifests.kubernetes_manifests(
        default_launch(), manifests.KubernetesConfig(learner_gpus=0)
    )
    (job,) = cpu["learner.yaml"]
    assert "limits" not in container(job)["resources"]
    for workload in workloads.values():
        assert container(workload)["resources"]["requests"]["cpu"], workload["metadata"]["name"]


def test_containers_run_the_installed_console_scripts(workloads):
    scripts = console_scripts()
    for module, script in manifests.SCRIPTS.items():
        assert scripts.get(script) == module, (script, module)
    for job in (job_definitions.SERVER, *CLIENT_JOBS):
        assert container(workloads[job])["command"][0] in manifests.SCRIPTS.values(), job


def test_seed_with_several_actor_replicas_is_refused():
    with pytest.raises(config_lib.ConfigError, match="seed"):
        manifests.kubernetes_manifests(default_launch(seed=3))
    manifests.kubernetes_manifests(default_launch(seed=3, num_actors=1))


def test_root_dir_must_be_on_the_data_volume():
    with pytest.raises(config_lib.ConfigError, match="data volume"):
        manifests.kubernetes_manifests(default_launch(root_dir="/tmp/run"))
    manifests.kubernetes_manifests(default_launch(root_dir="/data/run1"))


def test_yaml_writer_round_trips_awkward_strings():
    strings = [
        "true",
        "No",
        "on",
        "null",
        "1",
        "-1",
        "1.5",
        ".5",
        "10Gi",
        "x: y",
        "a:",
        "",
        "a'b",
        'say "hi"',
        "#x",
        "--f=a,b",
        "- x",
        "tab\there",
        "~",
        "@x",
        "*x",
        "&x",
    ]
    doc = {"s": strings, "n": 3, "b": False, "e": {}, "l": [], "nested": [[1, {"k": "v"}]]}
    assert yaml.safe_load(manifests.to_yaml([doc])) == doc
    assert list(yaml.safe_load_all(manifests.to_yaml([doc, {"a": 1}]))) == [doc, {"a": 1}]


def test_tensorboard_runs_the_compose_command(workloads):
    """test_compose_run runs this command; test_kubernetes_run does not run it again."""
    compose = parse_yaml(COMPOSE_FILE.read_text())
    board = container(workloads[manifests.TENSORBOARD])
    assert board["command"] == compose["services"]["tensorboard"]["command"]
    assert [p["containerPort"] for p in board["ports"]] == [manifests.TENSORBOARD_PORT]
    assert _flag(board["command"], "port") == str(manifests.TENSORBOARD_PORT)


# --- replay shards --------------------------------------------------------------


SHARDED_HOSTS = [f"sac-reverb-server-{i}.sac-reverb-server" for i in range(2)]


@pytest.fixture(scope="module")
def sharded() -> Dict[str, List[dict]]:
    return manifests.kubernetes_manifests(default_launch(num_replay_shards=2))


def _expanded(argv: List[str], shard: int) -> List[str]:
    """The command as Kubernetes runs it in pod `shard`: $(REPLAY_SHARD) expanded."""
    return [a.replace(f"$({manifests.SHARD_VARIABLE})", str(shard)) for a in argv]


def test_sharded_manifests_validate_and_give_each_pod_its_shard(sharded):
    for doc in objects(sharded):
        for version in (SCHEMA_VERSIONS[0], SCHEMA_VERSIONS[-1]):
            kubernetes_validate.validate(doc, version, strict=True)
    docs = by_kind_name(objects(sharded))
    name = manifests.name_of(job_definitions.SERVER)
    service, server = docs[("Service", name)], docs[("StatefulSet", name)]
    assert service["spec"]["clusterIP"] == "None"  # headless: a DNS name per pod
    assert server["spec"]["serviceName"] == name
    assert server["spec"]["replicas"] == 2
    assert server["spec"]["podManagementPolicy"] == "Parallel"
    (claim,) = server["spec"]["volumeClaimTemplates"]  # one replay volume per pod
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    replay = [m["mountPath"] for m in container(server)["volumeMounts"] if m["name"] == "replay"]
    data = manifests.DATA_DIR
    assert replay == [f"{data}/replay_checkpoints", f"{data}/replay_checkpoints_shard1"]
    (env,) = container(server)["env"]
    assert env["name"] == manifests.SHARD_VARIABLE
    assert env["valueFrom"]["fieldRef"]["fieldPath"] == (
        f"metadata.labels['{manifests.POD_INDEX_LABEL}']"
    )
    argv = container(server)["command"]
    assert _flag(argv, "replay_shard") == "$(REPLAY_SHARD)"
    assert _flag(argv, "num_replay_shards") == "2"
    for job in CLIENT_JOBS:
        (workload,) = [
            d for d in objects(sharded) if d["metadata"]["name"] == manifests.name_of(job)
        ]
        client = container(workload)["command"]
        replay = ",".join(f"{host}:{manifests.REVERB_PORT}" for host in SHARDED_HOSTS)
        assert _flag(client, "replay_buffer_server_address") == replay, job
        assert _flag(client, "variable_container_server_address") == (
            f"{SHARDED_HOSTS[0]}:{manifests.REVERB_PORT}"
        ), job


def test_sharded_commands_parse_with_the_real_binaries(sharded):
    """The pods' commands (each shard's expansion) and the compose override's."""
    scripts = console_scripts()
    docs = by_kind_name(objects(sharded))
    server = container(docs[("StatefulSet", manifests.name_of(job_definitions.SERVER))])
    cases = {f"pod {shard}": _expanded(server["command"], shard) for shard in range(2)}
    for job, kind in ((job_definitions.LEARNER, "Job"), (manifests.ACTOR, "Deployment")):
        cases[f"pod {job}"] = container(docs[(kind, manifests.name_of(job))])["command"]
    compose = manifests.compose_commands(default_launch(num_replay_shards=2))
    cases.update(
        {f"compose {name}": argv for name, argv in compose.items() if name != "tensorboard"}
    )
    by_module: Dict[str, List[List[str]]] = {}
    slots = {}
    for case, argv in cases.items():
        argv = [a.replace("${SAC_ENV_NAME:-Pendulum-v1}", "Pendulum-v1") for a in argv]
        module = scripts[argv[0]]
        slots[case] = (module, len(by_module.setdefault(module, [])))
        by_module[module].append(argv)
    results = parse_with_binaries(by_module)
    parsed = {case: results[m][i] for case, (m, i) in slots.items()}
    for case, result in parsed.items():
        assert result["ok"], f"{case}: {result['error']}"
    for shard, case in enumerate(("pod 0", "pod 1")):
        config = parsed[case]["config"]
        assert (config["replay_shard"], config["num_replay_shards"]) == (shard, 2), case
    for shard, case in enumerate(("compose reverb_server", "compose reverb_server_1")):
        config = parsed[case]["config"]
        assert (config["replay_shard"], config["num_replay_shards"]) == (shard, 2), case
    client = parsed["compose learner"]["config"]["client"]
    assert client["replay_buffer_server_address"] == "reverb_server:8008,reverb_server_1:8008"
    assert client["variable_container_server_address"] == "reverb_server:8008"


def test_compose_override_defines_the_new_shards_like_the_server():
    base = parse_yaml(COMPOSE_FILE.read_text())["services"]["reverb_server"]
    services = manifests.compose_services(default_launch(num_replay_shards=3))
    assert list(services)[:3] == ["reverb_server", "reverb_server_1", "reverb_server_2"]
    assert set(services["reverb_server"]) == {"command"}  # the base file has the rest
    for name in ("reverb_server_1", "reverb_server_2"):
        extra = {k: v for k, v in services[name].items() if k != "command"}
        assert extra == {k: v for k, v in base.items() if k != "command"}, name
    for client in ("learner", "actor", "evaluator"):
        assert services[client]["depends_on"] == list(services)[:3], client
    unsharded = manifests.compose_services(default_launch())
    assert all(set(service) == {"command"} for service in unsharded.values())


def test_sac_render_writes_sharded_manifests_that_kustomize_builds(tmp_path):
    render_cli("--engine=kubernetes", "--num_replay_shards=2", f"--output_dir={tmp_path}")
    expected = objects(manifests.kubernetes_manifests(default_launch(num_replay_shards=2)))
    assert by_kind_name(KustomizeLite().build(tmp_path)) == by_kind_name(expected)
    if shutil.which("kubectl"):
        assert by_kind_name(kubectl_kustomize(tmp_path)) == by_kind_name(expected)
