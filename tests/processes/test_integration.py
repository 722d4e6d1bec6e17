"""End to end: the real binaries as separate OS processes on localhost.

Server, learner, two actors and an evaluator train Pendulum-v1 for a few
hundred steps; the test then checks every artefact a user relies on.
"""

import os
import re
import signal

import numpy as np
import portpicker
import pytest
import reverb
from support.processes import actor_collecting, kill_all, read, start, stop, wait_all, wait_for_log

import sac_distributed  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)
from sac_distributed import replay

pytestmark = pytest.mark.slow

NUM_ITERATIONS = 200
NUM_ACTORS = 2
DEADLINE_S = 900  # against hangs only

SMALL = [
    "--env_name=Pendulum-v1",
    f"--num_iterations={NUM_ITERATIONS}",
    "--initial_collect_steps=200",
    "--batch_size=32",
    # The preset's 128 would admit only ~50 transitions in 200 train steps at batch 32,
    # too few for both actors to be sure of a share; 8 admits ~800.
    "--samples_per_insert=8",
    "--actor_fc_layer_params=16,16",
    "--critic_joint_fc_layer_params=16,16",
    "--eval_interval=100",
    "--num_eval_episodes=1",
    # The tests read only the final export: one export, at the last step.
    f"--policy_save_interval={NUM_ITERATIONS}",
    "--seed=3",
]


def _log(root_dir: str, name: str) -> str:
    return read(os.path.join(root_dir, f"{name}.log"))


@pytest.fixture(scope="module")
def finished_topology_run(tmp_path_factory):
    """Runs the whole topology once; yields (root_dir, exit codes, inserted items)."""
    root = str(tmp_path_factory.mktemp("integration"))
    port = portpicker.pick_unused_port()
    address = f"localhost:{port}"
    shared = [f"--root_dir={root}", *SMALL]
    clients = shared + [
        f"--replay_buffer_server_address={address}",
        f"--variable_container_server_address={address}",
        "--connect_timeout=600",
    ]
    # Clients first: they must wait for the server, whatever the start order.
    procs = {
        "learner": start("learner", clients + ["--checkpoint_interval=100"], f"{root}/learner.log")
    }
    for task in range(NUM_ACTORS):
        procs[f"actor_{task}"] = start(
            "actor",
            clients + [f"--task={task}", "--variable_update_interval=50"],
            f"{root}/actor_{task}.log",
        )
    procs["evaluator"] = start(
        "evaluator", clients + ["--poll_interval=0.5"], f"{root}/evaluator.log"
    )
    # The server starts last, once the learner and both actors say they are waiting
    # for it. The learner is held (SIGSTOP) until both actors are in their collect
    # loop: on a busy machine one actor can take longer to build its environment and
    # policy than the learner takes for the whole short run, and would write nothing.
    server = None
    try:
        wait_for_log(f"{root}/learner.log", "Waiting for the Reverb server", DEADLINE_S, procs)
        procs["learner"].send_signal(signal.SIGSTOP)
        for task in range(NUM_ACTORS):
            log = f"{root}/actor_{task}.log"
            wait_for_log(log, "Waiting for the Reverb server", DEADLINE_S, procs)
        server = start(
            "reverb_server", shared + [f"--port={port}", "--stats_interval=5"], f"{root}/server.log"
        )
        for task in range(NUM_ACTORS):
            wait_for_log(f"{root}/actor_{task}.log", actor_collecting(task), DEADLINE_S, procs)
        procs["learner"].send_signal(signal.SIGCONT)
        wait_all(procs, DEADLINE_S)
        info = reverb.Client(address).server_info(timeout=60)[replay.REPLAY_TABLE]
        inserted = int(info.rate_limiter_info.insert_stats.completed)
    except BaseException:
        procs["learner"].send_signal(signal.SIGCONT)
        kill_all(procs)
        raise
    finally:
        if server is not None:
            stop(server)
    codes = {name: p.returncode for name, p in procs.items()}
    codes["server"] = server.returncode
    yield root, codes, inserted


def test_every_process_exited_zero(finished_topology_run):
    root, codes, _ = finished_topology_run
    failed = {n: c for n, c in codes.items() if c != 0}
    details = "\n".join(f"--- {n}\n{_log(root, n)[-3000:]}" for n in failed)
    assert not failed, f"non-zero exits {failed}\n{details}"


def test_train_step_reached_num_iterations(finished_topology_run):
    root, _, _ = finished_topology_run
    checkpoints = os.listdir(os.path.join(root, "train", "checkpoints"))
    assert f"ckpt-{NUM_ITERATIONS}.index" in checkpoints
    assert f"Learner stopped at train_step {NUM_ITERATIONS}: num_iterations reached" in _log(
        root, "learner"
    )


def test_replay_received_items_from_every_actor(finished_topology_run):
    root, _, inserted = finished_topology_run
    written = []
    for task in range(NUM_ACTORS):
        match = re.search(r"transitions_written=(\d+)", _log(root, f"actor_{task}"))
        assert match, f"actor_{task} did not report its stats"
        written.append(int(match.group(1)))
    assert all(n > 0 for n in written), written
    # Nothing lost between the actors and the table.
    assert inserted == sum(written), (inserted, written)


def test_policies_load_and_act_in_bounds(finished_topology_run):
    import tensorflow as tf
    from tf_agents.environments import suite_gym
    from tf_agents.policies import py_tf_eager_policy

    root, _, _ = finished_topology_run
    env = suite_gym.load("Pendulum-v1")
    spec = env.action_spec()
    time_step = env.reset()
    for name in ("policy", "collect_policy", "greedy_policy"):
        policy = py_tf_eager_policy.SavedModelPyTFEagerPolicy(
            os.path.join(root, "policies", name), load_specs_from_pbtxt=True
        )
        assert policy.get_train_step() == NUM_ITERATIONS
        action = policy.action(time_step).action
        assert action.shape == spec.shape
        assert np.all(action >= spec.minimum) and np.all(action <= spec.maximum)
    # SacAgent's policy and collect_policy are one policy: the export writes it once
    # and copies it, so the two hold the same weights.
    weights = [
        tf.train.load_checkpoint(os.path.join(root, "policies", name, "variables", "variables"))
        for name in ("policy", "collect_policy")
    ]
    names = sorted(weights[0].get_variable_to_shape_map())
    assert names == sorted(weights[1].get_variable_to_shape_map())
    for var in names:
        np.testing.assert_array_equal(weights[0].get_tensor(var), weights[1].get_tensor(var))


def test_run_info_names_the_environment(finished_topology_run):
    import json

    root, _, _ = finished_topology_run
    with open(os.path.join(root, "run_info.json")) as f:
        info = json.load(f)
    assert info["env_name"] == "Pendulum-v1"
    assert info["hparams"]["num_iterations"] == NUM_ITERATIONS


def test_results_file_has_rows(finished_topology_run):
    root, _, _ = finished_topology_run
    with open(os.path.join(root, "eval", "results.csv")) as f:
        lines = f.read().strip().splitlines()
    assert lines[0] == "train_step,env_steps,average_return,average_episode_length,wall_time"
    rows = [line.split(",") for line in lines[1:]]
    assert len(rows) >= 2
    assert int(rows[-1][0]) == NUM_ITERATIONS
    assert all(np.isfinite(float(r[2])) for r in rows)


# An absl log line's time: "I1127 19:02:07.345088 140212041108352 file.py:133] ...".
_ABSL_TIME = re.compile(r"^[IWEF](\d{4} \d\d:\d\d:\d\d\.\d{6}) ")


def _first_logged(log: str, text: str) -> str:
    """The time ("MMDD hh:mm:ss.ffffff", ordered as text) of the first line with `text`."""
    for line in log.splitlines():
        match = _ABSL_TIME.match(line)
        if match and text in line:
            return match.group(1)
    raise AssertionError(f"no logged line contains {text!r}")


def test_learner_waited_for_the_late_server(finished_topology_run):
    """The learner started waiting before the server existed, saw it come up, then trained."""
    root, _, _ = finished_topology_run
    learner = _log(root, "learner")
    began_waiting = _first_logged(learner, "Waiting for the Reverb server at localhost:")
    server_listening = _first_logged(_log(root, "server"), "listening on port")
    saw_it_up = _first_logged(learner, "is up (learner needs the replay table")
    stopped = _first_logged(learner, f"Learner stopped at train_step {NUM_ITERATIONS}")
    assert began_waiting < server_listening, (began_waiting, server_listening)
    assert began_waiting < saw_it_up < stopped, (began_waiting, saw_it_up, stopped)
