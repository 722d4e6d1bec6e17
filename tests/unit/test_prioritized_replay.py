"""Prioritized replay: the sampler, importance weights, the weighted SAC update,
priority updates on real servers, the max-priority channel and checkpoints.

The sharded dataset that yields each item's sampling facts is built elsewhere
(replay.make_dataset with sample info); here a one-shard stand-in built on
Reverb's own TrajectoryDataset yields the same `(Transition, info)` pairs.
"""

import tempfile
import time
from typing import NamedTuple

import numpy as np
import pytest
import reverb
import tensorflow as tf
import tree
from support.training import small_hparams, wait_for_size

from sac_distributed import replay
from sac_distributed.algorithm import priorities as algorithm_priorities
from sac_distributed.algorithm import strategy as strategy_lib
from sac_distributed.algorithm.sac import learner as sac_learner
from sac_distributed.algorithm.sac import update as sac_update
from sac_distributed.errors import SignatureMismatchError
from sac_distributed.replay import priorities as priorities_lib
from sac_distributed.replay.signatures import POLICY_VARIABLES, variable_signature
from sac_distributed.replay.variables import VariableContainer

K = 4  # rows per item: the per-item mean and the row weights are exercised


class SampleInfo(NamedTuple):
    """The per-item sample facts the sharded dataset yields (see replay/dataset.py)."""

    key: tf.Tensor
    shard: tf.Tensor
    probability: tf.Tensor
    replay_size: tf.Tensor


def _prioritized_hparams(**overrides):
    return small_hparams(
        prioritized_replay=True, transitions_per_item=K, **{"batch_size": 32, **overrides}
    )


def _tables(hparams, env_specs, max_priority=True):
    """What make_tables builds once it takes the sampler from `replay_sampler`."""
    table = reverb.Table(
        name=replay.REPLAY_TABLE,
        sampler=replay.replay_sampler(hparams),
        remover=reverb.selectors.Fifo(),
        max_size=hparams.replay_capacity_items,
        rate_limiter=reverb.rate_limiters.MinSize(1),
        signature=replay.transition_signature(env_specs, hparams.transitions_per_item),
    )
    variables = replay.latest_value_table(
        replay.VARIABLE_TABLE, replay.variable_signature(env_specs, hparams)
    )
    return [table, variables] + ([replay.max_priority_table()] if max_priority else [])


@pytest.fixture
def per_server(env_specs):
    server = reverb.Server(_tables(_prioritized_hparams(), env_specs), port=None)
    yield server
    server.stop()


def _dataset(address, env_specs, batch_size, shard=0):
    """(Transition, SampleInfo) batches from one server, as the sharded dataset yields."""
    signature = replay.transition_signature(env_specs, K)
    layout = replay.row_layout(env_specs)
    dataset = reverb.TrajectoryDataset(
        server_address=address,
        table=replay.REPLAY_TABLE,
        dtypes=tree.map_structure(lambda s: s.dtype, signature),
        shapes=tree.map_structure(lambda s: s.shape, signature),
        max_in_flight_samples_per_worker=batch_size // K,
    ).batch(batch_size // K, drop_remainder=True)

    def split(sample):
        info = SampleInfo(
            key=sample.info.key,
            shard=tf.fill(tf.shape(sample.info.key), tf.constant(shard, tf.int32)),
            probability=sample.info.probability,
            replay_size=sample.info.table_size,
        )
        return replay.items_to_transition(sample.data[replay.TRANSITIONS], layout), info

    return dataset.map(split)


def _iterator(learner, address, env_specs, hparams):
    def dataset_fn(context):
        per_replica = context.get_per_replica_batch_size(hparams.batch_size)
        return _dataset(address, env_specs, per_replica)

    return iter(learner.strategy.distribute_datasets_from_function(dataset_fn))


def _priorities_by_key(client, draws=400):
    """Priorities of the items a few hundred samples see, by key."""
    seen = {}
    for sample in client.sample(replay.REPLAY_TABLE, num_samples=draws, emit_timesteps=False):
        seen[int(sample.info.key)] = float(sample.info.priority)
    return seen


# --- importance weights -----------------------------------------------------------------


def test_importance_weights_of_hand_made_probabilities():
    probability = tf.constant([0.1, 0.2, 0.4, 0.3], tf.float64)
    size = tf.constant([10, 10, 10, 10], tf.int64)
    weights = algorithm_priorities.importance_weights(
        probability, size, beta=0.5, rows_per_item=2
    ).numpy()
    # (N P)^-0.5 = 1, 2^-0.5, 4^-0.5, 3^-0.5; the largest (the rarest item) is 1.
    expected = np.repeat([1.0, 2**-0.5, 0.5, 3**-0.5], 2)
    np.testing.assert_allclose(weights, expected, rtol=1e-6)
    assert weights.dtype == np.float32
    assert weights.max() == 1.0 and weights.min() > 0.0


def test_importance_weights_are_one_without_correction_or_prioritization():
    probability = tf.constant([0.05, 0.5, 0.45], tf.float64)
    size = tf.constant([3, 3, 3], tf.int64)
    no_correction = algorithm_priorities.importance_weights(probability, size, 0.0, 1)
    np.testing.assert_array_equal(no_correction.numpy(), np.ones(3, np.float32))
    uniform = algorithm_priorities.importance_weights(tf.fill([5], 0.01), tf.fill([5], 100), 0.4, 3)
    np.testing.assert_allclose(uniform.numpy(), np.ones(15), rtol=1e-6)


def test_item_priorities_are_the_mean_abs_td_error_of_their_rows():
    td = tf.constant([1.0, 3.0, 0.0, 0.0, 2.0, 2.0])
    got = algorithm_priorities.item_priorities(td, rows_per_item=2).numpy()
    eps = algorithm_priorities.PRIORITY_EPSILON
    np.testing.assert_allclose(got, [2.0 + eps, eps, 2.0 + eps], rtol=1e-12)
    assert got.dtype == np.float64 and (got > 0).all()


# --- the weighted update -----------------------------------------------------------------


def _random_row_batch(env_specs, n, seed):
    rng = np.random.default_rng(seed)
    layout = replay.row_layout(env_specs)
    rows = rng.uniform(-1, 1, (n, layout.width)).astype(np.float32)
    rows[:, layout.split_sizes[0] + layout.split_sizes[1] + 1] = 0.99  # discount
    return replay.to_transition(tf.constant(rows), layout)


def test_unit_weights_give_sac_agents_own_critic_loss(env_specs):
    hparams = _prioritized_hparams(reward_scale_factor=2.0)
    agent = sac_update.make_agent(env_specs, hparams)
    experience = _random_row_batch(env_specs, 32, seed=1)
    time_steps, policy_steps, next_time_steps = experience
    tf.random.set_seed(11)  # both draw the same a' ~ pi(s')
    # As SacAgent._train scales it (critic_loss_weight, 0.5 by default).
    theirs = agent._critic_loss_weight * agent.critic_loss(
        time_steps,
        policy_steps.action,
        next_time_steps,
        td_errors_loss_fn=tf.math.squared_difference,
        gamma=hparams.gamma,
        reward_scale_factor=hparams.reward_scale_factor,
        training=True,
    )
    tf.random.set_seed(11)
    ours, td = sac_update.critic_loss_and_td_errors(agent, experience, tf.ones([32]))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5)
    assert td.shape == (32,) and (td.numpy() >= 0).all()
    # The loss is the mean of both critics' squared errors; a zero weight drops a row.
    tf.random.set_seed(11)
    half = tf.constant([1.0, 0.0] * 16)
    weighted, _ = sac_update.critic_loss_and_td_errors(agent, experience, half)
    assert 0.0 < weighted.numpy() < ours.numpy()


@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_training_steps_change_priorities_on_the_server(
    per_server, env_specs, write_replay, tmp_path, strategy
):
    hparams = _prioritized_hparams()
    client = per_server.localhost_client()
    address = f"localhost:{per_server.port}"
    write_replay(client, 64)  # 16 items, all at priority 1
    assert set(_priorities_by_key(client).values()) == {1.0}

    learner = sac_learner.SacLearner(
        env_specs, hparams, strategy_lib.make_strategy(strategy), str(tmp_path), seed=0
    )
    before = learner.train_step_numpy
    losses, update = learner.step_prioritized(_iterator(learner, address, env_specs, hparams), 3)
    assert learner.train_step_numpy == before + 3
    assert np.isfinite(losses).all()
    items = 3 * hparams.batch_size // K  # per step, over all replicas
    assert update.keys.dtype == np.uint64 and update.keys.shape == (items,)
    assert update.shards.tolist() == [0] * items
    assert (update.priorities > 0).all() and np.isfinite(update.priorities).all()

    updater = priorities_lib.PriorityUpdater([address])
    updater.submit(*update)
    assert updater.flush(timeout_s=120)
    latest = dict(zip(update.keys.tolist(), update.priorities.tolist()))  # later steps win
    assert updater.close() == 0 and updater.sent == len(latest) and updater.dropped == 0
    assert updater.max_priority == max(1.0, update.priorities.max())

    seen = _priorities_by_key(client)
    changed = {key: p for key, p in seen.items() if key in latest}
    assert changed, "no updated item was sampled in 400 draws of 16 items"
    for key, priority in changed.items():
        assert priority == pytest.approx(latest[key]) and priority != 1.0
    untouched = [p for key, p in seen.items() if key not in latest]
    assert all(p == 1.0 for p in untouched)

    # A spare of the prioritized update (traced ahead with 0 steps) swaps in for a
    # reconnect and trains on a new iterator without tracing again (traced.py).
    assert learner.trace_spares(_iterator(learner, address, env_specs, hparams)) == 1
    assert learner.retrace() and learner.tracing_counts()["prioritized"] == 1
    _, again = learner.step_prioritized(_iterator(learner, address, env_specs, hparams), 2)
    assert again.keys.shape == (2 * hparams.batch_size // K,)
    assert learner.tracing_counts()["prioritized"] == 1


# --- the updater ---------------------------------------------------------------------------


def test_a_dead_shards_updates_are_dropped_and_counted(env_specs, write_replay, monkeypatch):
    monkeypatch.setattr(priorities_lib, "PING_TIMEOUT_S", 1)
    live, dead = (
        reverb.Server(_tables(_prioritized_hparams(), env_specs), port=None) for _ in range(2)
    )
    try:
        client = live.localhost_client()
        write_replay(client, 8)
        keys = list(_priorities_by_key(client, draws=50))
        dead.stop()
        updater = priorities_lib.PriorityUpdater(
            [f"localhost:{live.port}", f"localhost:{dead.port}"]
        )
        started = time.monotonic()
        updater.submit(
            np.array(keys + [1, 2, 3], np.uint64),
            np.array([0] * len(keys) + [1, 1, 1], np.int32),
            np.array([5.0] * len(keys) + [7.0] * 3),
        )
        assert time.monotonic() - started < 1.0, "submit() must not wait on the network"
        assert updater.flush(timeout_s=120)
        assert updater.sent == len(keys) and updater.dropped == 3
        assert updater.max_priority == 7.0
        assert set(_priorities_by_key(client, draws=50).values()) == {5.0}
        with pytest.raises(ValueError, match="names shard 2"):
            updater.submit(np.array([1], np.uint64), np.array([2]), np.array([1.0]))
        assert updater.close() == 0
    finally:
        live.stop()


# --- start-up checks -----------------------------------------------------------------------


def test_a_job_whose_setting_differs_from_the_servers_sampler_is_refused(
    per_server, reverb_server, env_specs
):
    uniform = reverb_server.localhost_client()
    prioritized = per_server.localhost_client()
    replay.check_replay_sampler(prioritized, _prioritized_hparams(), "learner")
    replay.check_replay_sampler(uniform, small_hparams(), "actor")
    with pytest.raises(SignatureMismatchError, match=r"prioritized_replay=True.*samples uniform"):
        replay.check_replay_sampler(uniform, _prioritized_hparams(), "learner")
    with pytest.raises(
        SignatureMismatchError, match=r"prioritized_replay=False.*priority_exponent=0.6"
    ):
        replay.check_replay_sampler(prioritized, small_hparams(), "actor")
    with pytest.raises(
        SignatureMismatchError, match=r"priority_exponent=0.8.*priority_exponent=0.6"
    ):
        replay.check_replay_sampler(
            prioritized, _prioritized_hparams(priority_exponent=0.8), "learner"
        )
    replay.check_max_priority_table(prioritized)
    replay.check_max_priority_table(uniform)  # today's servers have it whatever the sampler
    older = reverb.Server(_tables(_prioritized_hparams(), env_specs, max_priority=False), port=None)
    try:
        with pytest.raises(SignatureMismatchError, match="older sac-reverb-server"):
            replay.check_max_priority_table(older.localhost_client())
    finally:
        older.stop()


# --- new items at the published max priority ---------------------------------------------


def _zero_weights(env_specs):
    specs = variable_signature(env_specs, small_hparams())[POLICY_VARIABLES]
    return [np.zeros(spec.shape, np.float32) for spec in specs]


def test_the_published_max_priority_reaches_a_pull(per_server, reverb_server, env_specs):
    container = VariableContainer(per_server.localhost_client())
    weights = _zero_weights(env_specs)
    container.push(weights, train_step=5)
    assert container.pull().max_priority is None  # nothing published yet
    container.push_max_priority(3.5)
    container.push_max_priority(4.25)  # the latest replaces the earlier one
    assert container.pull().max_priority == 4.25
    assert VariableContainer(per_server.localhost_client()).pull_max_priority() == 4.25
    assert priorities_lib.initial_max_priority(4.25) == 4.25
    assert priorities_lib.initial_max_priority(None) == replay.INITIAL_PRIORITY
    # A server without the table (built before prioritized replay) reads as None.
    old = VariableContainer(reverb_server.localhost_client())
    old.push(weights, train_step=1)
    assert old.pull().max_priority is None and old.pull_max_priority() is None
    container.close()
    old.close()


def test_new_items_enter_at_the_published_max_priority(per_server, env_specs):
    from support.training import random_transitions

    client = per_server.localhost_client()
    container = VariableContainer(client)
    container.push(_zero_weights(env_specs), train_step=1)
    container.push_max_priority(6.5)
    writer = replay.TransitionWriter(client)
    writer.priority = container.pull().max_priority  # what the actor's refresh does
    for transition in random_transitions(env_specs, 2 * K):
        writer.write(transition)
    assert writer.flush(timeout_ms=120_000)
    writer.close()
    wait_for_size(client, replay.REPLAY_TABLE, 2)
    assert set(_priorities_by_key(client, draws=50).values()) == {6.5}
    container.close()


# --- replay checkpoints --------------------------------------------------------------------


def _checkpoint(tables, write):
    server = reverb.Server(
        tables, port=None, checkpointer=reverb.checkpointers.DefaultCheckpointer(tempfile.mkdtemp())
    )
    write(server.localhost_client())
    path = server.localhost_client().checkpoint()
    server.stop()
    return path


def _restore(tables, path):
    checkpointer = reverb.checkpointers.DefaultCheckpointer(
        tempfile.mkdtemp(), fallback_checkpoint_path=path
    )
    return reverb.Server(tables, port=None, checkpointer=checkpointer)


def test_replay_checkpoints_restore_across_the_setting(env_specs, write_replay):
    """A checkpoint from before prioritized replay (no max-priority table) restores
    on a server that has it, and one that has it restores either way; the
    sampler comes from the checkpoint, so the start-up check names it."""
    uniform, prioritized = small_hparams(transitions_per_item=K), _prioritized_hparams()
    old = _checkpoint(_tables(uniform, env_specs, max_priority=False), lambda c: write_replay(c, 8))
    server = _restore(_tables(prioritized, env_specs), old)
    client = server.localhost_client()
    assert replay.table_info(client, replay.REPLAY_TABLE).current_size == 2
    assert replay.table_info(client, replay.MAX_PRIORITY_TABLE).current_size == 0
    with pytest.raises(SignatureMismatchError, match="keeps the sampler it was written with"):
        replay.check_replay_sampler(client, prioritized, "learner")
    server.stop()

    def write_and_publish(client):
        write_replay(client, 8)
        VariableContainer(client).push_max_priority(2.0)

    new = _checkpoint(_tables(prioritized, env_specs), write_and_publish)
    for hparams in (prioritized, uniform):
        server = _restore(_tables(hparams, env_specs), new)
        client = server.localhost_client()
        replay.check_replay_sampler(client, prioritized, "learner")
        assert replay.table_info(client, replay.MAX_PRIORITY_TABLE).current_size == 1
        server.stop()


# --- the learning benchmark's variant ------------------------------------------------------


def test_the_learning_benchmark_knows_the_per_variant():
    from benchmarks import learning

    args = learning.parse_args(["--envs=Pendulum-v1", "--variants=preset,per"])
    assert args.variants == {"preset": (), "per": ("--prioritized_replay",)}
    assert learning.resolved_hparams("Pendulum-v1", args.variants["per"]).prioritized_replay
    mixed = learning.parse_variants("per;k1=--transitions_per_item=1")
    assert mixed == {"per": ("--prioritized_replay",), "k1": ("--transitions_per_item=1",)}
    with pytest.raises(SystemExit, match="'perr' is neither"):
        learning.parse_variants("preset,perr")
