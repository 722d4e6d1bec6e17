"""Several cameras in one Dict observation (a top view and a wrist camera beside the
sensors) train from pixels: the loader puts the cameras side by side in one uint8
"pixels" array (channels-first ones turned last) and says which channels are
whose, the replay stores each frame once on a real server, the learner gives each
camera its own encoder and concatenates their features, and the NumPy actor acts
as the TF one, reading each camera through its own encoder. Cameras of different
sizes stay one flat vector, and the launcher says why."""

import os

import numpy as np
import reverb
import tensorflow as tf
from gymnasium import spaces
from support.camera import pixel_hparams, pixel_server, rollout
from support.training import wait_for_size
from tf_agents.policies import greedy_policy
from tf_agents.trajectories import time_step as ts

from sac_distributed import config as config_lib
from sac_distributed import replay
from sac_distributed.algorithm.pixel_policy import acting_weight_shapes_for, make_acting_policy
from sac_distributed.algorithm.policy import add_batch
from sac_distributed.algorithm.sac.learner import make_learner
from sac_distributed.envs import loader, observations

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
CAMERA = "pointmass:make_env"
KWARGS = {
    "pixels": True,
    "velocity": True,
    "wrist": True,
    "image_size": 16,
    "max_episode_steps": 7,
}
BATCH = 8


def two_camera_env(seed=0):
    return loader.load_env(CAMERA, seed, KWARGS, module_dirs=(EXAMPLES,), frame_stack=3)


def test_two_cameras_are_side_by_side_in_the_pixels_and_the_specs_say_whose_channels():
    env = two_camera_env()
    specs = loader.env_specs(env)
    assert specs.is_image and specs.cameras == (3, 1) and specs.camera_count == 2
    assert specs.observation["pixels"].shape.as_list() == [16, 16, 12]  # 3 frames of 3 + 1
    assert specs.state_size == 2
    # Each frame is the top view's 3 channels, then the wrist camera's one.
    assert specs.camera_channel_indices() == [[0, 1, 2, 4, 5, 6, 8, 9, 10], [3, 7, 11]]
    observation = env.reset().observation
    pixels = observation["pixels"]
    assert pixels.dtype == np.uint8
    frame = pixels[..., 8:]  # the newest frame
    assert not np.array_equal(frame[..., 3], frame[..., 0])  # the wrist is not the top view


def test_the_launcher_says_each_camera_has_its_own_encoder():
    space = spaces.Dict(
        {
            "front": spaces.Box(0, 255, (16, 16, 3), np.uint8),
            "joints": spaces.Box(-1.0, 1.0, (4,), np.float32),
            "wrist": spaces.Box(0, 255, (1, 16, 16), np.uint8),
        }
    )
    parts = observations.observation_parts(space, "")
    assert observations.camera_channels(parts) == (3, 1)
    assert observations.camera_shape(parts) == (16, 16, 4)
    said = observations.describe_parts(parts)
    assert "cameras front, wrist trained from pixels" in said
    assert "each through its own conv encoder" in said
    assert "the other parts (4 floats) as one state vector beside their features" in said


def test_the_cameras_are_split_in_the_spaces_order_and_turned_channels_last():
    space = spaces.Dict(
        {
            "a": spaces.Box(0, 255, (2, 16, 16), np.uint8),  # channels-first
            "b": spaces.Box(0, 255, (16, 16, 1), np.uint8),
        }
    )
    a = np.zeros((2, 16, 16), np.uint8)
    a[1, 3, 4] = 7
    b = np.full((16, 16, 1), 9, np.uint8)
    pixels = observations.split_camera(space)({"a": a, "b": b})
    assert pixels.shape == (16, 16, 3) and pixels[3, 4, 1] == 7 and pixels[0, 0, 2] == 9


def test_cameras_of_different_sizes_are_one_flat_vector_and_the_launcher_says_why():
    small = spaces.Box(0, 255, (16, 16, 3), np.uint8)
    large = spaces.Box(0, 255, (24, 24, 3), np.uint8)
    parts = observations.observation_parts(spaces.Dict({"left": small, "right": large}), "")
    assert not observations.is_camera(parts)
    said = observations.describe_parts(parts)
    assert f"one flat vector of {16 * 16 * 3 + 24 * 24 * 3} floats" in said
    assert "the cameras differ in height and width; render them at one size" in said


def test_two_cameras_frames_written_once_come_back_as_the_transitions(tmp_path):
    env = two_camera_env()
    specs = loader.env_specs(env)
    server = pixel_server(specs, pixel_hparams(), tmp_path)
    client = reverb.Client(f"localhost:{server.port}")
    steps = rollout(env, 20)
    writer = replay.FrameWriter(client, replay.frame_layout(specs), 1)
    for observation, action, reward, discount, next_observation, last in steps:
        writer.write_step(0, observation, action, reward, discount, next_observation)
        if last:
            writer.end_episode(0)
    assert writer.flush(timeout_ms=30_000)
    wait_for_size(client, replay.REPLAY_TABLE, writer.transitions_written)
    by_reward = {float(s[2]): s for s in steps}
    dataset = replay.make_dataset(f"localhost:{server.port}", specs, batch_size=BATCH)
    for batch in dataset.take(2):
        for i in range(BATCH):
            want = by_reward[float(batch.next_time_step.reward[i])]
            got = batch.next_time_step.observation
            assert np.array_equal(got["pixels"][i].numpy(), want[4]["pixels"])
            np.testing.assert_array_equal(got["state"][i].numpy(), want[4]["state"])
    writer.close()
    server.stop()


def _random_batches(specs, seed=0):
    from tf_agents.trajectories import policy_step, trajectory

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


def test_each_camera_has_its_own_encoder_in_the_learner_and_the_numpy_actor(tmp_path):
    env = two_camera_env()
    specs = loader.env_specs(env)
    hp = config_lib.Hyperparams(
        batch_size=BATCH,
        initial_collect_steps=BATCH,
        actor_fc_layer_params=(16, 16),
        critic_joint_fc_layer_params=(16, 16),
        frame_stack=3,
    )
    learner = make_learner(specs, hp, tf.distribute.get_strategy(), str(tmp_path), seed=0)
    towers = learner.agent.encoder.towers
    assert len(towers) == 2
    assert towers[0].convs[0].kernel.shape[2] == 9 and towers[1].convs[0].kernel.shape[2] == 3
    assert learner.agent.actor.hidden[0].kernel.shape[0] == 2 * 50 + 2
    before = [w.numpy().copy() for w in towers[1].acting_weights()]
    losses = learner.step(_random_batches(specs), 3)
    assert np.all(np.isfinite(losses)) and learner.train_step_numpy == 3
    # The critic loss trains the second camera's encoder too.
    assert any(not np.allclose(b, w.numpy()) for b, w in zip(before, towers[1].acting_weights()))
    weights = learner.variables().policy_weights
    assert [w.shape for w in weights] == acting_weight_shapes_for(specs, hp)

    policy = make_acting_policy(specs, hp, seed=0)
    policy.set_weights(weights)
    env.reset()
    observation = env.step(np.ones(2, np.float32)).observation
    greedy = greedy_policy.GreedyPolicy(learner.policy)

    def tf_action(obs):
        batch = tf.nest.map_structure(tf.constant, add_batch(obs))
        return greedy.action(ts.restart(batch, batch_size=1)).action.numpy()

    want = tf_action(observation)
    np.testing.assert_allclose(policy.action(add_batch(observation), greedy=True), want, atol=1e-5)
    # Changing only the wrist camera's channels changes the action, in both.
    wrist = np.array(specs.camera_channel_indices()[1])
    pixels = observation["pixels"].copy()
    pixels[..., wrist] = 255 - pixels[..., wrist]
    moved = dict(observation, pixels=pixels)
    moved_want = tf_action(moved)
    assert not np.allclose(moved_want, want, atol=1e-5)
    np.testing.assert_allclose(policy.action(add_batch(moved), greedy=True), moved_want, atol=1e-5)


def test_a_one_camera_encoder_checkpoints_as_before_several_cameras_existed(tmp_path):
    from sac_distributed.algorithm.sac.pixel_networks import PixelEncoder

    encoder = PixelEncoder()
    encoder(tf.zeros([1, 16, 16, 9], tf.uint8))
    path = tf.train.Checkpoint(encoder=encoder).save(str(tmp_path / "ckpt"))
    names = {name for name, _ in tf.train.list_variables(path) if name.startswith("encoder/")}
    # The layout of the one-camera PixelEncoder that pixel runs were written with.
    want = {f"encoder/convs/{i}/{w}/.ATTRIBUTES/VARIABLE_VALUE" for i in range(4) for w in "kb"}
    want = {n.replace("/k/", "/kernel/").replace("/b/", "/bias/") for n in want}
    want |= {f"encoder/dense/{w}/.ATTRIBUTES/VARIABLE_VALUE" for w in ("kernel", "bias")}
    want |= {f"encoder/norm/{w}/.ATTRIBUTES/VARIABLE_VALUE" for w in ("gamma", "beta")}
    assert names == want
