"""sac-launch --engine=ray on a real two-node Ray cluster on this machine.

The cluster is Ray's own multi-node test utility (`ray.cluster_utils.Cluster`):
a head node and a worker node, each a raylet of its own, so Ray places, kills
and restarts jobs per node as on a real cluster. Two short Pendulum-v1 runs:
one loses an actor's process mid-run, the other the worker node with an actor
on it; both must end with a finished learner and a greedy policy that stock
TF-Agents loads.
"""

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from support.processes import (
    DEADLINE_S,
    TINY_RUN_FLAGS,
    TINY_RUN_ITERATIONS,
    assert_greedy_policy_acts,
    read,
    start_launch,
)

from sac_distributed import config as config_lib
from sac_distributed import paths
from sac_distributed.errors import ConfigError
from sac_distributed.launchers import job_definitions

NUM_ITERATIONS = TINY_RUN_ITERATIONS
TINY = list(TINY_RUN_FLAGS)
# Written by the Ray engine at the top of each start of a job in logs/<job>.log.
_STARTED = re.compile(r"== sac-launch: (\w+) started as pid (\d+) on node (\w+)")


# --- without a cluster ---------------------------------------------------------


def test_ray_options_need_the_ray_engine(tmp_path):
    with pytest.raises(
        ConfigError, match=r"--ray_address, --learner_gpus apply only to a Ray cluster"
    ):
        config_lib.LaunchConfig(root_dir=str(tmp_path), ray_address="auto", learner_gpus=1)
    config_lib.LaunchConfig(root_dir=str(tmp_path), engine="ray", ray_address="auto")


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(engine="yarn"), "engine must be one of"),
        (dict(engine="ray", ray_address="head"), "not a host:port address"),
        (dict(engine="ray", learner_gpus=-1), "learner_gpus must be a number >= 0"),
        (dict(engine="ray", actor_cpus=-1), "actor_cpus must be a number >= 0"),
        (dict(engine="ray", max_restarts=-2), "max_restarts must be an integer >= 0"),
    ],
)
def test_bad_ray_options_are_refused(tmp_path, options, message):
    with pytest.raises(ConfigError, match=message):
        config_lib.LaunchConfig(root_dir=str(tmp_path), **options)


@pytest.mark.parametrize("actor_cpus", [0, 0.25])
def test_actors_may_ask_for_no_cpu_or_a_fraction(tmp_path, actor_cpus):
    from sac_distributed.launchers import ray_launch

    config = config_lib.LaunchConfig(
        root_dir=str(tmp_path), engine="ray", num_actors=4, actor_cpus=actor_cpus
    )
    assert ray_launch.cpus_needed(config) == 3 + 4 * actor_cpus


def test_too_few_cpus_says_what_to_run_on_one_machine(tmp_path, monkeypatch):
    """The README's 2-CPU machine after a plain `ray start --head`."""
    from sac_distributed.launchers import ray_launch

    head = {"NodeID": "n0", "Resources": {"CPU": 2.0, ray_launch.HEAD_NODE_RESOURCE: 1.0}}
    monkeypatch.setattr(ray_launch, "_alive_nodes", lambda: [head])
    config = config_lib.LaunchConfig(
        root_dir=str(tmp_path), engine="ray", ray_address="auto", num_actors=2
    )
    with pytest.raises(ConfigError) as refused:
        ray_launch.choose_nodes(config)
    message = str(refused.value)
    assert message.startswith("The Ray cluster has 2 CPUs; this run asks for 5 ")
    assert "ray start --head --num-cpus=5`" in message
    assert "leave out --ray_address" in message
    assert "--actor_cpus (fractions and 0 are allowed)" in message
    assert "\n" not in message
    fractional = dataclasses.replace(config, actor_cpus=0.3)
    with pytest.raises(ConfigError, match=r"asks for 3.6 .*--num-cpus=4`"):
        ray_launch.choose_nodes(fractional)


def test_clients_get_the_server_host_the_engine_found(tmp_path):
    launch = config_lib.LaunchConfig(root_dir=str(tmp_path), engine="ray", num_actors=2)
    configs = job_definitions.make_run_configs(launch, 4567, hosts="10.0.0.7")
    specs = job_definitions.job_specs(configs)
    assert [s.name for s in specs] == ["server", "learner", "actor_0", "actor_1", "evaluator"]
    for spec in specs[1:]:
        assert "--replay_buffer_server_address=10.0.0.7:4567" in spec.flags
    assert "--port=4567" in specs[0].flags


def test_sharded_clients_get_every_shard_host_the_engine_found(tmp_path):
    launch = config_lib.LaunchConfig(root_dir=str(tmp_path), engine="ray", num_replay_shards=2)
    configs = job_definitions.make_run_configs(launch, [4567, 4570], hosts=["10.0.0.7", "10.0.0.8"])
    specs = job_definitions.job_specs(configs)
    assert [s.name for s in specs][:3] == ["server_0", "server_1", "learner"]
    for spec in specs[2:]:
        assert "--replay_buffer_server_address=10.0.0.7:4567,10.0.0.8:4570" in spec.flags
        assert "--variable_container_server_address=10.0.0.7:4567" in spec.flags
    assert "--port=4570" in specs[1].flags and "--replay_shard=1" in specs[1].flags


def test_shards_start_on_the_head_then_spread_round_robin():
    ray_launch = pytest.importorskip("sac_distributed.launchers.ray_launch")
    head = {"NodeID": "h", "Resources": {ray_launch.HEAD_NODE_RESOURCE: 1.0, "CPU": 4.0}}
    worker = {"NodeID": "w", "Resources": {"CPU": 2.0}}
    gpu_only = {"NodeID": "g", "Resources": {"GPU": 1.0}}
    assert ray_launch.shard_nodes([worker, head, gpu_only], 3) == ["h", "w", "h"]
    assert ray_launch.shard_nodes([head], 2) == ["h", "h"]
    launch = config_lib.LaunchConfig(
        root_dir="/tmp/x", engine="ray", num_actors=2, num_replay_shards=3
    )
    assert ray_launch.cpus_needed(launch) == 2 + 3 + 2


def test_the_core_never_imports_ray():
    code = textwrap.dedent(
        """
        import importlib, pkgutil, sys
        import sac_distributed
        import sac_distributed.bin.launch  # (the binaries' flags clash: one at a time)
        for module in pkgutil.iter_modules(sac_distributed.__path__, "sac_distributed."):
            if module.name != "sac_distributed.launchers.ray_launch":
                importlib.import_module(module.name)
        print("ray imported:", "ray" in sys.modules)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE_S
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ray imported: False" in result.stdout


def test_ray_engine_without_ray_says_how_to_install_it(tmp_path):
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["ray"] = None  # as if Ray were not installed
        sys.argv = ["sac-launch", "--engine=ray", "--root_dir={tmp_path / "run"}"]
        from sac_distributed.bin import launch
        launch.run()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE_S
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "--engine=ray needs Ray" in result.stderr
    assert "pip install -e '.[ray]'" in result.stderr


# --- on a two-node cluster -----------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    from sac_distributed.launchers import ray_launch

    # One machine stays on the loopback interface: both nodes register 127.0.0.1
    # (Ray's single-machine mode; sac-launch inherits it from the environment).
    undo = ray_launch.stay_on_loopback()
    # The head holds the server, learner and evaluator and room for every actor
    # (after the worker node is gone); the worker holds one actor.
    cluster = cluster_utils.Cluster(
        initialize_head=True, head_node_args={"num_cpus": 5, "include_dashboard": False}
    )
    worker = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    try:
        yield cluster, worker
    finally:
        cluster.shutdown()
        undo()


@pytest.fixture
def launch():
    """Starts sac-launch --engine=ray; a launcher still running at teardown gets Ctrl-C."""
    started = []

    def start(root: str, address: str) -> subprocess.Popen:
        started.append(_launch_on_ray(root, address))
        return started[-1]

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=300)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


def _launch_on_ray(root: str, address: str) -> subprocess.Popen:
    return start_launch(
        [
            "--engine=ray",
            f"--ray_address={address}",
            f"--root_dir={root}",
            "--num_actors=2",
            *TINY,
        ]
    )


def _starts(root: str, job: str):
    """(pid, node id) of every start of `job`, from its log."""
    text = read(os.path.join(paths.log_dir(root), f"{job}.log"))
    return [(int(m.group(2)), m.group(3)) for m in _STARTED.finditer(text)]


def _wait_for(condition, what: str, proc: subprocess.Popen):
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc.poll() is not None:
            pytest.fail(f"sac-launch exited ({proc.returncode}) while waiting for {what}")
        time.sleep(0.5)
    pytest.fail(f"waited {DEADLINE_S} s for {what}")


def _collecting(root: str, job: str) -> bool:
    log = read(os.path.join(paths.log_dir(root), f"{job}.log"))
    return "initial collect" in log or "switching from random" in log


def _finish(proc: subprocess.Popen) -> str:
    try:
        out, _ = proc.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
        pytest.fail(f"sac-launch did not finish in {DEADLINE_S} s:\n{out[-4000:]}")
    return out


def _assert_finished_with_loadable_policy(root: str, out: str, proc: subprocess.Popen):

    assert proc.returncode == 0, out[-6000:]
    assert "training finished; every job exited 0" in out, out[-6000:]
    assert_greedy_policy_acts(root, NUM_ITERATIONS)


def _no_job_left(root: str) -> bool:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return not any(f"--root_dir={root}" in line for line in out.splitlines())


def _wait_no_job_left(root: str) -> None:
    deadline = time.monotonic() + 120
    while not _no_job_left(root) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _no_job_left(root)


def _actor_on(root: str, node_id: str):
    """The first actor whose first start was on `node_id`, or None."""
    for job in ("actor_0", "actor_1"):
        starts = _starts(root, job)
        if starts and starts[0][1] == node_id:
            return job
    return None


@pytest.mark.slow
def test_run_spreads_actors_and_survives_a_killed_actor_and_a_lost_node(cluster, launch, tmp_path):
    """One run, two faults (one run costs ~3 min on a busy 2-core machine): the
    process of the head's actor is killed, then the worker node with the other
    actor is removed. Both actors come back on the head; the learner finishes.

    The learner is held (SIGSTOP) from its start until both faults are over:
    otherwise a tiny run can finish on the head's actor alone before Ray has
    moved the lost node's actor, and the move would go unchecked. It is held
    before its first training call, so its watchdog sees no stalled call."""
    ray_cluster, worker = cluster
    head = ray_cluster.head_node.node_id
    root = str(tmp_path / "run")
    proc = launch(root, ray_cluster.address)
    learner_pid = _wait_for(lambda: _starts(root, "learner"), "learner to start", proc)[0][0]
    os.kill(learner_pid, signal.SIGSTOP)
    try:
        on_head, moved = _inject_faults(ray_cluster, worker, root, proc)
    finally:
        with contextlib.suppress(ProcessLookupError):  # a learner gone keeps the first error
            os.kill(learner_pid, signal.SIGCONT)
    assert moved[0][1] == head

    out = _finish(proc)
    _assert_finished_with_loadable_policy(root, out, proc)
    assert "Reverb on 127.0.0.1:" in out, out[-4000:]  # the head's loopback address
    assert f"{on_head} died (exit code -9); Ray restarts it" in out
    _wait_no_job_left(root)


def _inject_faults(ray_cluster, worker, root: str, proc: subprocess.Popen):
    """Kills the head's actor's process, then removes the worker node; returns the
    head's actor and the starts of the worker's actor after its first (the moves)."""
    head = ray_cluster.head_node.node_id
    starts = {
        job: _wait_for(lambda job=job: _starts(root, job), f"{job} to start", proc)
        for job in ("server", "learner", "actor_0", "actor_1", "evaluator")
    }
    assert starts["server"][0][1] == starts["learner"][0][1] == head
    assert {starts["actor_0"][0][1], starts["actor_1"][0][1]} == {head, worker.node_id}
    on_head, on_worker = _actor_on(root, head), _actor_on(root, worker.node_id)

    # The actor binary dies (not its Ray worker): Ray restarts the pair.
    _wait_for(lambda: _collecting(root, on_head), f"{on_head} to collect", proc)
    os.kill(starts[on_head][0][0], signal.SIGKILL)
    _wait_for(lambda: len(_starts(root, on_head)) > 1, f"{on_head} to start again", proc)

    # The worker node dies: its actor comes back on the head node.
    _wait_for(lambda: _collecting(root, on_worker), f"{on_worker} to collect", proc)
    ray_cluster.remove_node(worker)
    return on_head, _wait_for(lambda: _starts(root, on_worker)[1:], f"{on_worker} elsewhere", proc)


@pytest.mark.parametrize("tty", [False, True])
def test_ray_colours_its_prefixes_only_on_a_terminal(monkeypatch, tty):
    """Ray's driver reads RAY_COLOR_PREFIX for each line it prints ("0": no codes)."""
    from sac_distributed.launchers import ray_launch

    seen = {}

    class Console:
        def isatty(self) -> bool:
            return tty

    monkeypatch.delenv("RAY_COLOR_PREFIX", raising=False)
    monkeypatch.setattr(sys, "stdout", Console())
    monkeypatch.setattr(
        ray_launch.ray, "init", lambda **_: seen.update(env=os.environ.get("RAY_COLOR_PREFIX"))
    )
    assert ray_launch.connect("auto", 3) is False
    assert seen["env"] == (None if tty else "0")
