"""Runs every service of launch/docker-compose.yml as local processes on localhost.

test_compose.py only parses the command lines. Here each one is executed, so
the compose file cannot rot: the commands are taken from the parsed file and
only what Docker provides is rewritten for one host:

* `<service>:<port>` addresses -> `localhost:<free port>` (each service's own
  `--port=` gets that free port, and the server's healthcheck probes it);
* paths under a named volume's mount point (`/data`) -> a temporary directory
  per volume, so jobs share data only if the compose file mounts the same
  volume for them;
* `--host=0.0.0.0` -> 127.0.0.1 (TensorBoard is only published on loopback);
* the script name (`sac-actor`, `tensorboard`, `python`) -> the executable of
  that name next to this interpreter, i.e. the installed console script that
  the container runs; the environment gets the Dockerfile's ENV lines.

The same small-budget hyperparameter flags are appended to every sac-* job
(absl keeps the last value of a repeated flag), so all jobs still agree.

The run proves: the server starts and its healthcheck passes (and fails with
no server); `deploy.replicas` actors, the learner and the evaluator finish with
exit code 0 against that server, leaving policies, checkpoints, evaluation
results and inserted transitions; the server checkpoints the replay and exits 0
on SIGTERM (`docker compose stop`); TensorBoard serves the runs the jobs wrote.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

import portpicker
import pytest
from support.compose_run import (
    BUDGET_FLAGS,
    JOBS_DEADLINE_S,
    NUM_ITERATIONS,
    SERVER_READY_S,
    Proc,
    Procs,
    dockerfile_env,
    executable,
    run_healthcheck,
    wait_for_exit,
)
from support.launch_files import (
    CLIENT_SERVICES,
    DOCKERFILE,
    PUBLIC_SERVICE,
    SERVER_SERVICE,
    command_argv,
    load_compose,
    sac_commands,
    volume_mounts,
)
from support.processes import actor_collecting, read, stop, wait_for_log

pytestmark = pytest.mark.slow

TENSORBOARD_DEADLINE_S = 600.0
# Event-file directories of the learner, the evaluator and the actors (all --task=0).
EXPECTED_RUNS = ("train", "eval", "collect/actor_0")


# --- rewriting the compose commands for localhost -------------------------------


@dataclasses.dataclass(frozen=True)
class LocalHost:
    """What Docker provides, replaced by local equivalents."""

    container_ports: Dict[str, int]  # service -> the --port= it listens on in its container
    local_ports: Dict[str, int]  # service -> free local port
    volumes: Dict[str, Path]  # named volume -> local directory


def flag_value(argv: List[str], name: str) -> Optional[str]:
    """The last value of `--name=value` in argv (absl's rule), or None."""
    values = [a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")]
    return values[-1] if values else None


def _rewrite_value(value: str, host: LocalHost, mounts: Mapping[str, Path]) -> str:
    for service, port in host.container_ports.items():
        value = value.replace(f"{service}:{port}", f"localhost:{host.local_ports[service]}")
    for target, local in mounts.items():
        if value == target or value.startswith(target.rstrip("/") + "/"):
            value = str(local) + value[len(target.rstrip("/")) :]
    return value


def local_argv(service_name: str, service: Mapping, host: LocalHost) -> List[str]:
    """The service's command with Docker's names, ports and volumes made local."""
    argv = command_argv(service)
    mounts = {target: host.volumes[source] for source, target, _ in volume_mounts(service)}
    out = [executable(argv[0])]
    for arg in argv[1:]:
        name, eq, value = arg.partition("=")
        if not (arg.startswith("--") and eq):
            out.append(arg)
        elif name == "--port" and service_name in host.local_ports:
            out.append(f"--port={host.local_ports[service_name]}")
        elif name == "--host" and value == "0.0.0.0":
            out.append("--host=127.0.0.1")
        else:
            out.append(f"{name}={_rewrite_value(value, host, mounts)}")
    return out


def healthcheck_argv(service: Mapping, container_port: int, local_port: int) -> List[str]:
    """The healthcheck's `test` as a local argv, probing `local_port` instead."""
    test = service["healthcheck"]["test"]
    assert isinstance(test, list) and test[0] in ("CMD", "CMD-SHELL"), (
        f"unsupported healthcheck test {test!r}"
    )
    pattern = rf"\b{container_port}\b"
    assert any(re.search(pattern, part) for part in test[1:]), (
        f"the healthcheck {test!r} does not probe the server's port {container_port}."
    )
    parts = [re.sub(pattern, str(local_port), part) for part in test[1:]]
    if test[0] == "CMD-SHELL":
        return ["/bin/sh", "-c", " ".join(parts)]
    return [executable(parts[0]), *parts[1:]]


def service_env(service: Mapping, image_env: Mapping[str, str]) -> Dict[str, str]:
    """This process's environment plus the image's ENV and the service's `environment`."""
    env = {**os.environ, **image_env, "CUDA_VISIBLE_DEVICES": ""}
    given = service.get("environment") or {}
    if isinstance(given, list):
        given = dict(item.split("=", 1) for item in given)
    env.update({k: str(v) for k, v in given.items() if v is not None})
    return env


def http_json(url: str, timeout_s: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return json.loads(response.read().decode())


def poll_tensorboard_runs(board: Proc, port: int, deadline_s: float) -> List[str]:
    """Polls /data/runs until it lists EXPECTED_RUNS; returns them, or the last list.

    TensorBoard rescans its logdir every few seconds, so the runs appear
    with some delay after it first answers.
    """
    deadline = time.monotonic() + deadline_s
    runs: List[str] = []
    while time.monotonic() < deadline:
        if board.popen.poll() is not None:
            return runs  # exited: the test reports its log
        try:
            runs = http_json(f"http://127.0.0.1:{port}/data/runs")
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            time.sleep(0.5)
            continue
        if all(run in runs for run in EXPECTED_RUNS):
            return runs
        time.sleep(0.5)
    return runs


# --- the run ------------------------------------------------------------------


@dataclasses.dataclass
class ComposeRun:
    """What the fixture's one run of the compose services left behind."""

    root_dir: Path  # --root_dir as the rewritten commands give it (the shared volume)
    procs: Dict[str, Proc]
    codes: Dict[str, int]
    replicas: int
    healthcheck: Tuple[int, str]  # (exit code, output) against the running server
    healthcheck_no_server: Tuple[int, str]  # (exit code, output) against a port nobody serves
    tensorboard_runs: List[str]
    tensorboard_logdir: Optional[str]

    def tails(self, *names: str) -> str:
        return "\n".join(self.procs[n].tail() for n in names)

    def actor_names(self) -> List[str]:
        return [f"actor_{i}" for i in range(1, self.replicas + 1)]


@pytest.fixture(scope="module")
def compose_run(tmp_path_factory):
    """Starts the services in Compose's order and waits for each with a deadline."""
    tmp = tmp_path_factory.mktemp("compose_run")
    compose = load_compose()
    services = compose["services"]
    commands = sac_commands(compose)
    assert set(commands) == {SERVER_SERVICE, *CLIENT_SERVICES}, sorted(commands)
    port_owners = [SERVER_SERVICE, PUBLIC_SERVICE]
    container_ports = {}
    for name in port_owners:
        port = flag_value(command_argv(services[name]), "port")
        assert port is not None, f"{name} has no --port= in its command."
        container_ports[name] = int(port)
    volume_names = {src for s in services.values() for src, _, _ in volume_mounts(s)}
    host = LocalHost(
        container_ports=container_ports,
        local_ports={name: portpicker.pick_unused_port() for name in port_owners},
        volumes={name: tmp / "volumes" / name for name in volume_names},
    )
    for path in host.volumes.values():
        path.mkdir(parents=True)
    (tmp / "logs").mkdir()
    (tmp / "home").mkdir()  # the working directory, as the image's /home/sac
    procs = Procs(tmp / "logs", tmp / "home")
    image_env = dockerfile_env(DOCKERFILE.read_text())

    def argv_of(name: str) -> List[str]:
        argv = local_argv(name, services[name], host)
        return argv + list(BUDGET_FLAGS) if name in commands else argv

    def env_of(name: str) -> Dict[str, str]:
        return service_env(services[name], image_env)

    try:
        server = procs.start(SERVER_SERVICE, argv_of(SERVER_SERVICE), env_of(SERVER_SERVICE))
        local_port = host.local_ports[SERVER_SERVICE]
        wait_for_log(
            str(server.log),
            rf"listening on port {local_port}\b",
            SERVER_READY_S,
            {server.name: server.popen},
        )
        probe = healthcheck_argv(
            services[SERVER_SERVICE], container_ports[SERVER_SERVICE], local_port
        )
        healthcheck = run_healthcheck(probe, env_of(SERVER_SERVICE), procs.cwd)
        dead = healthcheck_argv(
            services[SERVER_SERVICE],
            container_ports[SERVER_SERVICE],
            portpicker.pick_unused_port(),
        )
        healthcheck_no_server = run_healthcheck(dead, env_of(SERVER_SERVICE), procs.cwd)

        replicas = int((services["actor"].get("deploy") or {}).get("replicas", 1))
        jobs = [
            procs.start(f"actor_{i}", argv_of("actor"), env_of("actor"))
            for i in range(1, replicas + 1)
        ]
        # The learner starts once every replica is in its collect loop (its first
        # replay-size check): a replica still building its environment when this short
        # run ends would write nothing.
        for actor in jobs:
            wait_for_log(
                str(actor.log), actor_collecting(), SERVER_READY_S, {actor.name: actor.popen}
            )
        jobs += [procs.start(n, argv_of(n), env_of(n)) for n in ("learner", "evaluator")]
        board = procs.start(PUBLIC_SERVICE, argv_of(PUBLIC_SERVICE), env_of(PUBLIC_SERVICE))
        codes = wait_for_exit(jobs, JOBS_DEADLINE_S, watch=server)

        board_port = host.local_ports[PUBLIC_SERVICE]
        runs = poll_tensorboard_runs(board, board_port, TENSORBOARD_DEADLINE_S)
        try:
            logdir = http_json(f"http://127.0.0.1:{board_port}/data/logdir").get("logdir")
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError) as e:
            logdir = f"<no answer: {e}>"
        stop(board.popen, timeout_s=120)
        # `docker compose stop`: SIGTERM, then SIGKILL after stop_grace_period.
        codes[SERVER_SERVICE] = stop(server.popen, timeout_s=JOBS_DEADLINE_S)
        yield ComposeRun(
            root_dir=Path(flag_value(argv_of("learner"), "root_dir")),
            procs=procs.running,
            codes=codes,
            replicas=replicas,
            healthcheck=healthcheck,
            healthcheck_no_server=healthcheck_no_server,
            tensorboard_runs=runs,
            tensorboard_logdir=logdir,
        )
    finally:
        procs.kill_all()


# --- checks -------------------------------------------------------------------


def test_server_healthcheck_passes_and_can_fail(compose_run):
    code, output = compose_run.healthcheck
    assert code == 0, (
        f"the healthcheck failed ({code}) against the running server:\n{output}\n"
        + compose_run.tails(SERVER_SERVICE)
    )
    code, output = compose_run.healthcheck_no_server
    assert code != 0, f"the healthcheck passes with no server listening:\n{output}"


def test_every_job_exited_zero(compose_run):
    expected = {SERVER_SERVICE, "learner", "evaluator", *compose_run.actor_names()}
    assert set(compose_run.codes) == expected
    failed = {name: code for name, code in compose_run.codes.items() if code != 0}
    assert not failed, f"non-zero exits {failed}:\n" + compose_run.tails(*failed)


def test_learner_reached_num_iterations(compose_run):
    root = compose_run.root_dir
    log = read(str(compose_run.procs["learner"].log))
    assert f"Learner stopped at train_step {NUM_ITERATIONS}: num_iterations reached" in log, (
        compose_run.tails("learner")
    )
    checkpoints = os.listdir(root / "train" / "checkpoints")
    assert f"ckpt-{NUM_ITERATIONS}.index" in checkpoints, (
        checkpoints,
        compose_run.tails("learner"),
    )
    info = json.loads((root / "run_info.json").read_text())
    assert info["hparams"]["num_iterations"] == NUM_ITERATIONS, info


def test_policies_exported(compose_run):
    """Each exported SavedModel loads with stock TF-Agents, is the last train_step's,
    and acts within the action bounds of the run's environment."""
    import numpy as np
    from tf_agents.policies import py_tf_eager_policy

    from sac_distributed.envs import loader as env_loader

    info = json.loads((compose_run.root_dir / "run_info.json").read_text())
    env = env_loader.load_env(info["env_name"], seed=0)
    spec = env.action_spec()
    time_step = env.reset()
    policies = compose_run.root_dir / "policies"
    for name in ("policy", "collect_policy", "greedy_policy"):
        assert (policies / name / "saved_model.pb").is_file(), (
            f"{policies / name} has no SavedModel:\n" + compose_run.tails("learner")
        )
        policy = py_tf_eager_policy.SavedModelPyTFEagerPolicy(
            str(policies / name), load_specs_from_pbtxt=True
        )
        assert policy.get_train_step() == NUM_ITERATIONS, name
        action = policy.action(time_step).action
        assert action.shape == spec.shape, (name, action.shape)
        assert np.all(action >= spec.minimum) and np.all(action <= spec.maximum), (name, action)
    env.close()


def test_every_actor_replica_wrote_to_the_server(compose_run):
    for name in compose_run.actor_names():
        log = read(str(compose_run.procs[name].log))
        match = re.search(r"Actor \d+ stopping \(([^)]*)\).*transitions_written=(\d+)", log)
        assert match, f"{name} did not report its stats:\n" + compose_run.tails(name)
        assert match.group(1) == "learner finished", compose_run.tails(name)
        assert int(match.group(2)) > 0, compose_run.tails(name)


def test_evaluator_wrote_results(compose_run):
    path = compose_run.root_dir / "eval" / "results.csv"
    assert path.is_file(), f"no {path}:\n" + compose_run.tails("evaluator")
    rows = [line.split(",") for line in path.read_text().strip().splitlines()[1:]]
    steps = [int(row[0]) for row in rows]
    assert steps and steps[-1] == NUM_ITERATIONS, (steps, compose_run.tails("evaluator"))


def test_server_checkpointed_the_replay_on_sigterm(compose_run):
    checkpoints = compose_run.root_dir / "replay_checkpoints"
    written = (
        sorted(p.name for p in checkpoints.iterdir() if not p.name.startswith("."))
        if checkpoints.is_dir()
        else []
    )
    log = read(str(compose_run.procs[SERVER_SERVICE].log))
    assert written, f"no replay checkpoint in {checkpoints}:\n" + compose_run.tails(SERVER_SERVICE)
    # Written on the way out, after SIGTERM (the periodic interval is far longer).
    after_sigterm = log[log.find("Received SIGTERM") :] if "Received SIGTERM" in log else ""
    assert "Replay checkpoint written to" in after_sigterm, compose_run.tails(SERVER_SERVICE)


def test_tensorboard_serves_the_runs(compose_run):
    runs = compose_run.tensorboard_runs
    missing = [run for run in EXPECTED_RUNS if run not in runs]
    message = f"tensorboard lists runs {runs}, missing {missing}:\n"
    assert not missing, message + compose_run.tails(PUBLIC_SERVICE)
    assert compose_run.tensorboard_logdir == str(compose_run.root_dir), (
        compose_run.tensorboard_logdir,
        compose_run.tails(PUBLIC_SERVICE),
    )
