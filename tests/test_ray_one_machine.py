"""sac-launch --engine=ray on one small machine, as the README's one-machine command.

`ray start --head --num-cpus=4` (README, Ray) is reproduced with Ray's own
test cluster (a head of 4 logical CPUs, which this test can shut down without
touching any other Ray on the machine). Two actors of half a CPU each fit beside the server, learner
and evaluator. The launcher's output goes to a pipe, not a terminal, so it
must hold no colour codes.
"""

import subprocess
import sys

import pytest
from proc_utils import DEADLINE_S, TINY_RUN_FLAGS, TINY_RUN_ITERATIONS, assert_greedy_policy_acts

pytestmark = pytest.mark.slow

ANSI_ESCAPE = "\x1b["


@pytest.fixture(scope="module")
def one_machine():
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 4, "include_dashboard": False},
    )
    try:
        yield cluster
    finally:
        cluster.shutdown()


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
