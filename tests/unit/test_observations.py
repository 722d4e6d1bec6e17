"""Observation spaces read part by part (envs/observations.py) and flattened by the
loader: Box, one-hot parts, Dict and Tuple (nested), images named; refusals named."""

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.spaces import utils

from sac_distributed.envs import loader as env_loader
from sac_distributed.envs import observations
from sac_distributed.envs import sources as env_sources
from sac_distributed.errors import EnvError


def _parts(space):
    return observations.observation_parts(space, "X")


def test_a_box_is_one_vector_part():
    (part,) = _parts(spaces.Box(-1, 1, (3, 2)))
    assert (part.path, part.kind, part.shape, part.size) == ("", observations.VECTOR, (3, 2), 6)
    assert observations.is_one_vector([part])


@pytest.mark.parametrize(
    "shape,channels_first",
    [((84, 84, 3), False), ((3, 84, 84), True), ((84, 84, 9), False), ((3, 3, 3), False)],
)
def test_a_uint8_box_of_rank_3_is_an_image_and_says_its_channel_axis(shape, channels_first):
    (part,) = _parts(spaces.Box(0, 255, shape, np.uint8))
    assert (part.kind, part.channels_first) == (observations.IMAGE, channels_first)
    assert not observations.is_one_vector([part])


def test_a_float_box_of_rank_3_is_no_image():
    (part,) = _parts(spaces.Box(0, 1, (8, 8, 3), np.float32))
    assert part.kind == observations.VECTOR


def test_dict_and_tuple_parts_come_in_the_flattening_order_with_their_sizes():
    space = spaces.Dict(
        {
            "z": spaces.Box(-1, 1, (2,)),
            "arm": spaces.Dict({"joints": spaces.Box(-1, 1, (7,)), "grip": spaces.MultiBinary(2)}),
            "mode": spaces.Tuple((spaces.Discrete(3), spaces.MultiDiscrete([2, 4]))),
        }
    )
    parts = _parts(space)
    assert [(p.path, p.size) for p in parts] == [
        ("arm/grip", 2),
        ("arm/joints", 7),
        ("mode/0", 3),
        ("mode/1", 6),
        ("z", 2),
    ]
    assert sum(p.size for p in parts) == utils.flatdim(space)


def test_the_description_names_every_part_and_that_images_in_a_dict_are_raw_pixels():
    space = spaces.Dict(
        {"camera": spaces.Box(0, 255, (3, 8, 8), np.uint8), "mode": spaces.Discrete(3)}
    )
    text = observations.describe_parts(_parts(space))
    assert text.startswith("observations (camera: image 3x8x8 uint8 (channels-first), ")
    assert "mode: Discrete as 3 one-hot floats" in text
    assert "one flat vector of 195 floats" in text
    assert "the conv encoder takes images of 15x15 or more" in text
    assert "no convolutional" not in observations.describe_parts(_parts(spaces.Discrete(4)))


@pytest.mark.parametrize(
    "space,names",
    [
        (spaces.Text(8), "its observations are a Text space"),
        (spaces.Dict({"a": spaces.Dict({"b": spaces.Text(4)})}), "part 'a/b' is a Text"),
        (spaces.Tuple((spaces.Box(0, 1), spaces.Sequence(spaces.Box(0, 1)))), "'1' is a Sequence"),
        (spaces.Graph(spaces.Box(0, 1), None), "a Graph space"),
    ],
)
def test_a_part_with_no_fixed_size_vector_is_refused_in_one_line_naming_it(space, names):
    with pytest.raises(EnvError, match="no fixed-size vector") as refused:
        _parts(space)
    message = str(refused.value)
    assert names in message and "\n" not in message and message.startswith("X: ")


def test_an_empty_dict_is_refused():
    with pytest.raises(EnvError, match="empty observation space"):
        _parts(spaces.Dict({}))


def test_the_loader_flattens_a_dict_observation_as_gymnasium_does():
    env = env_loader.load_env("user_envs:make_dict_goal", seed=3, env_kwargs={"camera": True})
    raw = env_sources.make_raw_env(
        env_sources.resolve("user_envs:make_dict_goal"), {"camera": True}
    )
    space = raw.observation_space
    spec = env.observation_spec()
    assert spec.shape == (utils.flatdim(space),) == (1 + 64 + 1 + 3,)
    assert spec.dtype == np.float32
    first = env.reset().observation
    expected, _ = raw.reset(seed=3)
    np.testing.assert_array_equal(first, utils.flatten(space, expected).astype(np.float32))
    for _ in range(3):
        time_step = env.step(np.array([0.5], np.float32))
        assert time_step.observation.shape == spec.shape
    specs = env_loader.env_specs(env, "user_envs:make_dict_goal")
    assert specs.observation.shape.as_list() == [69]


def test_check_env_name_says_how_non_vector_observations_are_taken():
    _, said, _ = env_sources.check_env_name("user_envs:make_dict_goal")
    assert said.startswith("observations (goal: float32[1], position: float32[1], velocity_sign")
    assert env_sources.check_env_name("Pendulum-v1")[1] is None


def test_a_gym_env_with_dict_observations_is_flattened_by_gym():
    env = env_loader.load_env("user_envs:make_gym_dict")
    assert env.observation_spec().shape == (5,)
    np.testing.assert_array_equal(env.reset().observation, [0, 0, 0, 0, 1])
