"""An env without a preset whose rewards or episodes the generic defaults handle badly
gets one warning line from sac-launch naming the flag to change; a typical one none.

The numbers come from a short random rollout of the env as its library made it
(envs.random_rollout, no TensorFlow), the judgement from config.untuned_warnings.
"""

import dataclasses
import json
import subprocess
import sys

import gymnasium
import pytest
import user_envs
from support.processes import DEADLINE_S
from support.repo import TESTS_DIR

from sac_distributed import config as config_lib
from sac_distributed.envs import random_rollout

NAME = "user_envs:make_scaled_reward"
TYPICAL = random_rollout.RandomRollout(
    steps=5000,
    episodes_ended=5,
    longest_episode=1000,  # MuJoCo's episodes at gamma 0.99: on the bound, no warning
    mean_abs_reward=1.5,
    max_abs_reward=4.0,
    nonzero_rewards=5000,
)


def _warnings(**changes):
    hparams = config_lib.hyperparams_for(NAME)
    return config_lib.untuned_warnings(NAME, dataclasses.replace(TYPICAL, **changes), hparams)


def test_a_typical_env_gets_no_warning():
    assert _warnings() == []


def test_episodes_that_never_end_ask_for_a_time_limit_and_name_gamma():
    (line,) = _warnings(episodes_ended=0, longest_episode=5000)
    assert line.startswith(f"no episode of {NAME} ended in 5000 random env steps")
    assert "gymnasium.wrappers.TimeLimit" in line and "--gamma" in line


def test_episodes_much_longer_than_gammas_horizon_name_a_larger_gamma():
    (line,) = _warnings(longest_episode=4000)
    assert "last up to 4000 steps, 40x what gamma=0.99 looks ahead" in line
    assert line.endswith("raise --gamma (e.g. --gamma=0.997)")


@pytest.mark.parametrize("scale, factor", [(2500.0, "0.001"), (0.002, "1000")])
def test_rewards_far_from_one_per_step_name_a_reward_scale_factor(scale, factor):
    (line,) = _warnings(mean_abs_reward=scale, max_abs_reward=scale)
    assert f"--reward_scale_factor={factor}" in line


def test_a_reward_scale_factor_already_given_counts():
    hparams = config_lib.hyperparams_for(NAME, {"reward_scale_factor": 0.001})
    rollout = dataclasses.replace(TYPICAL, mean_abs_reward=2500.0)
    assert config_lib.untuned_warnings(NAME, rollout, hparams) == []


def test_no_reward_at_all_names_the_warm_up():
    (line,) = _warnings(mean_abs_reward=0.0, max_abs_reward=0.0, nonzero_rewards=0)
    assert "gave no reward in 5000 random env steps" in line
    assert "--initial_collect_steps" in line


@pytest.mark.parametrize(
    "make, longest",
    [
        (lambda: user_envs.make_scaled_reward(reward=-3.0, max_episode_steps=7), 7),
        (lambda: gymnasium.make("Pendulum-v1"), 200),
        (user_envs.make_gym_pendulum, 200),
        (lambda: user_envs.make_scaled_reward(reward=-3.0), None),  # never ends
    ],
)
def test_the_rollout_drives_gymnasium_and_gym_envs(make, longest):
    rollout = random_rollout.random_rollout(make(), max_steps=600)
    assert rollout.steps == 600
    assert rollout.episodes_ended == (600 // longest if longest else 0)
    assert rollout.longest_episode == (longest or 600)
    assert rollout.nonzero_rewards > 0 and rollout.max_abs_reward >= rollout.mean_abs_reward


def test_the_rollout_stops_at_its_time_budget():
    rollout = random_rollout.random_rollout(user_envs.make_scaled_reward(), max_seconds=0.0)
    assert rollout.steps == 0 and rollout.mean_abs_reward == 0.0


@pytest.mark.slow
def test_sac_launch_warns_and_still_trains(tmp_path):
    """Bad input: rewards of 5000 per step. sac-launch says so in one line after its
    banner, naming the flag, and trains anyway (a warning, not a refusal)."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sac_distributed.bin.launch",
            f"--root_dir={tmp_path / 'run'}",
            f"--env_name={NAME}",
            f"--env_kwargs={json.dumps({'reward': 5000.0, 'max_episode_steps': 20})}",
            "--engine=threads",
            "--num_iterations=40",
            "--batch_size=16",
            "--actor_fc_layer_params=8",
            "--critic_joint_fc_layer_params=8",
            "--num_eval_episodes=1",
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        stdin=subprocess.DEVNULL,
        cwd=TESTS_DIR,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    lines = result.stdout.splitlines()
    warnings = [line for line in lines if line.startswith("sac-launch: warning: ")]
    assert len(warnings) == 1, result.stdout[-4000:]
    assert "average |r| = 5e+03 per random step" in warnings[0]
    assert warnings[0].endswith("scale them with --reward_scale_factor=0.0001")
    banner = [i for i, line in enumerate(lines) if "no preset for" in line]
    assert banner and banner[0] == lines.index(warnings[0]) - 1
