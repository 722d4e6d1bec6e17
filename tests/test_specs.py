"""Table signatures from env specs, and the actor -> Reverb -> learner data path."""

import numpy as np
import pytest
import tensorflow as tf
from conftest import small_hparams
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory

from sac_distributed import replay
from sac_distributed import specs as specs_lib


def test_server_tables_have_the_signatures_built_from_env_specs(client, env_specs, hparams):
    infos = client.server_info()
    assert set(infos) == {replay.REPLAY_TABLE, replay.VARIABLE_TABLE}

    transition = specs_lib.transition_signature(env_specs)
    variables = specs_lib.variable_signature(env_specs, hparams)
    assert specs_lib.signatures_match(transition, infos[replay.REPLAY_TABLE].signature)
    assert specs_lib.signatures_match(variables, infos[replay.VARIABLE_TABLE].signature)
    # The checks the actor, learner and evaluator run before using the tables.
    replay.check_table_signature(client, replay.REPLAY_TABLE, transition, "transition spec")
    replay.check_table_signature(client, replay.VARIABLE_TABLE, variables, "variable spec")

    # The transition signature is the env's: one (s, a, r, discount, s') per item.
    assert transition[specs_lib.OBSERVATION].shape == env_specs.observation.shape == (3,)
    assert transition[specs_lib.NEXT_OBSERVATION].shape == (3,)
    assert transition[specs_lib.ACTION].shape == env_specs.action.shape == (1,)
    assert transition[specs_lib.REWARD].shape == transition[specs_lib.DISCOUNT].shape == ()
    # The variable signature is the actor network's: (kernel, bias) per layer, 16-16-(2*1).
    shapes = [tuple(s.shape) for s in variables[specs_lib.POLICY_VARIABLES]]
    assert shapes == [(3, 16), (16,), (16, 16), (16,), (16, 2), (2,)]
    assert variables[specs_lib.TRAIN_STEP].dtype == tf.int64
    assert variables[specs_lib.LEARNER_DONE].dtype == tf.bool


def test_check_table_signature_names_a_missing_table(client, env_specs):
    with pytest.raises(replay.SignatureMismatchError, match="no table 'replay'") as raised:
        replay.check_table_signature(
            client, "replay", specs_lib.transition_signature(env_specs), "transition spec"
        )
    assert replay.REPLAY_TABLE in str(raised.value)


def test_actor_writes_are_read_back_by_the_learner_dataset(fill_replay, server_address, env_specs):
    written = fill_replay(64)  # row i has reward i, so every sample names its source
    batch_size = 16
    dataset = replay.make_dataset(server_address, env_specs, batch_size)
    batches = list(dataset.take(3))
    assert len(batches) == 3

    obs_shape = (batch_size,) + tuple(env_specs.observation.shape)
    act_shape = (batch_size,) + tuple(env_specs.action.shape)
    for batch in batches:
        assert isinstance(batch, trajectory.Transition)
        time_step, action_step, next_time_step = batch
        assert time_step.observation.shape == next_time_step.observation.shape == obs_shape
        assert action_step.action.shape == act_shape
        assert next_time_step.reward.shape == next_time_step.discount.shape == (batch_size,)
        assert time_step.step_type.shape == next_time_step.step_type.shape == (batch_size,)
        for tensor in (time_step.observation, action_step.action, next_time_step.observation):
            assert tensor.dtype == tf.float32
        assert next_time_step.reward.dtype == next_time_step.discount.dtype == tf.float32
        assert time_step.step_type.dtype == tf.int32
        assert np.all(time_step.step_type.numpy() == ts.StepType.MID)
        assert np.all(next_time_step.step_type.numpy() == ts.StepType.MID)

        # Every field of a sampled row comes from the same written transition.
        rewards = next_time_step.reward.numpy()
        for row, reward in enumerate(rewards):
            source = written[int(reward)]
            assert reward == source[specs_lib.REWARD]
            np.testing.assert_array_equal(
                time_step.observation[row].numpy(), source[specs_lib.OBSERVATION]
            )
            np.testing.assert_array_equal(action_step.action[row].numpy(), source[specs_lib.ACTION])
            np.testing.assert_array_equal(
                next_time_step.discount[row].numpy(), source[specs_lib.DISCOUNT]
            )
            np.testing.assert_array_equal(
                next_time_step.observation[row].numpy(), source[specs_lib.NEXT_OBSERVATION]
            )


def test_signatures_match_compares_structure_shapes_and_dtypes(env_specs, hparams):
    transition = specs_lib.transition_signature(env_specs)
    assert specs_lib.signatures_match(transition, specs_lib.transition_signature(env_specs))

    # Names do not matter, only structure, shapes and dtypes.
    renamed = {k: tf.TensorSpec(s.shape, s.dtype, name=f"other_{k}") for k, s in transition.items()}
    assert specs_lib.signatures_match(transition, renamed)

    wider = dict(transition, observation=tf.TensorSpec((4,), tf.float32))
    assert not specs_lib.signatures_match(transition, wider)
    as_float64 = dict(transition, reward=tf.TensorSpec((), tf.float64))
    assert not specs_lib.signatures_match(transition, as_float64)
    missing = {k: s for k, s in transition.items() if k != specs_lib.DISCOUNT}
    assert not specs_lib.signatures_match(transition, missing)
    assert not specs_lib.signatures_match(missing, transition)

    # Different network sizes give different variable signatures.
    variables = specs_lib.variable_signature(env_specs, hparams)
    assert specs_lib.signatures_match(variables, specs_lib.variable_signature(env_specs, hparams))
    for layers in [(32, 32), (16,), (16, 16, 16)]:
        other = specs_lib.variable_signature(env_specs, small_hparams(actor_fc_layer_params=layers))
        assert not specs_lib.signatures_match(variables, other), layers
    # The critic is not part of what actors need.
    critic = specs_lib.variable_signature(
        env_specs, small_hparams(critic_joint_fc_layer_params=(64,))
    )
    assert specs_lib.signatures_match(variables, critic)


def test_describe_signature_lists_every_field_with_dtype_and_shape(env_specs, hparams):
    text = specs_lib.describe_signature(specs_lib.transition_signature(env_specs))
    for part in (
        "observation: float32[3]",
        "action: float32[1]",
        "reward: float32[]",
        "discount: float32[]",
        "next_observation: float32[3]",
    ):
        assert part in text, text

    text = specs_lib.describe_signature(specs_lib.variable_signature(env_specs, hparams))
    assert "float32[3, 16]" in text and "float32[16, 2]" in text, text
    assert "train_step: int64[]" in text and "learner_done: bool[]" in text, text
