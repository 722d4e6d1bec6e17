"""Observation normalization: correct statistics, and the same ones everywhere.

The learner folds every sampled batch into running statistics and publishes
them with the weights; actors apply them in NumPy, the exported SavedModels in
TensorFlow. These tests check the statistics against NumPy, the NumPy and
TensorFlow formulas against each other, and, on a real server with a learner
under MirroredStrategy, that actors, the container and the SavedModel agree,
that a restart restores the statistics, and that switching the option against
an existing checkpoint fails with an explanation.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
from support.training import learner_config
from tf_agents.policies import py_tf_eager_policy
from tf_agents.trajectories import time_step as ts

from sac_distributed import paths
from sac_distributed.algorithm import strategy as strategy_lib
from sac_distributed.algorithm.policy import NumpyActorPolicy, ObservationNormalization
from sac_distributed.algorithm.sac.normalization import OBSERVATION_CLIP, ObservationNormalizer
from sac_distributed.errors import CheckpointError
from sac_distributed.replay.variables import VariableContainer

NUM_ITERATIONS = 20
BATCH_SIZE = 32


def _badly_scaled_observations(n: int, seed: int = 0) -> np.ndarray:
    """Pendulum-shaped observations with very different scales per element."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, 3)) * [0.1, 3.0, 40.0] + [5.0, -2.0, 100.0]).astype(np.float32)


def test_running_statistics_match_numpy(env_specs):
    normalizer = ObservationNormalizer(env_specs.observation)
    data = _badly_scaled_observations(1000)
    for chunk in np.split(data, [1, 33, 500, 501]):  # a first batch of one, uneven after
        normalizer.update(tf.constant(chunk))
    assert normalizer.count.numpy() == 1000
    np.testing.assert_allclose(normalizer.mean.numpy(), data.mean(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(normalizer.variance.numpy(), data.var(axis=0), rtol=1e-4)


def test_replicas_all_reduce_their_batches(env_specs):
    strategy = strategy_lib.make_strategy("mirrored")
    assert strategy.num_replicas_in_sync == 2
    with strategy.scope():
        normalizer = ObservationNormalizer(env_specs.observation)
    data = _badly_scaled_observations(64, seed=3)
    halves = iter([tf.constant(data[:32]), tf.constant(data[32:])])
    batch = strategy.experimental_distribute_values_from_function(lambda _ctx: next(halves))

    @tf.function
    def update(per_replica):
        strategy.run(normalizer.update, args=(per_replica,))

    update(batch)
    for mean in strategy.experimental_local_results(normalizer.mean):
        np.testing.assert_allclose(mean.numpy(), data.mean(axis=0), rtol=1e-5)
    for count in strategy.experimental_local_results(normalizer.count):
        assert count.numpy() == 64


def test_numpy_and_tensorflow_normalize_alike(env_specs):
    normalizer = ObservationNormalizer(env_specs.observation)
    normalizer.update(tf.constant(_badly_scaled_observations(200)))
    params = normalizer.numpy_params()
    assert params.clip == OBSERVATION_CLIP
    outliers = _badly_scaled_observations(50, seed=1) * 30.0  # far out: exercises the clip
    expected = normalizer.normalize(tf.constant(outliers)).numpy()
    actual = params.apply(outliers)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
    assert np.abs(actual).max() == pytest.approx(OBSERVATION_CLIP)


def test_identity_statistics_leave_observations_alone(env_specs):
    weights = [np.ones((3, 4), np.float32), np.zeros(4, np.float32)] * 1
    weights += [np.ones((4, 2), np.float32), np.zeros(2, np.float32)]
    spec = env_specs.action
    raw = NumpyActorPolicy(spec.minimum, spec.maximum, spec.shape, weights)
    identity = NumpyActorPolicy(spec.minimum, spec.maximum, spec.shape)
    identity.set_weights(weights, ObservationNormalization.identity((3,)))
    obs = _badly_scaled_observations(5) * 100.0  # beyond any clip: an identity must not clip
    np.testing.assert_array_equal(identity.action(obs, greedy=True), raw.action(obs, greedy=True))


def test_statistics_of_another_shape_are_refused(env_specs):
    weights = [np.ones((3, 4), np.float32), np.zeros(4, np.float32)]
    weights += [np.ones((4, 2), np.float32), np.zeros(2, np.float32)]
    spec = env_specs.action
    policy = NumpyActorPolicy(spec.minimum, spec.maximum, spec.shape)
    wrong = ObservationNormalization(np.zeros(5, np.float32), np.ones(5, np.float32), 10.0)
    with pytest.raises(ValueError, match="5 elements"):
        policy.set_weights(weights, wrong)


# --- a learner with normalization on a real server ---------------------------------


@pytest.fixture(scope="module")
def trained(new_server, new_learner, write_replay, tmp_path_factory):
    """A mirrored learner with normalize_observations, trained to NUM_ITERATIONS.

    Returns (loop, server, root_dir, replay observations).
    """
    server = new_server()
    client = server.localhost_client()
    transitions = write_replay(client, 128)
    root_dir = str(tmp_path_factory.mktemp("normalized_root"))
    config = _mirrored_learner_config(root_dir, server, normalize=True)
    loop = new_learner(config, server)
    result = loop.run()
    assert result.stop_reason == "num_iterations reached"
    observations = np.stack([t["observation"] for t in transitions])
    return loop, server, root_dir, observations


def _mirrored_learner_config(root_dir: str, server, normalize: bool):
    address = f"localhost:{server.port}"
    # No scheduled export at step 20: run()'s final one is the saved policy read here.
    return learner_config(
        root_dir,
        address,
        {"normalize_observations": normalize, "policy_save_interval": 1_000},
        strategy="mirrored",
    )


def test_learner_statistics_reach_actors_and_the_saved_policy(trained, env_specs):
    loop, server, root_dir, replay_observations = trained
    client = server.localhost_client()
    normalizer = loop.learner.normalizer
    assert normalizer.count.numpy() == NUM_ITERATIONS * BATCH_SIZE
    # Sampled uniformly (with replacement) from the replay, so within a few standard
    # errors of its mean; 5 of them fail a correct learner about once in a million runs
    # (a fixed 0.05 was about 2 standard errors per coordinate, and failed a correct
    # learner in a full-suite run on a busy machine).
    standard_error = replay_observations.std(0) / np.sqrt(NUM_ITERATIONS * BATCH_SIZE)
    np.testing.assert_allclose(
        normalizer.mean.numpy(), replay_observations.mean(0), atol=float(5 * standard_error.max())
    )

    # The container holds exactly the learner's statistics, and actors use them.
    snapshot = VariableContainer(client).pull()
    assert snapshot.normalization.enabled
    np.testing.assert_array_equal(snapshot.normalization.mean, normalizer.mean.numpy())
    np.testing.assert_array_equal(snapshot.normalization.std, normalizer.std().numpy())

    # The exported SavedModel takes raw observations and acts like an actor.
    spec = env_specs.action
    actor = NumpyActorPolicy(spec.minimum, spec.maximum, spec.shape)
    actor.set_weights(snapshot.policy_weights, snapshot.normalization)
    obs = replay_observations[:16] * 3.0
    path = os.path.join(root_dir, paths.POLICIES_DIR, "greedy_policy")
    saved = py_tf_eager_policy.SavedModelPyTFEagerPolicy(
        path, load_specs_from_pbtxt=True, batch_time_steps=False
    )
    exported = np.asarray(saved.action(ts.restart(obs, batch_size=len(obs))).action)
    np.testing.assert_allclose(actor.action(obs, greedy=True), exported, atol=1e-5)

    # Without the statistics an actor would act differently: they matter.
    plain = NumpyActorPolicy(spec.minimum, spec.maximum, spec.shape, snapshot.policy_weights)
    assert not np.allclose(plain.action(obs, greedy=True), exported, atol=1e-3)


def test_restart_restores_statistics_and_refuses_a_switched_option(trained, new_learner):
    loop, server, root_dir, _ = trained
    mean, count = loop.learner.normalizer.mean.numpy(), loop.learner.normalizer.count.numpy()

    resumed = new_learner(_mirrored_learner_config(root_dir, server, normalize=True), server)
    assert resumed.step == NUM_ITERATIONS
    np.testing.assert_array_equal(resumed.learner.normalizer.mean.numpy(), mean)
    assert resumed.learner.normalizer.count.numpy() == count

    with pytest.raises(CheckpointError, match="normalize_observations=True") as error:
        new_learner(_mirrored_learner_config(root_dir, server, normalize=False), server)
    assert "--normalize_observations=true" in str(error.value)
    # Nothing stored was touched: the checkpoint still restores in full.
    again = new_learner(_mirrored_learner_config(root_dir, server, normalize=True), server)
    assert again.learner.normalizer.count.numpy() == count


def test_normalizing_learner_refuses_a_plain_checkpoint(make_learner, make_learner_config):
    plain = make_learner(make_learner_config())
    assert plain.learner.save_checkpoint()  # ckpt-0 of a learner without normalization
    with pytest.raises(CheckpointError, match="normalize_observations=False"):
        make_learner(make_learner_config({"normalize_observations": True}))
