"""--policy_averaging_tau: actors, the evaluator and exports get a Polyak average
of the actor's weights; SAC trains the actor itself as before."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
from support.training import learner_config, small_hparams

from sac_distributed import paths
from sac_distributed.errors import CheckpointError, ConfigError

TAU = 0.2


def _values(variables):
    return [v.numpy().copy() for v in variables]


def _actor(loop):
    return loop.learner.agent._actor_network.variables  # noqa: SLF001


def _average(loop):
    return loop.learner.averager.network.variables


@pytest.mark.parametrize("prioritized", [False, True])
def test_each_train_step_moves_the_published_average_by_tau_towards_the_actor(
    make_learner_config, make_learner, fill_replay, prioritized
):
    fill_replay(128)
    config = make_learner_config(
        hparams_overrides=dict(policy_averaging_tau=TAU, prioritized_replay=prioritized)
    )
    loop = make_learner(config)
    assert loop.start()
    # It starts as the actor.
    for a, b in zip(_values(_actor(loop)), _values(_average(loop))):
        np.testing.assert_array_equal(a, b)
    loop.train(3)
    for _ in range(3):
        before = _values(_average(loop))
        assert loop.train(1) == 1
        actor = _values(_actor(loop))
        for old, new, trained in zip(before, _values(_average(loop)), actor):
            np.testing.assert_allclose(new, (1 - TAU) * old + TAU * trained, rtol=1e-5, atol=1e-6)
    # What acting gets is the average, not the trained actor.
    published = loop.learner.variables().policy_weights
    for mine, avg in zip(published, _values(_average(loop))):
        np.testing.assert_array_equal(mine, avg)
    assert any(not np.allclose(p, a) for p, a in zip(published, _values(_actor(loop))))


def test_exports_hold_the_average_and_a_restart_restores_it(
    make_learner_config, make_learner, fill_replay, root_dir
):
    fill_replay(128)
    config = make_learner_config(hparams_overrides=dict(policy_averaging_tau=TAU))
    first = make_learner(config)
    assert first.start()
    first.train(10)  # checkpoint_interval is 10: step 10 is saved
    first.learner.export_policies()
    average = _values(_average(first))
    for name in paths.POLICY_NAMES:
        saved = tf.saved_model.load(paths.policy_dir(root_dir, name)).model_variables
        assert [v.shape for v in saved] == [a.shape for a in average], name
        for v, a in zip(saved, average):
            np.testing.assert_array_equal(v.numpy(), a, err_msg=name)
    second = make_learner(config)
    assert second.step == 10
    for restored, saved in zip(_values(_average(second)), average):
        np.testing.assert_array_equal(restored, saved)


@pytest.fixture(scope="module")
def plain_run(new_server, new_learner, write_replay, tmp_path_factory):
    """A learner without averaging on a server of its own, started and trained to
    step 10 (checkpoint_interval is 10: step 10 is saved); returns (loop, config, server).

    The tests below may train it on (no further checkpoint within 10 steps) or build
    other learners on its root_dir; the checkpoint at step 10 stays as it was."""
    server = new_server()
    write_replay(server.localhost_client(), 128)
    root_dir = str(tmp_path_factory.mktemp("plain_root"))
    config = learner_config(root_dir, f"localhost:{server.port}")
    loop = new_learner(config, server)
    assert loop.start()
    loop.train(10)
    return loop, config, server


def test_off_publishes_the_trained_actor(plain_run):
    loop, _, _ = plain_run
    assert loop.learner.averager is None
    loop.train(2)
    for mine, actor in zip(loop.learner.variables().policy_weights, _values(_actor(loop))):
        np.testing.assert_array_equal(mine, actor)


def test_turning_averaging_on_over_a_checkpoint_without_it_is_refused_clearly(
    plain_run, new_learner
):
    _, config, server = plain_run  # trained without averaging: ckpt-10
    averaged = dataclasses.replace(config, hparams=small_hparams(policy_averaging_tau=TAU))
    with pytest.raises(CheckpointError, match="written without policy averaging") as error:
        new_learner(averaged, server)
    assert "--policy_averaging_tau=0" in str(error.value)
    # The checkpoint is untouched: the run resumes as it was trained.
    assert new_learner(config, server).step == 10


@pytest.mark.parametrize("bad", [-0.1, 1.0, 2, "x"])
def test_a_tau_outside_zero_to_one_is_refused(bad):
    with pytest.raises(ConfigError, match=r"policy_averaging_tau must be in \[0, 1\)"):
        small_hparams(policy_averaging_tau=bad)
