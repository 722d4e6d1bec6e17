"""sac-launch --engine=threads: every job as a thread of the launcher's process."""

import fcntl
import json
import os
import signal

import pytest
from support.processes import DEADLINE_S, TINY, read_until, start_launch
from support.repo import TESTS_DIR

from sac_distributed import results

pytestmark = pytest.mark.slow


def _replay_checkpoints(root: str):
    path = os.path.join(root, "replay_checkpoints")
    return [d for d in os.listdir(path) if not d.startswith(".")] if os.path.isdir(path) else []


def test_a_threaded_run_trains_to_num_iterations_in_one_process(tmp_path):
    root = str(tmp_path / "run")
    proc = start_launch([f"--root_dir={root}", "--engine=threads", "--seed=3", *TINY])
    out, _ = proc.communicate(timeout=DEADLINE_S)

    assert proc.returncode == 0, out[-4000:]
    assert "actor(s) as threads of this process" in out
    assert "sac-launch: training finished; every job returned" in out
    points = results.read_results(os.path.join(root, "eval", "results.csv"))
    assert [p.train_step for p in points][0] == 0 and points[-1].train_step == 200
    assert points[-1].env_steps > 100  # the actor's inserts, read from the server
    assert os.path.isdir(os.path.join(root, "policies", "greedy_policy"))
    assert _replay_checkpoints(root), "the server wrote its replay checkpoint after the clients"
    # No job ran as a process of its own: the local engine's per-process logs are absent.
    assert not os.path.exists(os.path.join(root, "logs"))


def test_a_job_that_fails_ends_the_threaded_run_with_its_error(tmp_path):
    root = str(tmp_path / "bad")
    # The launcher's own check makes the env; every job's attempt then fails.
    fails_in_jobs = [
        "--env_name=user_envs:make_after_first",
        f"--env_kwargs={json.dumps({'marker': str(tmp_path / 'made')})}",
    ]
    proc = start_launch(
        [f"--root_dir={root}", "--engine=threads", *fails_in_jobs, *TINY], cwd=TESTS_DIR
    )
    out, _ = proc.communicate(timeout=DEADLINE_S)

    assert proc.returncode == 1, out[-4000:]
    # The server loads the env first (for the table signatures), so it is the one to fail.
    assert "sac-launch: server failed to start: EnvError: " in out
    assert "this env can be made only once" in out
    assert "No evaluation results were written." in out


def test_ctrl_c_stops_a_threaded_run_clients_first_then_the_server(tmp_path):
    root = str(tmp_path / "interrupted")
    proc = start_launch(
        [f"--root_dir={root}", "--engine=threads", *TINY[1:], "--num_iterations=1000000"]
    )
    seen = read_until(proc, "Eval at train_step")  # training is under way

    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=DEADLINE_S)
    out = "".join(seen) + rest

    assert proc.returncode == 0, out[-4000:]
    assert "sac-launch: stopped on request (Ctrl-C / SIGTERM)" in out
    checkpoints = os.listdir(os.path.join(root, "train", "checkpoints"))
    assert any(f.endswith(".index") for f in checkpoints), "the learner's last checkpoint"
    assert os.path.isdir(os.path.join(root, "policies", "greedy_policy"))
    assert _replay_checkpoints(root)
    assert out.index("Learner stopped at train_step") < out.index("Replay checkpoint written")


def test_a_client_that_fails_stops_the_others_and_the_server_still_checkpoints(tmp_path):
    root = tmp_path / "owned"
    root.mkdir()
    # This test process holds the run's learner lock, as a learner elsewhere would.
    with open(root / "learner.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        proc = start_launch([f"--root_dir={root}", "--engine=threads", *TINY])
        out, _ = proc.communicate(timeout=DEADLINE_S)

    assert proc.returncode == 1, out[-4000:]
    assert "sac-launch: learner failed: RunOwnedError: Another learner owns this run" in out
    assert _replay_checkpoints(str(root)), "the server still wrote its replay checkpoint"
