"""--seed end to end (issue 5): a single-actor run with a fixed seed repeats its
first evaluation return.

Three runs of the real binaries (Reverb server, learner, evaluator and one
actor, each its own OS process) on Pendulum-v1 with a tiny budget: two with
the same --seed and one with another. The test proves that
  * the evaluator's first row of eval/results.csv (train_step 0: the
    learner's seeded initial weights, greedy actions, the evaluator's seeded
    env) is identical in both same-seed runs, and differs for the other seed,
    so the comparison can fail;
  * the actor's first episode (uniform random actions from its seeded
    generator in its seeded env, logged as actor/AverageReturn at env step
    200) is identical in both same-seed runs, and differs for the other seed.

Nothing asserted depends on process timing. The learner waits for
initial_collect_steps = 1000 transitions before its first update, but the
actor stops after one episode (200 steps), so the learner never trains: every
evaluation is of the initial weights, and the actor never leaves its uniform
random warm-up actions (it would switch only once the replay holds 1000
transitions). Once the evaluator has written its train_step 0 row and the actor
has exited, the evaluator and the server get SIGTERM and must exit 0; the
learner, still waiting for data, is killed: its graceful stop would export
three SavedModels that nobody reads, the slowest part of a run. (sac-launch
would wait for the learner to finish, and could not hold the learner back
until the evaluator has seen train_step 0; hence the binaries, started here.)
"""

from __future__ import annotations

import dataclasses
import glob
import os
import signal
import subprocess
import time
from typing import Dict, List

import portpicker
import pytest
from support.processes import kill_all, read, start, wait_for_log

import sac_distributed  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)

pytestmark = pytest.mark.slow

SEED = 7
OTHER_SEED = 8
EPISODE_LENGTH = 200  # Pendulum-v1's time limit
DEADLINE_S = 900.0  # for all three runs together; against hangs only
TINY = [
    "--env_name=Pendulum-v1",
    "--initial_collect_steps=1000",  # more than the actor collects: no update ever runs
    "--batch_size=32",
    "--actor_fc_layer_params=16,16",
    "--critic_joint_fc_layer_params=16,16",
    "--samples_per_insert=0",  # MinSize limiter: inserts never wait for the learner
    "--num_iterations=100",
    "--eval_interval=100",
    "--num_eval_episodes=2",
    "--policy_save_interval=100",
]
ACTOR_FLAGS = [f"--max_env_steps={EPISODE_LENGTH}"]


@dataclasses.dataclass
class Run:
    """One run's processes and where they write."""

    name: str
    seed: int
    root: str
    procs: Dict[str, subprocess.Popen]

    def log(self, job: str) -> str:
        return read(os.path.join(self.root, f"{job}.log"))

    def results_path(self) -> str:
        return os.path.join(self.root, "eval", "results.csv")

    def logs_tail(self, chars: int = 2000) -> str:
        return "\n".join(f"--- {self.name} {job}\n{self.log(job)[-chars:]}" for job in self.procs)


def _start_run(name: str, root: str, seed: int) -> Run:
    """Server, learner, evaluator and one actor, all started at once."""
    os.makedirs(root)
    port = portpicker.pick_unused_port()
    address = f"localhost:{port}"
    shared = [f"--root_dir={root}", f"--seed={seed}", *TINY]
    client = shared + [
        f"--replay_buffer_server_address={address}",
        f"--variable_container_server_address={address}",
        "--connect_timeout=120",
    ]
    argv = {
        "reverb_server": shared + [f"--port={port}"],
        "learner": client,
        "evaluator": client,
        "actor": client + ACTOR_FLAGS,
    }
    procs = {
        job: start(job, flags, os.path.join(root, f"{job}.log")) for job, flags in argv.items()
    }
    return Run(name, seed, root, procs)


def _wait_for_first_episode_and_evaluation(run: Run, deadline: float) -> None:
    """Until the evaluator has a train_step 0 row and the actor has exited."""
    others = {job: p for job, p in run.procs.items() if job != "actor"}
    left = max(1.0, deadline - time.monotonic())
    try:
        wait_for_log(run.results_path(), r"(?m)^0,", left, others)
    except pytest.fail.Exception as failure:
        pytest.fail(f"{run.name}: {failure}\n{run.logs_tail()}")
    try:
        code = run.procs["actor"].wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pytest.fail(f"{run.name}: the actor did not finish its episode\n{run.logs_tail()}")
    assert code == 0, f"{run.name}: actor exited {code}\n{run.logs_tail()}"


def _stop(runs: List[Run], job: str, deadline: float) -> None:
    """SIGTERM to `job` of every run at once; each must exit 0 before the deadline."""
    for run in runs:
        run.procs[job].send_signal(signal.SIGTERM)
    for run in runs:
        try:
            code = run.procs[job].wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"{run.name}: {job} ignored SIGTERM\n{run.logs_tail()}")
        assert code == 0, f"{run.name}: {job} exited {code}\n{run.logs_tail()}"


def _first_eval_row(run: Run) -> List[str]:
    """The first data row of eval/results.csv, as strings."""
    lines = read(run.results_path()).splitlines()
    assert len(lines) >= 2, f"{run.name}: no evaluation recorded\n{run.logs_tail()}"
    assert lines[0].startswith("train_step,env_steps,average_return,"), lines[0]
    return lines[1].split(",")


def _actor_return_at(run: Run, env_step: int) -> float:
    """actor/AverageReturn logged at `env_step` in the actor's TensorBoard events."""
    import tensorflow as tf

    events = glob.glob(os.path.join(run.root, "collect", "actor_0", "events.out.tfevents.*"))
    for path in events:
        for event in tf.compat.v1.train.summary_iterator(path):
            if event.step != env_step:
                continue
            for value in event.summary.value:
                if value.tag == "actor/AverageReturn":
                    return float(tf.make_ndarray(value.tensor))
    pytest.fail(
        f"{run.name}: no actor/AverageReturn at env step {env_step} in {events}\n{run.logs_tail()}"
    )


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a run leaves behind that --seed should fix."""

    first_eval_row: List[str]
    first_episode_return: float
    logs_tail: str  # for failure messages


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Outcome]:
    """The three runs, side by side; name -> Outcome."""
    base = str(tmp_path_factory.mktemp("seed"))
    seeds = {"first": SEED, "again": SEED, "other": OTHER_SEED}
    deadline = time.monotonic() + DEADLINE_S
    runs: List[Run] = []
    try:
        for name, seed in seeds.items():
            runs.append(_start_run(name, os.path.join(base, name), seed))
        for run in runs:
            _wait_for_first_episode_and_evaluation(run, deadline)
        for run in runs:  # idle, waiting for data: nothing of it is needed
            kill_all({"learner": run.procs["learner"]})
        _stop(runs, "evaluator", deadline)
        _stop(runs, "reverb_server", deadline)  # last: the clients talk to it
    finally:
        for run in runs:
            kill_all(run.procs)
    return {
        run.name: Outcome(
            _first_eval_row(run), _actor_return_at(run, EPISODE_LENGTH), run.logs_tail()
        )
        for run in runs
    }


def test_first_evaluation_is_of_the_initial_weights(outcomes: Dict[str, Outcome]) -> None:
    for name, outcome in outcomes.items():
        train_step, _, _, episode_length, _ = outcome.first_eval_row
        assert train_step == "0", f"{name}: {outcome.first_eval_row}\n{outcome.logs_tail}"
        assert float(episode_length) == EPISODE_LENGTH, f"{name}: {outcome.first_eval_row}"


def _both_logs(outcomes: Dict[str, Outcome], a: str, b: str) -> str:
    return f"{outcomes[a].logs_tail}\n{outcomes[b].logs_tail}"


def test_same_seed_repeats_the_first_evaluation_return(outcomes: Dict[str, Outcome]) -> None:
    # average_return is written with 3 decimals: equal strings, equal returns.
    first, again = outcomes["first"].first_eval_row[2], outcomes["again"].first_eval_row[2]
    assert first == again, (
        f"--seed={SEED} gave first evaluation returns {first} and {again}\n"
        + _both_logs(outcomes, "first", "again")
    )


def test_another_seed_changes_the_first_evaluation_return(outcomes: Dict[str, Outcome]) -> None:
    first, other = outcomes["first"].first_eval_row[2], outcomes["other"].first_eval_row[2]
    assert first != other, (
        f"--seed={SEED} and --seed={OTHER_SEED} both returned {first}\n"
        + _both_logs(outcomes, "first", "other")
    )


def test_same_seed_repeats_the_actors_first_episode(outcomes: Dict[str, Outcome]) -> None:
    first = outcomes["first"].first_episode_return
    again = outcomes["again"].first_episode_return
    assert first == again, (
        f"--seed={SEED}: the actor's first episodes returned {first} and {again}\n"
        + _both_logs(outcomes, "first", "again")
    )


def test_another_seed_changes_the_actors_first_episode(outcomes: Dict[str, Outcome]) -> None:
    first = outcomes["first"].first_episode_return
    other = outcomes["other"].first_episode_return
    assert first != other, (
        f"--seed={SEED} and --seed={OTHER_SEED}: both actors' first episodes returned {first}\n"
        + _both_logs(outcomes, "first", "other")
    )
