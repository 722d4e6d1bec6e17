"""--wait_for_eval: an evaluation at every multiple of eval_interval, none skipped."""

import subprocess
import sys
import time

import pytest
from support.processes import DEADLINE_S, TINY_RUN_FLAGS
from support.training import ENV_NAME

from sac_distributed import paths
from sac_distributed.jobs import eval_wait as eval_wait_lib
from sac_distributed.results import EvalPoint, append_result, last_evaluated_step, read_results


def test_last_evaluated_step_reads_a_live_file(tmp_path):
    path = str(tmp_path / "eval" / "results.csv")
    assert last_evaluated_step(path) is None  # no evaluation yet
    append_result(path, EvalPoint(0, 100, -1200.0, 200.0, time.time()))
    append_result(path, EvalPoint(50, 160, -900.0, 200.0, time.time()))
    assert last_evaluated_step(path) == 50
    with open(path, "a") as f:
        f.write("100,2")  # a row the evaluator is still writing
    assert last_evaluated_step(path) is None


def test_learner_stops_waiting_when_no_evaluator_answers(
    make_learner_config, make_learner, fill_replay, monkeypatch, caplog
):
    # No evaluator: the learner waits once, gives up, and still trains to the end.
    monkeypatch.setattr(eval_wait_lib, "EVAL_WAIT_TIMEOUT_S", 0.5)
    fill_replay(128)
    config = make_learner_config(dict(wait_for_eval=True, eval_interval=10, num_iterations=30))
    loop = make_learner(config)
    with caplog.at_level("INFO"):
        result = loop.run()
    assert result.train_step == 30
    assert result.stop_reason == "num_iterations reached"
    # One timed-out wait, at step 10; none at 20 and 30.
    gave_up = [r.getMessage() for r in caplog.records if "without waiting" in r.getMessage()]
    assert len(gave_up) == 1 and "No evaluation of train_step 10 in " in gave_up[0], gave_up


@pytest.mark.slow
def test_sac_launch_evaluates_every_multiple_of_eval_interval(tmp_path):
    # Two 200-step Pendulum episodes per evaluation take far longer than 25 train
    # steps of these tiny nets, so an evaluator that did not hold the learner
    # back would skip most multiples.
    root = str(tmp_path / "run")
    flags = [f for f in TINY_RUN_FLAGS if not f.startswith(("--eval_interval", "--num_eval"))]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sac_distributed.bin.launch",
            f"--root_dir={root}",
            f"--env_name={ENV_NAME}",
            *flags,
            "--eval_interval=25",
            "--num_eval_episodes=2",
            "--wait_for_eval",
            # Threads: the learner waits on the evaluator's results file, as across
            # processes, without four more TensorFlow start-ups.
            "--engine=threads",
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    points = read_results(paths.results_path(root))
    assert [p.train_step for p in points] == list(range(0, 201, 25))
    env_steps = [p.env_steps for p in points]
    assert env_steps == sorted(env_steps) and env_steps[-1] > env_steps[1] > env_steps[0]
    learner_log = out.stdout + out.stderr  # the threads' logs: the launcher's output
    assert "train_step 175 evaluated; waited" in learner_log
    assert "training on without waiting" not in learner_log
