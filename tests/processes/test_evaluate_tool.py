"""sac-evaluate: statistics and videos of a policy exported by the real learner."""

import json
import os
import re
import shutil
import subprocess

import imageio
import imageio.v3 as iio
import numpy as np
import pytest
from support import processes
from support.training import ENV_NAME, learner_config
from tf_agents.policies import random_py_policy

from sac_distributed import jobs
from sac_distributed.algorithm.policy import NumpyActorPolicy
from sac_distributed.envs import loader as env_loader
from sac_distributed.errors import ConfigError, EnvError
from sac_distributed.jobs.evaluation import run_episodes
from sac_distributed.replay.variables import VariableContainer
from sac_distributed.tools import inspect_policy

STATS_LINE = re.compile(
    r"^(\d+) episodes: return mean (-?[\d.]+) std ([\d.]+) min (-?[\d.]+) max (-?[\d.]+); "
    r"length mean ([\d.]+) min (\d+) max (\d+)$",
    re.M,
)
PENDULUM_STEPS = 200  # Pendulum-v1's time limit
PENDULUM_FRAME = (500, 500, 3)


@pytest.fixture(scope="module")
def exported(new_server, write_replay, tmp_path_factory):
    """(root_dir, policy weights) of a real in-process learner run (jobs.run_learner).

    It trains num_iterations=20 steps, writes root_dir/run_info.json and exports
    the policies at the end; the weights are the final ones it pushed.
    """
    server = new_server()
    try:
        client = server.localhost_client()
        write_replay(client, 64)
        root = str(tmp_path_factory.mktemp("exported"))
        result = jobs.run_learner(learner_config(root, f"localhost:{server.port}"), lambda: False)
        assert result.train_step == 20
        snapshot = VariableContainer(client).pull()
        assert snapshot.learner_done and snapshot.train_step == 20
    finally:
        server.stop()
    return root, snapshot.policy_weights


def _evaluate_cli(*flags, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return processes.run("evaluate", *flags, timeout_s=timeout_s)


def _stats(stdout: str) -> tuple:
    match = STATS_LINE.search(stdout)
    assert match, stdout
    n, mean, std, low, high, len_mean, len_min, len_max = match.groups()
    return int(n), float(mean), float(std), float(low), float(high), int(len_min), int(len_max)


def test_greedy_saved_model_matches_numpy_policy_returns(exported):
    root, weights = exported
    report = inspect_policy.evaluate(root, num_episodes=2, env_name=ENV_NAME, seed=5)
    assert report.policy_dir == os.path.join(root, "policies", "greedy_policy")
    assert report.stats.lengths == (PENDULUM_STEPS, PENDULUM_STEPS)
    # Pendulum never terminates: its time limit ends every episode.
    assert report.stats.endings == (inspect_policy.TIME_LIMIT,) * 2
    assert [len(o) for o in report.stats.last_observations] == [3, 3]  # cos, sin, velocity

    env = env_loader.load_env(ENV_NAME, seed=5)
    spec = env.action_spec()
    numpy_policy = NumpyActorPolicy(spec.minimum, spec.maximum, spec.shape, weights=weights)
    returns, _ = run_episodes(env, numpy_policy, 2, greedy=True)
    env.close()
    np.testing.assert_allclose(report.stats.returns, returns, rtol=1e-3)
    again = inspect_policy.evaluate(root, num_episodes=2, env_name=ENV_NAME, seed=5)
    assert again.stats == report.stats


def test_episodes_that_terminate_say_so_with_the_state_they_ended_in():
    # A random policy drops InvertedPendulum's pole within a few dozen steps; the
    # env ends the episode when the pole is more than 0.2 rad from upright.
    env = env_loader.load_env("InvertedPendulumBulletEnv-v0", seed=0)
    try:
        policy = random_py_policy.RandomPyPolicy(env.time_step_spec(), env.action_spec(), seed=0)
        stats = inspect_policy.run_episodes(env, policy, num_episodes=3)
    finally:
        env.close()
    assert stats.endings == (inspect_policy.TERMINATED,) * 3
    assert all(length < 1000 for length in stats.lengths)
    for x, _, cos_theta, sin_theta, _ in stats.last_observations:
        assert abs(sin_theta) > np.sin(0.2) - 1e-6 and cos_theta < np.cos(0.2) + 1e-6
        assert -1.1 < x < 1.1  # the cart stays on its rail
    line = inspect_policy.describe_episode(
        stats.returns[0], stats.lengths[0], stats.endings[0], stats.last_observations[0]
    )
    number = r"-?[\d.e+-]+"
    assert re.fullmatch(
        rf"return [\d.]+, length \d+, terminated; last observation \[({number}, ){{4}}{number}\]",
        line,
    ), line


def test_summary_line_statistics():
    stats = inspect_policy.EpisodeStats(returns=(-3.0, 1.0), lengths=(10, 30))
    assert stats.summary() == (
        "2 episodes: return mean -1.00 std 2.00 min -3.00 max 1.00; length mean 20.0 min 10 max 30"
    )


def test_env_name_from_the_learners_run_info_json(exported, tmp_path):
    root, _ = exported
    assert inspect_policy.find_env_name(os.path.join(root, "policies", "policy")) == ENV_NAME
    assert inspect_policy.evaluate(root, num_episodes=1).env_name == ENV_NAME
    copy = str(tmp_path / "copy")
    shutil.copytree(os.path.join(root, "policies"), os.path.join(copy, "policies"))
    with pytest.raises(ConfigError, match="--env_name is required"):
        inspect_policy.evaluate(copy, num_episodes=1)
    with open(os.path.join(copy, "run_info.json"), "w") as f:
        json.dump({"env_name": ENV_NAME, "hparams": {}}, f)  # as jobs.run_learner writes it
    policy_dir = os.path.join(copy, "policies", "collect_policy")
    assert inspect_policy.find_env_name(policy_dir) == ENV_NAME
    report = inspect_policy.evaluate(policy_dir, num_episodes=1, seed=1)
    assert report.env_name == ENV_NAME and report.stats.lengths == (PENDULUM_STEPS,)


def test_wrong_env_and_missing_policy_are_clear_errors(exported, tmp_path):
    root, _ = exported
    with pytest.raises(
        EnvError, match=r"(?s)observation spec does not match.*policy: shape \(3,\)"
    ):
        inspect_policy.evaluate(root, num_episodes=1, env_name="InvertedPendulumBulletEnv-v0")
    with pytest.raises(ConfigError, match="No exported policy"):
        inspect_policy.evaluate(str(tmp_path), num_episodes=1, env_name=ENV_NAME)
    with pytest.raises(ConfigError, match="must end in .mp4 or .gif"):
        inspect_policy.evaluate(root, 1, ENV_NAME, video_path=str(tmp_path / "v.avi"))


@pytest.mark.slow
def test_binary_prints_stats_and_writes_gif(exported, tmp_path):
    root, _ = exported
    video = str(tmp_path / "v.gif")
    policy_dir = os.path.join(root, "policies", "greedy_policy")
    result = _evaluate_cli(
        f"--policy_dir={policy_dir}",
        f"--env_name={ENV_NAME}",
        "--num_episodes=2",
        f"--video={video}",
        "--frame_every=5",
        "--seed=3",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    n, mean, std, low, high, len_min, len_max = _stats(result.stdout)
    assert (n, len_min, len_max) == (2, PENDULUM_STEPS, PENDULUM_STEPS)
    episode_lines = re.findall(
        r"^episode (\d): return -[\d.]+, length (\d+), (.+?); ", result.stdout, re.M
    )
    assert episode_lines == [("1", "200", "time limit"), ("2", "200", "time limit")], result.stdout
    assert low <= mean <= high and std >= 0 and high < 0  # Pendulum rewards are <= 0
    frames_per_episode = PENDULUM_STEPS // 5 + 1
    assert f"video: {video} ({2 * frames_per_episode} frames)" in result.stdout
    frames = iio.imread(video, index=None)
    # GIF merges identical consecutive frames (a pendulum at rest) into one longer
    # frame, so the file may hold fewer frames than were written, never more.
    assert 1 < len(frames) <= 2 * frames_per_episode, frames.shape
    assert frames.shape[1:] == PENDULUM_FRAME
    assert len({f.tobytes() for f in frames[:frames_per_episode]}) > 1  # the pendulum moves


@pytest.mark.slow
def test_binary_writes_mp4(exported, tmp_path):
    root, _ = exported
    video = str(tmp_path / "v.mp4")
    result = _evaluate_cli(f"--policy_dir={root}", "--num_episodes=1", f"--video={video}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"on {ENV_NAME}" in result.stdout  # from the learner's run_info.json
    assert _stats(result.stdout)[0] == 1
    with imageio.get_reader(video) as reader:
        assert reader.count_frames() == PENDULUM_STEPS + 1
        assert reader.get_meta_data()["fps"] == 30.0


@pytest.mark.slow
def test_binary_user_errors_exit_2(exported, tmp_path):
    root, _ = exported
    wrong_env = _evaluate_cli(
        f"--policy_dir={root}", "--env_name=InvertedPendulumBulletEnv-v0", "--num_episodes=1"
    )
    assert wrong_env.returncode == 2
    assert "error: The policy's observation spec does not match" in wrong_env.stderr
    copy = str(tmp_path / "greedy_policy")  # away from its root_dir and run_info.json
    shutil.copytree(os.path.join(root, "policies", "greedy_policy"), copy)
    no_env = _evaluate_cli(f"--policy_dir={copy}", "--num_episodes=1")
    assert no_env.returncode == 2 and "error: --env_name is required" in no_env.stderr
    assert "Traceback" not in wrong_env.stderr + no_env.stderr
