"""A camera beside other sensors (a Gymnasium Dict with one image and vectors) trains
from pixels: the loader gives {"pixels": stacked frames, "state": the rest}, the
replay stores each frame and state once on a real server and gives back the
transitions the env showed, the learner's encoder reads the pixels and the actor
and critics the state beside its features, and the NumPy actor acts as the TF one."""

import os
import sys

import gymnasium
import numpy as np
import pytest
import reverb
import tensorflow as tf
from gymnasium import spaces
from support.camera import pixel_hparams, pixel_server, rollout
from support.training import wait_for_size
from tf_agents.policies import greedy_policy
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts

from sac_distributed import config as config_lib
from sac_distributed import replay
from sac_distributed.algorithm.pixel_policy import (
    acting_weight_shapes_for,
    make_acting_policy,
    min_image_size,
)
from sac_distributed.algorithm.policy import add_batch
from sac_distributed.algorithm.sac.learner import make_learner
from sac_distributed.envs import loader, observations
from sac_distributed.envs.gymnasium_env import GymnasiumEnvironment

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
CAMERA = "pointmass:make_env"
KWARGS = {"pixels": True, "velocity": True, "image_size": 16, "max_episode_steps": 7}
BATCH = 8


def camera_env(seed=0):
    return loader.load_env(CAMERA, seed, KWARGS, module_dirs=(EXAMPLES,), frame_stack=3)


def test_the_loader_gives_stacked_pixels_and_the_other_parts_as_one_state():
    env = camera_env()
    specs = loader.env_specs(env)
    assert specs.is_image and specs.state_size == 2 and specs.frame_shape == (16, 16, 3)
    assert specs.observation["pixels"].shape.as_list() == [16, 16, 9]
    first = env.reset().observation
    assert first["pixels"].dtype == np.uint8 and first["state"].dtype == np.float32
    np.testing.assert_array_equal(first["state"], [0.0, 0.0])  # the mass starts at rest
    second = env.step(np.ones(2, np.float32)).observation
    np.testing.assert_allclose(second["state"], [0.2, 0.2], rtol=1e-6)
    assert np.array_equal(second["pixels"][..., :6], first["pixels"][..., 3:])


class _TwoPartEnv(gymnasium.Env):
    """A channels-first camera and a Discrete mode and a Box, in a Dict."""

    def __init__(self):
        self.observation_space = spaces.Dict(
            {
                "arm": spaces.Box(-1.0, 1.0, (3,), np.float32),
                "camera": spaces.Box(0, 255, (3, 16, 16), np.uint8),
                "mode": spaces.Discrete(3),
            }
        )
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._observation(), {}

    def step(self, action):
        return self._observation(), 0.0, False, False, {}

    def _observation(self):
        camera = np.zeros((3, 16, 16), np.uint8)
        camera[0, 2, 5] = 200  # channel 0, row 2, column 5
        return {"arm": np.array([0.5, -0.5, 0.25], np.float32), "camera": camera, "mode": 2}


def test_a_channels_first_camera_in_a_dict_is_turned_last_and_the_rest_flattened_in_order():
    env = GymnasiumEnvironment(_TwoPartEnv(), "two-part")
    spec = env.observation_spec()
    assert spec["pixels"].shape == (16, 16, 3) and spec["state"].shape == (6,)
    observation = env.reset().observation
    assert observation["pixels"][2, 5, 0] == 200
    np.testing.assert_array_equal(observation["state"], [0.5, -0.5, 0.25, 0.0, 0.0, 1.0])
    said = observations.describe_parts(
        observations.observation_parts(_TwoPartEnv().observation_space, "")
    )
    assert "camera trained from pixels" in said and "(4 floats) as one state vector" not in said
    assert "the other parts (6 floats) as one state vector" in said


def test_the_smallest_camera_of_a_dict_is_the_smallest_the_encoder_takes():
    assert observations.SMALLEST_CAMERA == min_image_size()


def test_the_launcher_says_the_state_goes_beside_the_encoder_features():
    sys.path.insert(0, EXAMPLES)
    try:
        kwargs = '{"pixels": true, "velocity": true}'
        _, said, camera = loader.env_sources.check_env_name(CAMERA, kwargs)
    finally:
        sys.path.remove(EXAMPLES)
    assert camera == (32, 32, 3)
    assert "camera trained from pixels" in said
    assert "the other parts (2 floats) as one state vector beside its features" in said


@pytest.mark.parametrize("k", [1, 2])
def test_frames_and_states_written_once_come_back_as_the_transitions(tmp_path, k):
    env = camera_env()
    specs = loader.env_specs(env)
    server = pixel_server(specs, pixel_hparams(transitions_per_item=k), tmp_path)
    client = reverb.Client(f"localhost:{server.port}")
    signature = replay.transition_signature(specs, k)
    assert signature[replay.frames.STATES].shape.as_list() == [k + 1, 2]
    steps = rollout(env, 20)  # episodes of 7, 7 and 6 steps
    writer = replay.FrameWriter(client, replay.frame_layout(specs), k)
    for observation, action, reward, discount, next_observation, last in steps:
        writer.write_step(0, observation, action, reward, discount, next_observation)
        if last:
            writer.end_episode(0)
    assert writer.flush(timeout_ms=30_000)
    wait_for_size(client, replay.REPLAY_TABLE, writer.transitions_written // k)
    by_reward = {float(s[2]): s for s in steps}
    dataset = replay.make_dataset(f"localhost:{server.port}", specs, batch_size=BATCH)
    for batch in dataset.take(3):
        for i in range(BATCH):
            want = by_reward[float(batch.next_time_step.reward[i])]
            for got, observation in (
                (batch.time_step.observation, want[0]),
                (batch.next_time_step.observation, want[4]),
            ):
                assert np.array_equal(got["pixels"][i].numpy(), observation["pixels"])
                np.testing.assert_array_equal(got["state"][i].numpy(), observation["state"])
    writer.close()
    server.stop()


def _batches(specs, seed=0):
    rng = np.random.default_rng(seed)
    shape = (BATCH, *specs.observation["pixels"].shape.as_list())

    def observation():
        pixels = tf.constant(rng.integers(0, 256, shape, dtype=np.uint8))
        state = tf.constant(rng.normal(size=(BATCH, specs.state_size)).astype(np.float32))
        return {"pixels": pixels, "state": state}

    while True:
        mid = tf.fill([BATCH], ts.StepType.MID)
        action = tf.constant(rng.uniform(-1, 1, (BATCH, 2)).astype(np.float32))
        reward = tf.constant(rng.normal(size=BATCH).astype(np.float32))
        yield trajectory.Transition(
            ts.TimeStep(mid, tf.zeros(BATCH), tf.ones(BATCH), observation()),
            policy_step.PolicyStep(action, (), ()),
            ts.TimeStep(mid, reward, tf.ones(BATCH), observation()),
        )


def test_the_learner_trains_on_pixels_and_state_and_the_numpy_actor_matches(tmp_path):
    env = camera_env()
    specs = loader.env_specs(env)
    hp = config_lib.Hyperparams(
        batch_size=BATCH,
        initial_collect_steps=BATCH,
        actor_fc_layer_params=(16, 16),
        critic_joint_fc_layer_params=(16, 16),
        frame_stack=3,
    )
    learner = make_learner(specs, hp, tf.distribute.get_strategy(), str(tmp_path), seed=0)
    first_layer = learner.agent.actor.hidden[0].kernel
    assert first_layer.shape[0] == 50 + 2  # the encoder's features, then the state
    losses = learner.step(_batches(specs), 3)
    assert np.all(np.isfinite(losses)) and learner.train_step_numpy == 3
    weights = learner.variables().policy_weights
    assert [w.shape for w in weights] == acting_weight_shapes_for(specs, hp)
    policy = make_acting_policy(specs, hp, seed=0)
    policy.set_weights(weights)
    env.reset()
    observation = env.step(np.ones(2, np.float32)).observation
    greedy = greedy_policy.GreedyPolicy(learner.policy)
    batch = tf.nest.map_structure(tf.constant, add_batch(observation))
    want = greedy.action(ts.restart(batch, batch_size=1)).action
    np.testing.assert_allclose(policy.action(add_batch(observation), greedy=True), want, atol=1e-5)
    moved = dict(observation, state=observation["state"] + 1.0)  # the state changes the action
    assert not np.allclose(policy.action(add_batch(moved), greedy=True), want, atol=1e-5)


def test_a_camera_that_gym_flattens_is_said_to_be_flattened_and_why():
    image = spaces.Box(0, 255, (16, 16, 3), np.uint8)
    parts = observations.observation_parts(spaces.Dict({"camera": image}), "")
    said = observations.describe_parts(parts, camera=False)
    assert "one flat vector of 768 floats" in said
    assert "make the env a Gymnasium one to train its camera" in said


def test_a_dict_holding_only_a_camera_is_observed_as_the_camera():
    class OnlyCamera(_TwoPartEnv):
        def __init__(self):
            super().__init__()
            self.observation_space = spaces.Dict(
                {"camera": spaces.Box(0, 255, (3, 16, 16), np.uint8)}
            )

        def _observation(self):
            return {"camera": super()._observation()["camera"]}

    env = GymnasiumEnvironment(OnlyCamera(), "only-camera")
    assert env.observation_spec().shape == (16, 16, 3)
    assert env.reset().observation[2, 5, 0] == 200
