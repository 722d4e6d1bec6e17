"""The learner trains on a real Reverb replay, checkpoints, exports and publishes.

Each LearnerLoop traces its SAC update once (the slow part on a busy CPU), so
the module builds two: one under MirroredStrategy over the two logical CPUs
from conftest, trained to num_iterations; and one under the default strategy,
stopped at step 20 and then fed NaN rewards. Three tests inspect what the
second one did.
"""

import dataclasses
import glob
import math
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf
from support.training import learner_config, random_observations
from tf_agents.policies import py_tf_eager_policy
from tf_agents.trajectories import time_step as ts

from sac_distributed import paths, replay
from sac_distributed.algorithm import strategy as strategy_lib
from sac_distributed.algorithm.policy import NumpyActorPolicy
from sac_distributed.algorithm.sac import learner as sac_learner
from sac_distributed.errors import NonFiniteLossError
from sac_distributed.jobs import learner_loop, learner_summaries
from sac_distributed.replay.variables import VariableContainer

NUM_ITERATIONS = 20


def _checkpoint_steps(root_dir):
    pattern = os.path.join(root_dir, paths.CHECKPOINT_DIR, "ckpt-*.index")
    names = (os.path.basename(p) for p in glob.glob(pattern))
    return sorted(int(n[len("ckpt-") : -len(".index")]) for n in names)


def _check_trained(result, weights, root_dir, env_specs, snapshot, done=True):
    """What a learner leaves after training to NUM_ITERATIONS with `weights`.

    `snapshot` is what the variable container held afterwards.
    """
    assert result.train_step == NUM_ITERATIONS
    assert math.isfinite(result.last_loss)
    assert result.steps_per_sec > 0

    # A checkpoint every checkpoint_interval (10) steps, the last at the final step.
    assert _checkpoint_steps(root_dir) == [10, NUM_ITERATIONS]
    latest = tf.train.latest_checkpoint(os.path.join(root_dir, paths.CHECKPOINT_DIR))
    assert latest.endswith(f"ckpt-{NUM_ITERATIONS}")

    # The container holds the final weights (flagged done when training is complete).
    assert snapshot is not None
    assert snapshot.train_step == NUM_ITERATIONS
    assert snapshot.learner_done is done
    assert len(snapshot.policy_weights) == len(weights)
    for pulled, expected in zip(snapshot.policy_weights, weights):
        assert np.all(np.isfinite(pulled))
        np.testing.assert_array_equal(pulled, expected)

    # The three exported SavedModels load with their specs and act in bounds.
    spec = env_specs.action
    obs = random_observations(env_specs, 8, seed=1)
    time_step = ts.restart(obs, batch_size=len(obs))
    actions = {}
    for name in paths.POLICY_NAMES:
        path = os.path.join(root_dir, paths.POLICIES_DIR, name)
        assert os.path.isfile(os.path.join(path, "saved_model.pb")), path
        policy = py_tf_eager_policy.SavedModelPyTFEagerPolicy(
            path, load_specs_from_pbtxt=True, batch_time_steps=False
        )
        assert policy.get_train_step() == NUM_ITERATIONS
        action = np.asarray(policy.action(time_step).action)
        assert action.shape == (len(obs),) + tuple(spec.shape)
        assert np.all(np.isfinite(action))
        assert np.all(action >= spec.minimum) and np.all(action <= spec.maximum), action
        actions[name] = action

    # The exported greedy policy acts like the published weights' greedy policy.
    numpy_policy = NumpyActorPolicy(spec.minimum, spec.maximum, spec.shape, snapshot.policy_weights)
    np.testing.assert_allclose(
        numpy_policy.action(obs, greedy=True), actions["greedy_policy"], atol=1e-5
    )


def test_mirrored_strategy_over_two_logical_cpus_trains(
    make_learner_config, make_learner, fill_replay, root_dir, env_specs, client, monkeypatch
):
    # Once any test has exported a SavedModel, absl records no longer reach
    # caplog in this process, so the learner's log calls are recorded directly.
    logged = []
    monkeypatch.setattr(
        learner_loop.logging, "info", lambda msg, *args: logged.append(msg % args if args else msg)
    )
    strategy = strategy_lib.make_strategy("mirrored")
    assert strategy.num_replicas_in_sync == 2, "conftest should have split the CPU in two"

    fill_replay(128)
    # No scheduled export at step 20: run()'s final one is what _check_trained reads.
    loop = make_learner(make_learner_config({"policy_save_interval": 1_000}, strategy="mirrored"))
    before = [w.copy() for w in loop.learner.policy_weights()]
    result = loop.run()

    assert result.stop_reason == "num_iterations reached"
    assert loop.step == NUM_ITERATIONS
    # Progress in the log: each summary says how far and how long to go.
    # The time left depends on how fast this machine traced the update (a busy
    # one can say "about 1 min 5 s left"), so only its form is checked.
    eta = r"about (\d+ h \d+ min|\d+ min \d+ s|\d+ s) left"
    progress_lines = [m for m in logged if re.search(r"; 10/20 \(50%\), " + eta, m)]
    assert progress_lines and progress_lines[0].startswith("train_step 10: "), logged
    after = loop.learner.policy_weights()
    _check_trained(result, after, root_dir, env_specs, VariableContainer(client).pull())
    assert any(not np.array_equal(a, b) for a, b in zip(before, after)), "weights never changed"

    # Both replicas hold the same copy of every policy variable and of train_step.
    replicas = loop.learner.strategy.experimental_local_results
    assert [int(v) for v in replicas(loop.learner.train_step)] == [NUM_ITERATIONS] * 2
    for variable in sac_learner.policy_variables(loop.learner.agent):
        copies = [v.numpy() for v in replicas(variable)]
        assert len(copies) == 2
        np.testing.assert_array_equal(copies[0], copies[1])


# --- default strategy, then NaN rewards ---------------------------------------------


@pytest.fixture(scope="module")
def default_then_nan(new_server, new_learner, write_replay, tmp_path_factory, env_specs):
    """Default strategy: trains to step 20 on good data (then a stop signal), then
    resumes on NaN rewards. Records the state after each phase."""
    server = new_server()
    client = server.localhost_client()
    root_dir = str(tmp_path_factory.mktemp("default_root"))
    # No scheduled export at step 20: the stop's final one is what _check_trained reads.
    config = learner_config(
        root_dir,
        f"localhost:{server.port}",
        {"num_iterations": 40, "policy_save_interval": 1_000},
    )
    stop_at = {"step": NUM_ITERATIONS}
    loop = None

    def should_stop():
        return loop is not None and stop_at["step"] is not None and loop.step >= stop_at["step"]

    loop = new_learner(config, server, should_stop)
    assert loop.learner.strategy.num_replicas_in_sync == 1
    write_replay(client, 128)
    good = {
        "result": loop.run(),
        "step": loop.step,
        "weights": loop.learner.policy_weights(),
        "snapshot": VariableContainer(client).pull(),
        # A copy of what the learner had written, before the NaN phase.
        "root_dir": shutil.copytree(
            root_dir, str(tmp_path_factory.mktemp("after_good")), dirs_exist_ok=True
        ),
    }

    client.reset(replay.REPLAY_TABLE)
    write_replay(client, 128, reward=float("nan"))
    stop_at["step"] = None
    error = None
    try:
        loop.run()
    except Exception as e:  # inspected by the tests below
        error = e
    yield {
        "good": good,
        "error": error,
        "root_dir": root_dir,
        "snapshot": VariableContainer(client).pull(),
    }
    server.stop()


def test_default_strategy_trains(default_then_nan, env_specs):
    good = default_then_nan["good"]
    assert good["result"].stop_reason == "stop signal"  # at step 20, of num_iterations=40
    assert good["step"] == NUM_ITERATIONS
    _check_trained(
        good["result"], good["weights"], good["root_dir"], env_specs, good["snapshot"], done=False
    )


def test_nan_rewards_leave_only_the_last_good_checkpoint(default_then_nan, env_specs):
    # Training on NaN rewards stops with our clear error instead of running on ...
    error = default_then_nan["error"]
    assert isinstance(error, NonFiniteLossError), repr(error)[:300]
    # ... and leaves checkpoints, exported policies and the container's weights
    # as they were at the last good step (all checked by _check_trained).
    good = default_then_nan["good"]
    _check_trained(
        good["result"],
        good["weights"],
        default_then_nan["root_dir"],
        env_specs,
        default_then_nan["snapshot"],
        done=False,
    )


def test_nan_rewards_raise_non_finite_loss_error_naming_the_step(default_then_nan):
    error = default_then_nan["error"]
    assert isinstance(error, NonFiniteLossError), repr(error)[:300]
    # The NaN batches come right after step 20; the step reported is the one
    # training stopped at, at most one call (steps_per_call=10) later.
    steps = [int(m) for m in re.findall(r"train_step (\d+)", str(error))]
    assert steps and NUM_ITERATIONS <= steps[0] <= NUM_ITERATIONS + 10, str(error)
    # It names the loss TensorFlow's numerics check caught, not its "Graph execution
    # error:" header, and says what to change.
    assert "loss is inf or nan" in str(error) and "Graph execution" not in str(error), str(error)
    assert "--clip_policy_log_std" in str(error), str(error)


def test_a_seed_fixes_the_initial_weights(make_learner, make_learner_config, tmp_path):
    def initial_weights(seed, name):
        # A root_dir of its own: no checkpoint from another learner to restore.
        config = dataclasses.replace(make_learner_config(seed=seed), root_dir=str(tmp_path / name))
        loop = make_learner(config)
        assert loop.step == 0
        return loop.learner.policy_weights()

    first, again, other = initial_weights(7, "a"), initial_weights(7, "b"), initial_weights(8, "c")
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, c) for a, c in zip(first, other))


def test_progress_and_durations_read_well():
    assert learner_summaries.progress(1000, 8000, 100.0) == "1000/8000 (12%), about 1 min 10 s left"
    assert learner_summaries.progress(8000, 8000, 100.0) == "8000/8000 (100%)"
    assert learner_summaries.progress(0, 8000, 0.0) == "0/8000 (0%)"
    assert learner_summaries.format_duration(3725) == "1 h 2 min"
    assert learner_summaries.format_duration(7.2) == "7 s"
