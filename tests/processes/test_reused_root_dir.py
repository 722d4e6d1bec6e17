"""A root_dir that already holds a run: resuming it says so, another run is refused.

One finished tiny sac-launch run (threads engine: one TensorFlow import) is
copied for each test. Resuming it with sac-launch (processes) and more
iterations prints "resumed from train_step N" on the console and trains to the
new total. Starting another env or other network sizes on it is refused by
sac-launch and by every job binary, in one line with exit 2, before anything in
the directory is written: no lock, log, summary, replay checkpoint or result
appears or changes, and the launcher prints no summary of the other run's
results as this run's.
"""

import os
import shutil
import subprocess
import sys

import pytest
from support.processes import DEADLINE_S, TINY_RUN_FLAGS, TINY_RUN_ITERATIONS, error_lines, run

from sac_distributed import paths
from sac_distributed.results import read_results

pytestmark = pytest.mark.slow

OTHER_ENV = "MountainCarContinuous-v0"
# A port nothing listens on: the clients must refuse before they try to connect.
NOWHERE = ["--replay_buffer_server_address=localhost:1", "--connect_timeout=5"]


@pytest.fixture(scope="module")
def finished_root(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("finished") / "run")
    result = run(
        "launch", f"--root_dir={root}", "--engine=threads", *TINY_RUN_FLAGS, timeout_s=DEADLINE_S
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    with open(_console_path(root), "w") as f:
        f.write(result.stdout + result.stderr)
    assert os.path.exists(paths.run_info_path(root))
    assert os.path.exists(paths.results_path(root))
    return root


def _console_path(root: str) -> str:
    return os.path.join(os.path.dirname(root), "console.txt")


@pytest.fixture
def copied_root(finished_root, tmp_path) -> str:
    root = str(tmp_path / "copy")
    shutil.copytree(finished_root, root)
    return root


def _snapshot(root: str):
    """Every path under root with its size and modification time."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            stat = os.stat(path)
            found[os.path.relpath(path, root)] = (stat.st_size, stat.st_mtime_ns)
    return found


def test_a_fresh_run_does_not_say_resumed(finished_root):
    with open(_console_path(finished_root)) as f:
        console = f.read()
    assert "sac-launch: Pendulum-v1 with 1 actor(s)" in console  # the console it read
    assert "resumed from" not in console


@pytest.mark.parametrize(
    "flag, difference",
    [
        (f"--env_name={OTHER_ENV}", f"env_name=Pendulum-v1, you asked {OTHER_ENV}"),
        ("--actor_fc_layer_params=32,32", "actor_fc_layer_params=16,16, you asked 32,32"),
        ('--env_kwargs={"g": 9.0}', 'env_kwargs={}, you asked {"g": 9.0}'),
    ],
    ids=["other_env", "other_sizes", "other_env_kwargs"],
)
def test_the_launcher_refuses_another_run_before_starting_anything(copied_root, flag, difference):
    before = _snapshot(copied_root)
    result = run("launch", f"--root_dir={copied_root}", *TINY_RUN_FLAGS, flag, timeout_s=DEADLINE_S)
    assert result.returncode == 2, (result.stdout + result.stderr)[-4000:]
    assert result.stderr.splitlines() == [
        f"error: {copied_root} holds another run: it has {difference}. Use a new --root_dir "
        "for this run, or pass that run's values to resume it."
    ], result.stderr[-3000:]
    assert "Eval return" not in result.stdout  # not the other run's results as this run's
    assert " with 1 actor(s)" not in result.stdout  # no banner: nothing was started
    assert _snapshot(copied_root) == before


@pytest.mark.parametrize(
    "job, flags",
    [
        ("reverb_server", [f"--env_name={OTHER_ENV}", "--port=0"]),
        ("reverb_server", ["--critic_joint_fc_layer_params=32,32", "--port=0"]),
        ("actor", [f"--env_name={OTHER_ENV}", *NOWHERE]),
        ("learner", [f"--env_name={OTHER_ENV}", *NOWHERE]),
        ("evaluator", [f"--env_name={OTHER_ENV}", *NOWHERE]),
        ("actor", ['--env_kwargs={"g": 9.0}', *NOWHERE]),
    ],
    ids=["server_other_env", "server_other_sizes", "actor", "learner", "evaluator", "kwargs"],
)
def test_every_job_refuses_another_run_before_touching_its_files(copied_root, job, flags, tmp_path):
    """...and before it imports TensorFlow: a `tensorflow` that fails on import is
    first on the path, so a job that imported it would exit 1 with that error."""
    before = _snapshot(copied_root)
    poisoned = tmp_path / "poisoned" / "tensorflow"
    poisoned.mkdir(parents=True)
    (poisoned / "__init__.py").write_text(
        'raise ImportError("TensorFlow imported before the refusal")\n'
    )
    path = os.pathsep.join(filter(None, [str(poisoned.parent), os.environ.get("PYTHONPATH")]))
    try:
        result = subprocess.run(
            [sys.executable, "-m", f"sac_distributed.bin.{job}", f"--root_dir={copied_root}"]
            + list(TINY_RUN_FLAGS)
            + flags,
            capture_output=True,
            text=True,
            timeout=120,  # a server that does not refuse serves until stopped
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": path},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"sac {job} did not refuse the other run's root_dir; it ran on")
    assert result.returncode == 2, result.stderr[-3000:]
    errors = error_lines(result.stderr)
    assert len(errors) == 1 and f"{copied_root} holds another run: it has " in errors[0], (
        result.stderr[-3000:]
    )
    assert "Use a new --root_dir" in errors[0]
    assert _snapshot(copied_root) == before


def test_sac_status_shows_a_finished_runs_files(finished_root):
    result = subprocess.run(
        [sys.executable, "-m", "sac_distributed.bin.status", f"--root_dir={finished_root}"],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == f"Run in {finished_root} (from its files)"
    assert lines[1] == (
        f"  env: Pendulum-v1; actor 16,16, critic 16,16; num_iterations {TINY_RUN_ITERATIONS}"
    )
    assert lines[2].endswith(f"the latest at train_step {TINY_RUN_ITERATIONS}"), lines
    assert (
        lines[3].startswith("  evaluations: ")
        and f"at train_step {TINY_RUN_ITERATIONS} (" in (lines[3])
    )
    assert lines[4].startswith("  exported policies: policy, collect_policy, greedy_policy;")
    assert lines[5].startswith("  actors seen: 1; training episodes: ")


def test_a_finished_run_resumed_with_more_iterations_says_so_and_trains_to_the_new_total(
    copied_root,
):
    """sac-launch (processes) again on a run's root_dir: the learner restores its last
    checkpoint and the console says so, once. The restored variable container still
    says learner_done (the first run's end); actors and the evaluator must not take
    that for this run's end, or they stop at once and the learner waits for data that
    never comes."""
    more = 2 * TINY_RUN_ITERATIONS
    flags = [f for f in TINY_RUN_FLAGS if not f.startswith("--num_iterations=")]
    result = run(
        "launch",
        f"--root_dir={copied_root}",
        f"--num_iterations={more}",
        *flags,
        timeout_s=DEADLINE_S,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    resumed = [line for line in result.stdout.splitlines() if "resumed from" in line]
    assert len(resumed) == 1, result.stdout[-4000:]
    assert resumed[0].startswith("[learner] ")
    assert f"resumed from train_step {TINY_RUN_ITERATIONS} " in resumed[0], resumed
    steps = [point.train_step for point in read_results(paths.results_path(copied_root))]
    assert steps[-1] == more, steps
