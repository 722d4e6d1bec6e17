"""sac-launch --engine=ray on a real two-node Ray cluster on this machine.

The cluster is Ray's own multi-node test utility (`ray.cluster_utils.Cluster`):
a head node and a worker node, each a raylet of its own, so Ray places, kills
and restarts jobs per node as on a real cluster. Two short Pendulum-v1 runs:
one loses an actor's process mid-run, the other the worker node with an actor
on it; both must end with a finished learner and a greedy policy that stock
TF-Agents loads.
"""

import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from proc_utils import DEADLINE_S, read

from sac_distributed import config as config_lib
from sac_distributed import job_definitions, paths
from sac_distributed.errors import ConfigError

NUM_ITERATIONS = 200
TINY = [
    f"--num_iterations={NUM_ITERATIONS}",
    "--initial_collect_steps=100",
    "--batch_size=32",
    "--actor_fc_layer_params=16,16",
    "--critic_joint_fc_layer_params=16,16",
    "--eval_interval=100",
    "--num_eval_episodes=1",
    "--policy_save_interval=100",
]
# Written by the Ray engine at the top of each start of a job in logs/<job>.log.
_STARTED = re.compile(r"== sac-launch: (\w+) started as pid (\d+) on node (\w+)")


# --- without a cluster ---------------------------------------------------------


def test_ray_options_need_the_ray_engine(tmp_path):
    with pytest.raises(ConfigError, match=r"--ray_address, --learner_gpus only apply"):
        config_lib.LaunchConfig(root_dir=str(tmp_path), ray_address="auto", learner_gpus=1)
    config_lib.LaunchConfig(root_dir=str(tmp_path), engine="ray", ray_address="auto")


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(engine="yarn"), "engine must be one of"),
        (dict(engine="ray", ray_address="head"), "not a host:port address"),
        (dict(engine="ray", learner_gpus=-1), "learner_gpus must be a number >= 0"),
        (dict(engine="ray", actor_cpus=0), "actor_cpus must be a number > 0"),
        (dict(engine="ray", max_restarts=-2), "max_restarts must be an integer >= 0"),
    ],
)
def test_bad_ray_options_are_refused(tmp_path, options, message):
    with pytest.raises(ConfigError, match=message):
        config_lib.LaunchConfig(root_dir=str(tmp_path), **options)


def test_clients_get_the_server_host_the_engine_found(tmp_path):
    launch = config_lib.LaunchConfig(root_dir=str(tmp_path), engine="ray", num_actors=2)
    configs = job_definitions.make_run_configs(launch, 4567, host="10.0.0.7")
    specs = job_definitions.job_specs(configs)
    assert [s.name for s in specs] == ["server", "learner", "actor_0", "actor_1", "evaluator"]
    for spec in specs[1:]:
        assert "--replay_buffer_server_address=10.0.0.7:4567" in spec.flags
    assert "--port=4567" in specs[0].flags


# --- on a two-node cluster -----------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    cluster_utils = pytest.importorskip("ray.cluster_utils")
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


@pytest.fixture
def launch():
    """Starts sac-launch --engine=ray; a launcher still running at teardown gets Ctrl-C."""
    started = []

    def start(root: str, address: str) -> subprocess.Popen:
        started.append(_launch(root, address))
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


def _launch(root: str, address: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-u",
            "-m",
            "sac_distributed.bin.launch",
            "--engine=ray",
            f"--ray_address={address}",
            f"--root_dir={root}",
            "--num_actors=2",
            *TINY,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
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
    from tf_agents.environments import suite_gym
    from tf_agents.policies import py_tf_eager_policy

    assert proc.returncode == 0, out[-6000:]
    assert "training finished; every job exited 0" in out, out[-6000:]
    policy = py_tf_eager_policy.SavedModelPyTFEagerPolicy(
        paths.policy_dir(root, "greedy_policy"), load_specs_from_pbtxt=True
    )
    assert policy.get_train_step() == NUM_ITERATIONS
    env = suite_gym.load("Pendulum-v1")
    action = policy.action(env.reset()).action
    spec = env.action_spec()
    assert np.all(action >= spec.minimum) and np.all(action <= spec.maximum)


def _no_job_left(root: str) -> bool:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return not any(f"--root_dir={root}" in line for line in out.splitlines())


def _wait_no_job_left(root: str) -> None:
    deadline = time.monotonic() + 120
    while not _no_job_left(root) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _no_job_left(root)


@pytest.mark.slow
def test_run_spreads_actors_and_survives_a_killed_actor_process(cluster, launch, tmp_path):
    ray_cluster, worker = cluster
    root = str(tmp_path / "run")
    proc = launch(root, ray_cluster.address)
    starts = {
        job: _wait_for(lambda job=job: _starts(root, job), f"{job} to start", proc)
        for job in ("server", "learner", "actor_0", "actor_1", "evaluator")
    }
    nodes = {job: s[0][1] for job, s in starts.items()}
    head = ray_cluster.head_node.node_id
    assert nodes["server"] == nodes["learner"] == head
    assert {nodes["actor_0"], nodes["actor_1"]} == {head, worker.node_id}

    _wait_for(lambda: _collecting(root, "actor_0"), "actor_0 to collect", proc)
    os.kill(starts["actor_0"][0][0], signal.SIGKILL)  # the actor binary, not its Ray worker
    restarted = _wait_for(lambda: len(_starts(root, "actor_0")) > 1, "actor_0 again", proc)
    assert restarted

    out = _finish(proc)
    _assert_finished_with_loadable_policy(root, out, proc)
    assert "actor_0 died (exit code -9); Ray restarts it" in out
    _wait_no_job_left(root)


@pytest.mark.slow
def test_run_survives_losing_the_worker_node(cluster, launch, tmp_path):
    ray_cluster, worker = cluster
    root = str(tmp_path / "node_lost")
    proc = launch(root, ray_cluster.address)
    on_worker = _wait_for(
        lambda: [
            job
            for job in ("actor_0", "actor_1")
            if any(node == worker.node_id for _, node in _starts(root, job))
        ],
        "an actor on the worker node",
        proc,
    )
    job = on_worker[0]
    _wait_for(lambda: _collecting(root, job), f"{job} to collect", proc)
    ray_cluster.remove_node(worker)
    moved = _wait_for(
        lambda: [node for _, node in _starts(root, job)][1:], f"{job} on another node", proc
    )
    assert moved[-1] == ray_cluster.head_node.node_id

    out = _finish(proc)
    _assert_finished_with_loadable_policy(root, out, proc)
    _wait_no_job_left(root)
