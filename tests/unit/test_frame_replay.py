"""The pixel replay on a real Reverb server: frames written once come back as the
stacked transitions the env showed, across episodes and K transitions per item;
a camera run's refused options; the frame stack and action repeat wrappers."""

import os
import sys

import numpy as np
import pytest
import reverb
import tensorflow as tf
from support.camera import pixel_hparams, pixel_server, rollout
from support.training import wait_for_size

from sac_distributed import config as config_lib
from sac_distributed import replay
from sac_distributed.algorithm.pixel_policy import check_image_size
from sac_distributed.envs import loader, observations
from sac_distributed.errors import ConfigError, EnvError

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
CAMERA = "pointmass:make_env"
CAMERA_KWARGS = {"pixels": True, "image_size": 16, "max_episode_steps": 7}


def camera_env(seed=0, frame_stack=3, action_repeat=1):
    return loader.load_env(
        CAMERA,
        seed,
        CAMERA_KWARGS,
        module_dirs=(EXAMPLES,),
        frame_stack=frame_stack,
        action_repeat=action_repeat,
    )


def test_a_camera_env_gives_stacked_uint8_frames_oldest_first():
    env = camera_env()
    specs = loader.env_specs(env)
    assert specs.is_image and specs.frame_stack == 3
    assert specs.observation.shape.as_list() == [16, 16, 9] and specs.frame_shape == (16, 16, 3)
    first = env.reset().observation
    assert first.dtype == np.uint8
    assert all(np.array_equal(first[..., :3], first[..., i : i + 3]) for i in (3, 6))
    second = env.step(np.ones(2, np.float32)).observation
    assert np.array_equal(second[..., :6], first[..., 3:])  # shifted by one frame


def test_action_repeat_sums_rewards_and_stops_at_the_episode_end():
    plain, repeated = camera_env(seed=3), camera_env(seed=3, action_repeat=3)
    plain.reset(), repeated.reset()
    action = np.full(2, 0.5, np.float32)
    rewards = [plain.step(action).reward for _ in range(3)]
    step = repeated.step(action)
    assert step.reward == pytest.approx(sum(rewards), rel=1e-5)
    for _ in range(2):  # 7-step episodes: steps 4-6, then 7 ends it after one
        step = repeated.step(action)
    assert step.is_last()


@pytest.mark.parametrize("k", [1, 2])
def test_frames_written_once_come_back_as_the_transitions_the_env_gave(tmp_path, k):
    env = camera_env()
    specs = loader.env_specs(env)
    hparams = pixel_hparams(transitions_per_item=k)
    server = pixel_server(specs, hparams, tmp_path)
    client = reverb.Client(f"localhost:{server.port}")
    layout = replay.frame_layout(specs)
    steps = rollout(env, 20)  # episodes of 7, 7 and 6 steps
    writer = replay.FrameWriter(client, layout, k)
    for observation, action, reward, discount, next_observation, last in steps:
        writer.write_step(0, observation, action, reward, discount, next_observation)
        if last:
            writer.end_episode(0)
    assert writer.flush(timeout_ms=30_000)
    stored = 20 - (7 % k) * 2 - 6 % k  # each episode's leftover beyond whole items
    assert writer.transitions_written == stored
    wait_for_size(client, replay.REPLAY_TABLE, stored // k)
    by_reward = {float(s[2]): s for s in steps}
    dataset = replay.make_dataset(f"localhost:{server.port}", specs, batch_size=8)
    seen = 0
    for batch in dataset.take(4):
        for i in range(8):
            want = by_reward[float(batch.next_time_step.reward[i])]
            assert np.array_equal(batch.time_step.observation[i].numpy(), want[0])
            assert np.array_equal(batch.next_time_step.observation[i].numpy(), want[4])
            np.testing.assert_allclose(batch.action_step.action[i].numpy(), want[1])
            assert float(batch.next_time_step.discount[i]) == float(want[3])
            seen += 1
    assert seen == 32
    writer.close()
    server.stop()


def test_a_pixel_transition_is_stored_as_one_frame_not_two_stacks(tmp_path):
    specs = loader.env_specs(camera_env())
    signature = replay.transition_signature(specs, 1)
    frames = signature[replay.frames.FRAMES]
    assert frames.dtype == tf.uint8 and frames.shape.as_list() == [4, 16, 16, 3]
    assert replay.transitions_per_item_of(replay.transition_signature(specs, 4)) == 4


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"algorithm": "crossq"}, r"only --algorithm=sac trains"),
        ({"prioritized_replay": True}, r"without prioritized replay"),
        ({"normalize_observations": True}, r"drop --normalize_observations"),
    ],
)
def test_options_a_camera_run_does_not_follow_are_refused_in_one_line(overrides, message):
    hparams = config_lib.Hyperparams(**overrides)
    with pytest.raises(ConfigError, match=message) as error:
        observations.check_camera_options(hparams, CAMERA)
    assert "\n" not in str(error.value)


def test_the_launcher_says_a_camera_trains_from_pixels():
    sys.path.insert(0, EXAMPLES)
    try:
        _, said, camera = loader.env_sources.check_env_name(CAMERA, '{"pixels": true}')
    finally:
        sys.path.remove(EXAMPLES)
    assert camera == (32, 32, 3)
    assert said.startswith("observations image 32x32x3 uint8 (channels-last): trained from pixels")


def test_an_image_too_small_for_the_encoder_is_refused_in_one_line():
    check_image_size((15, 15, 3), CAMERA)  # the smallest the four convs leave a map for
    with pytest.raises(EnvError, match=r"observes 14x32 images, smaller than the 15x15") as error:
        check_image_size((14, 32, 3), CAMERA)
    assert "\n" not in str(error.value)
