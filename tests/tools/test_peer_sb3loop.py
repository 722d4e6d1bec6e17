"""benchmarks/peer_sb3loop.py: TF-Agents' SacAgent in SB3's loop (the hybrid peer).

learning.py's CLI runs in this process (`learning.main`), where TensorFlow is already
imported: its refusals need no process of their own, and the tiny sweep's runs are
still the real peer processes it starts, each with its own TensorFlow.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
from support import learning_cli
from tf_agents.trajectories import time_step as ts

from benchmarks import learning_report, peer_sb3loop
from sac_distributed.algorithm import policy as policy_lib

# Generous: TensorFlow's start-up and a few hundred SGD steps on a busy machine.
RUN_TIMEOUT_S = 900


def test_replay_keeps_the_newest_transitions_and_samples_only_stored_ones():
    replay = peer_sb3loop.UniformReplay(capacity=4, obs_dim=2, action_dim=1, seed=0)
    for i in range(3):
        replay.add([i, i], [i / 10], float(i), [i + 1, i + 1], terminated=(i == 2))
    assert replay.size == 3
    obs, action, reward, done, next_obs = replay.sample(500)
    assert set(reward.tolist()) == {0.0, 1.0, 2.0}  # never the empty fourth slot
    np.testing.assert_array_equal(obs[:, 0], reward)
    np.testing.assert_array_equal(next_obs[:, 0], reward + 1)
    np.testing.assert_allclose(action[:, 0], reward / 10)
    np.testing.assert_array_equal(done, (reward == 2).astype(np.float32))
    for i in range(3, 7):  # 7 added into 4 slots: 3, 4, 5 and 6 remain
        replay.add([i, i], [0.0], float(i), [i, i], terminated=False)
    assert replay.size == 4
    assert set(replay.sample(500)[2].tolist()) == {3.0, 4.0, 5.0, 6.0}


def test_a_terminal_step_gets_discount_zero_and_a_cut_one_bootstraps():
    obs = tf.constant([[1.0], [2.0]])
    t = peer_sb3loop.as_transition(
        obs, tf.constant([[0.5], [-0.5]]), tf.constant([3.0, 4.0]), tf.constant([1.0, 0.0]), obs + 1
    )
    np.testing.assert_array_equal(t.time_step.step_type, [ts.StepType.MID] * 2)
    np.testing.assert_array_equal(t.next_time_step.step_type, [ts.StepType.LAST, ts.StepType.MID])
    np.testing.assert_array_equal(t.next_time_step.discount, [0.0, 1.0])
    np.testing.assert_array_equal(t.next_time_step.reward, [3.0, 4.0])
    np.testing.assert_array_equal(t.next_time_step.observation, [[2.0], [3.0]])
    np.testing.assert_array_equal(t.action_step.action, [[0.5], [-0.5]])


def test_a_time_limit_is_a_cut_not_a_termination():
    env = peer_sb3loop.GymEnv("Pendulum-v1", seed=0)
    obs = env.reset()
    assert obs.dtype == np.float32 and obs.shape == (3,)
    endings = [env.step(np.zeros(1, np.float32))[2:] for _ in range(200)]
    assert endings[:-1] == [(False, False)] * 199
    assert endings[-1] == (False, True)  # Pendulum's 200-step limit: truncated only


def test_collection_stores_one_transition_per_step():
    env = peer_sb3loop.GymEnv("Pendulum-v1", seed=0)
    policy = policy_lib.NumpyActorPolicy([-2.0], [2.0], (1,), seed=0)
    replay = peer_sb3loop.UniformReplay(1000, obs_dim=3, action_dim=1, seed=0)
    collection = peer_sb3loop.Collection(env, policy, replay, None)
    for steps in range(1, 401):
        collection.step(steps, random=True)
    assert replay.size == 400  # two Pendulum episodes of 200 steps
    np.testing.assert_array_equal(replay.dones[:400], 0.0)  # cut by the time limit, not ended
    assert np.all(np.abs(replay.actions[:400]) <= 2.0) and np.std(replay.actions[:400]) > 0.5
    # Within an episode each step starts where the last one left off; the reset does not.
    np.testing.assert_array_equal(replay.observations[1:200], replay.next_observations[:199])
    np.testing.assert_array_equal(replay.observations[201:400], replay.next_observations[200:399])
    assert not np.array_equal(replay.observations[200], replay.next_observations[199])


def test_a_policy_lag_below_one_step_is_refused():
    with pytest.raises(SystemExit, match="--policy_lag must be >= 1 env step, got 0"):
        peer_sb3loop.main(
            [
                "--env_name=Pendulum-v1",
                "--seed=0",
                "--env_steps=2000",
                "--eval_every=500",
                "--num_eval_episodes=1",
                '--hparams_json={"initial_collect_steps": 1000}',
                "--results=/nonexistent/results.csv",
                "--policy_lag=0",
            ]
        )


def test_a_tiny_sweep_trains_one_update_per_step_after_the_warm_up(tmp_path, capsys):
    out = str(tmp_path / "out")
    done = learning_cli.sweep(
        capsys,
        "--envs=Pendulum-v1",
        "--systems=sb3loop",
        "--variants=preset;lagged=--policy_lag=100 --gamma=0.98",
        "--seeds=0",
        "--env_steps=600",
        "--eval_every=100",
        "--num_eval_episodes=1",
        "--common_flags=--initial_collect_steps=400 --batch_size=32",
        f"--out={out}",
        work_dir=str(tmp_path / "work"),
        timeout_s=RUN_TIMEOUT_S,
    )
    assert "2 runs planned" in done
    assert "--policy_lag=100" in done  # the variant's own flag
    assert '"gamma": 0.98' in done  # and its hyperparameter, in the hparams JSON
    for variant in ("preset", "lagged"):
        run_dir = os.path.join(out, "runs", "Pendulum-v1", f"sb3loop-{variant}", "seed0")
        points = learning_report.read_points(os.path.join(run_dir, "results.csv"))
        # Marks from the end of the warm-up, as the SB3 peer's, and the budget's end;
        # SB3 trains after every step past the 400th: 100 updates by step 500, 200 by 600.
        marks = [(p.env_steps, p.train_step) for p in points]
        assert marks == [(400, 0), (500, 100), (600, 200)], variant
        assert all(-2000 < p.average_return <= 0 for p in points), points
        episodes = learning_report.read_training_episodes(run_dir)
        assert [steps for steps, _ in episodes] == [200, 400, 600], episodes


def test_variant_flags_go_only_to_a_system_that_can_follow_them(tmp_path, capsys):
    common = ["--envs=Pendulum-v1", "--env_steps=1500", f"--out={tmp_path / 'out'}"]
    launch_flag = learning_cli.refused(
        capsys, *common, "--systems=sb3loop", "--variants=lag=--variable_update_interval=1"
    )  # refused: exit 2
    assert (
        "--variable_update_interval=1 is neither a hyperparameter nor an option of the sb3loop"
        in launch_flag
    )
    own_flag = learning_cli.refused(
        capsys, *common, "--systems=ours,sb3loop", "--variants=lag=--policy_lag=10"
    )
    assert "--policy_lag is an option of the sb3loop hybrid, which sac-launch does not have" in (
        own_flag
    )
    unfollowed = learning_cli.refused(
        capsys, *common, "--systems=sb3loop", "--variants=n3=--n_step=3"
    )
    assert "--variants n3 sets n_step=3, which the sb3loop peer does not implement" in unfollowed
    assert not os.path.exists(tmp_path / "out" / "runs")


@pytest.mark.parametrize("flag", ["--normalize_observations", "--n_step=3"])
def test_what_the_hybrid_cannot_follow_is_refused_before_anything_runs(tmp_path, capsys, flag):
    refused = learning_cli.refused(
        capsys,
        "--envs=Pendulum-v1",
        "--systems=sb3loop",
        "--env_steps=1500",
        f"--common_flags={flag}",
        f"--out={tmp_path / 'out'}",
    )
    name = flag.lstrip("-").partition("=")[0]  # refused: exit 2
    assert f"set {name}=" in refused and "sb3loop peer(s) do not implement" in refused
    assert not os.path.exists(tmp_path / "out" / "runs")
