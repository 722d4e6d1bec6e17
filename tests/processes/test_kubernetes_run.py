"""Runs the containers of launch/kubernetes/ as local processes on localhost.

test_kubernetes.py checks the manifests without running them. Here the
command of each container (the server's StatefulSet, the learner's and the
evaluator's Jobs, one replica of the actor Deployment: every replica runs the
same command) is taken from the committed files, as kustomize builds them, and
executed, with only what the cluster provides rewritten for one host, as
test_compose_run.py does for Compose:

* the server's Service `sac-reverb-server:8008` -> `localhost:<free port>`
  (and the server's `--port=`, and the port its probe connects to);
* each volume claim -> a temporary directory, mounted where the manifest
  mounts it: the shared claim at /data, and the server's replay claim at
  /data/replay_checkpoints (a symlink stands in for the nested mount);
* the script -> the console script next to this interpreter, with the
  Dockerfile's ENV lines (the manifests add no `env`).

The test budget flags of test_compose_run are appended to every command
(absl keeps the last value of a repeated flag).

The run proves: the server's startup/readiness/liveness command passes once
it listens (and fails with nothing listening); the learner and evaluator Jobs
and an actor finish with exit code 0, leaving policies, checkpoints,
evaluation results and written transitions on the shared volume; on SIGTERM
(a pod's deletion) the server exits 0 after writing the replay checkpoint to
its own volume. Not run here: TensorBoard (its command is Compose's, which
test_compose_run runs), the NetworkPolicy, the probes' scheduling, the GPU
request and anything else that needs a cluster.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Dict, List

import portpicker
import pytest
from support import compose_run
from support.launch_files import (
    DOCKERFILE,
    K8S_DIR,
    KustomizeLite,
    by_kind_name,
    container,
    pod_template,
)
from support.processes import read, stop, wait_for_log

from sac_distributed import paths
from sac_distributed.launchers import job_definitions, manifests

pytestmark = pytest.mark.slow

SERVER = job_definitions.SERVER
CLIENTS = (job_definitions.LEARNER, manifests.ACTOR, job_definitions.EVALUATOR)
KINDS = {
    SERVER: "StatefulSet",
    job_definitions.LEARNER: "Job",
    manifests.ACTOR: "Deployment",
    job_definitions.EVALUATOR: "Job",
}


@dataclasses.dataclass
class ClusterRun:
    data_dir: Path  # the shared claim
    replay_dir: Path  # the server's replay claim
    procs: Dict[str, compose_run.Proc]
    codes: Dict[str, int]
    probe: tuple  # (exit code, output) against the running server
    probe_no_server: tuple  # (exit code, output) with nothing listening

    def tails(self, *names: str) -> str:
        return "\n".join(self.procs[n].tail() for n in names)


def _local_volumes(workload: dict, claims: Dict[str, Path]) -> Dict[str, Path]:
    """mountPath -> local directory, for the container's volume mounts."""
    pod = pod_template(workload)["spec"]
    volumes = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
    for template in workload["spec"].get("volumeClaimTemplates", []):
        name = template["metadata"]["name"]
        volumes[name] = f"{name}-{workload['metadata']['name']}-0"  # the StatefulSet's claim
    return {m["mountPath"]: claims[volumes[m["name"]]] for m in container(workload)["volumeMounts"]}


def _local_argv(
    argv: List[str], mounts: Dict[str, Path], service: str, local_port: int
) -> List[str]:
    out = [compose_run.executable(argv[0])]
    targets = sorted(mounts, key=len, reverse=True)  # the innermost mount first
    for arg in argv[1:]:
        name, _, value = arg.partition("=")
        if name == "--port":
            value = str(local_port)
        value = value.replace(service, f"localhost:{local_port}")
        for target in targets:
            if value == target or value.startswith(target + "/"):
                value = str(mounts[target]) + value[len(target) :]
                break
        out.append(f"{name}={value}")
    return out


def _probe_argv(command: List[str], local_port: int) -> List[str]:
    pattern = rf"\b{manifests.REVERB_PORT}\b"
    assert any(re.search(pattern, part) for part in command), command
    parts = [re.sub(pattern, str(local_port), part) for part in command]
    return [compose_run.executable(parts[0]), *parts[1:]]


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kubernetes_run")
    docs = by_kind_name(KustomizeLite().build(K8S_DIR))
    workloads = {job: docs[(kind, manifests.name_of(job))] for job, kind in KINDS.items()}
    server_name = manifests.name_of(SERVER)
    (service_port,) = docs[("Service", server_name)]["spec"]["ports"]
    service = f"{server_name}:{service_port['port']}"
    claims = {
        manifests.DATA_CLAIM: tmp / "claims" / manifests.DATA_CLAIM,
        f"{manifests.REPLAY_CLAIM}-{server_name}-0": tmp / "claims" / "replay",
    }
    for path in claims.values():
        path.mkdir(parents=True)
    mounts = {job: _local_volumes(w, claims) for job, w in workloads.items()}
    for target, local in mounts[SERVER].items():  # a nested mount: a symlink in its parent
        parent = max(
            (t for t in mounts[SERVER] if target.startswith(t + "/")), default=None, key=len
        )
        if parent:
            os.symlink(local, mounts[SERVER][parent] / os.path.relpath(target, parent))
    (tmp / "logs").mkdir()
    (tmp / "home").mkdir()
    procs = compose_run.Procs(tmp / "logs", tmp / "home")
    local_port = portpicker.pick_unused_port()
    env = {
        **os.environ,
        **compose_run.dockerfile_env(DOCKERFILE.read_text()),
        "CUDA_VISIBLE_DEVICES": "",
    }

    def start(job: str) -> compose_run.Proc:
        spec = container(workloads[job])
        assert "env" not in spec and "args" not in spec, spec  # the command is all of it
        argv = _local_argv(spec["command"], mounts[job], service, local_port)
        return procs.start(job, argv + list(compose_run.BUDGET_FLAGS), env)

    try:
        server = start(SERVER)
        wait_for_log(
            str(server.log),
            rf"listening on port {local_port}\b",
            compose_run.SERVER_READY_S,
            {server.name: server.popen},
        )
        server_spec = container(workloads[SERVER])
        probes = [server_spec[p]["exec"]["command"] for p in ("startupProbe", "livenessProbe")]
        assert probes[0] == probes[1] == server_spec["readinessProbe"]["exec"]["command"]
        probe = compose_run.run_healthcheck(_probe_argv(probes[0], local_port), env, procs.cwd)
        dead = _probe_argv(probes[0], portpicker.pick_unused_port())
        probe_no_server = compose_run.run_healthcheck(dead, env, procs.cwd)
        jobs = [start(job) for job in CLIENTS]
        codes = compose_run.wait_for_exit(jobs, compose_run.JOBS_DEADLINE_S, watch=server)
        # A pod's deletion: SIGTERM, then SIGKILL after terminationGracePeriodSeconds.
        grace = pod_template(workloads[SERVER])["spec"]["terminationGracePeriodSeconds"]
        codes[SERVER] = stop(server.popen, timeout_s=max(grace, compose_run.JOBS_DEADLINE_S))
        yield ClusterRun(
            data_dir=claims[manifests.DATA_CLAIM],
            replay_dir=tmp / "claims" / "replay",
            procs=procs.running,
            codes=codes,
            probe=probe,
            probe_no_server=probe_no_server,
        )
    finally:
        procs.kill_all()


def test_server_probe_passes_and_can_fail(cluster_run):
    code, output = cluster_run.probe
    assert code == 0, f"the probe failed ({code}):\n{output}\n" + cluster_run.tails(SERVER)
    code, output = cluster_run.probe_no_server
    assert code != 0, f"the probe passes with no server listening:\n{output}"


def test_every_container_exited_zero(cluster_run):
    assert set(cluster_run.codes) == {SERVER, *CLIENTS}
    failed = {name: code for name, code in cluster_run.codes.items() if code != 0}
    assert not failed, f"non-zero exits {failed}:\n" + cluster_run.tails(*failed)


def test_learner_job_trained_and_exported_to_the_shared_volume(cluster_run):
    data, steps = cluster_run.data_dir, compose_run.NUM_ITERATIONS
    log = read(str(cluster_run.procs[job_definitions.LEARNER].log))
    assert f"Learner stopped at train_step {steps}" in log, cluster_run.tails("learner")
    assert (Path(paths.checkpoint_dir(str(data))) / f"ckpt-{steps}.index").is_file()
    for name in paths.POLICY_NAMES:
        assert (data / paths.POLICIES_DIR / name / "saved_model.pb").is_file(), name


def test_actor_wrote_to_the_server(cluster_run):
    log = read(str(cluster_run.procs[manifests.ACTOR].log))
    match = re.search(r"Actor \d+ stopping \(([^)]*)\).*transitions_written=(\d+)", log)
    assert match and int(match.group(2)) > 0, cluster_run.tails(manifests.ACTOR)


def test_evaluator_job_wrote_results(cluster_run):
    path = cluster_run.data_dir / paths.EVAL_DIR / paths.RESULTS_FILE
    assert path.is_file(), cluster_run.tails(job_definitions.EVALUATOR)
    steps = [int(line.split(",")[0]) for line in path.read_text().strip().splitlines()[1:]]
    assert steps and steps[-1] == compose_run.NUM_ITERATIONS, steps


def test_server_checkpointed_the_replay_to_its_own_volume_on_sigterm(cluster_run):
    written = [p.name for p in cluster_run.replay_dir.iterdir() if not p.name.startswith(".")]
    assert written, "nothing in the replay claim:\n" + cluster_run.tails(SERVER)
    log = read(str(cluster_run.procs[SERVER].log))
    after_sigterm = log[log.find("Received SIGTERM") :] if "Received SIGTERM" in log else ""
    assert "Replay checkpoint written to" in after_sigterm, cluster_run.tails(SERVER)
