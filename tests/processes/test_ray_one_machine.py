"""sac-launch --engine=ray on one small machine, as the README's one-machine command.

`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 ray start --head --num-cpus=4` (README,
Ray) is reproduced with Ray's own test cluster (a head of 4 logical CPUs on
127.0.0.1, which this test can shut down without touching any other Ray on the
machine). Two actors of half a CPU each fit beside the server, learner and
evaluator. The launcher's output goes to a pipe, not a terminal, so it must
hold no colour codes. One machine stays on the loopback interface: the jobs get
127.0.0.1 as the Reverb server's address, and a Ray that sac-launch starts
itself listens on 127.0.0.1 only.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from support.processes import (
    DEADLINE_S,
    TINY_RUN_FLAGS,
    TINY_RUN_ITERATIONS,
    assert_greedy_policy_acts,
)

pytestmark = pytest.mark.slow

ANSI_ESCAPE = "\x1b["


@pytest.fixture(scope="module")
def one_machine():
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    from sac_distributed.launchers import ray_launch

    # As `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 ray start --head`; sac-launch inherits it.
    undo = ray_launch.stay_on_loopback()
    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 4, "include_dashboard": False},
    )
    try:
        yield cluster
    finally:
        cluster.shutdown()
        undo()


def test_a_run_fits_a_four_cpu_head_with_fractional_actors_and_plain_output(one_machine, tmp_path):
    root = str(tmp_path / "run")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-u",
            "-m",
            "sac_distributed.bin.launch",
            "--engine=ray",
            f"--ray_address={one_machine.address}",
            f"--root_dir={root}",
            "--num_actors=2",
            "--actor_cpus=0.5",
            *TINY_RUN_FLAGS,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(2)
        out, _ = proc.communicate(timeout=120)
        pytest.fail(f"sac-launch did not finish in {DEADLINE_S} s:\n{out[-4000:]}")
    assert proc.returncode == 0, out[-6000:]
    assert "training finished; every job exited 0" in out, out[-6000:]
    assert "pid=" in out, out[-3000:]  # Ray's own prefixed lines are there ...
    assert ANSI_ESCAPE not in out, repr(out[out.index(ANSI_ESCAPE) - 200 :][:400])  # ... plain
    assert_greedy_policy_acts(root, TINY_RUN_ITERATIONS)
    # The head is on 127.0.0.1, so every job got the server there and runs there.
    assert "Reverb on 127.0.0.1:" in out, out[-6000:]
    started = [
        line for line in out.splitlines() if "== sac-launch:" in line and " started " in line
    ]
    assert len(started) >= 5 and all("(127.0.0.1)" in line for line in started), started


# Starts a local Ray as sac-launch does without --ray_address, and reports the node's
# address, the one a task on it hands out for the Reverb server, and where Ray listens.
_LOCAL_RAY = textwrap.dedent(
    """
    import json, psutil, ray
    from sac_distributed.launchers import ray_launch

    assert ray_launch.connect(None, 1) is True
    try:
        host, _ = ray.get(ray_launch._address_on_node.remote(8008))
        listening = set()
        for process in psutil.Process().children(recursive=True):
            try:
                for c in process.net_connections(kind="inet"):
                    if c.status == psutil.CONN_LISTEN:
                        listening.add((process.name(), c.laddr.ip))
            except psutil.Error:
                pass  # a worker that exited meanwhile
        node = ray.util.get_node_ip_address()
        print(json.dumps(dict(node=node, server_host=host, listening=sorted(listening))))
    finally:
        ray.shutdown()
    """
)


def test_a_local_ray_started_by_sac_launch_listens_on_loopback_only():
    pytest.importorskip("psutil")
    from sac_distributed.launchers.ray_launch import LOOPBACK_VARIABLE

    # Neither a cluster's address nor the single-machine switch comes from outside.
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", LOOPBACK_VARIABLE)}
    out = subprocess.run(
        [sys.executable, "-c", _LOCAL_RAY],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["node"] == report["server_host"] == "127.0.0.1", report
    names = {name for name, _ in report["listening"]}
    assert {"gcs_server", "raylet"} <= names, report  # Ray's own servers were seen ...
    hosts = {ip.removeprefix("::ffff:") for _, ip in report["listening"]}
    assert hosts == {"127.0.0.1"}, report  # ... and none listens beyond the machine
