"""Camera observations: the image an env shows, stacked over the last frames, and
actions repeated over several env steps.

An env whose observation space is one uint8 image (H, W, C), or (C, H, W) with
the channels first (observations.image_layout's rule), trains from pixels: the
loader keeps its observations uint8 and channels-last, and `FrameStack` makes each
observation the last `frame_stack` frames concatenated along the channels
(oldest first), as DrQ and DrQ-v2 do, so a policy sees motion. Right after a
reset the stack is the first frame repeated. The replay stores each frame once
(replay/frames.py) and rebuilds the stacks when it samples, so the stack costs
no replay memory.

`ActionRepeat` plays each policy action for `action_repeat` env steps, summing
their rewards (and multiplying their discounts): the pixel suites' way to make
a rendered step worth more (DrQ: 4 on cheetah-run, 2 on walker-walk, 8 on
cartpole). It works on any env; step counts everywhere in a run are policy
steps, so a run of N steps with action repeat R plays N x R env frames.
"""

from __future__ import annotations

import collections
from typing import Any, Deque, Mapping, Sequence, Tuple

import numpy as np
import tensorflow as tf
from tf_agents.environments import py_environment, wrappers
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

from sac_distributed.envs.observations import PIXELS, STATE

# What the learner's encoder takes: frames stacked along the channel axis.
FRAMES_ATTRIBUTE = "frames_per_observation"
# Several cameras side by side in one frame: the channels of each, in order.
CAMERAS_ATTRIBUTE = "camera_channels"


def is_image_spec(shape: Tuple[int, ...], dtype) -> bool:
    """True for what trains from pixels: a uint8 (H, W, C) observation."""
    return len(shape) == 3 and np.dtype(dtype) == np.uint8


def camera_image(spec: Any) -> Any:
    """The image spec of a camera observation spec (one image, or the gymnasium
    loader's {"pixels": image, "state": vector}), else None. Takes array or tensor specs."""
    if isinstance(spec, Mapping):
        if set(spec) - {PIXELS, STATE} or PIXELS not in spec:
            return None
        spec = spec[PIXELS]
    elif tf.nest.is_nested(spec):
        return None
    shape = tuple(spec.shape)
    dtype = spec.dtype.as_numpy_dtype if hasattr(spec.dtype, "as_numpy_dtype") else spec.dtype
    return spec if is_image_spec(shape, dtype) else None


def camera_pixels(observation: Any) -> np.ndarray:
    """The image of a camera observation (the whole of it, or its "pixels")."""
    return observation[PIXELS] if isinstance(observation, Mapping) else observation


def stack_camera(observations: Sequence[Any]) -> Any:
    """Camera observations of several envs as one batch: uint8 [B, H, W, C], or
    {"pixels": that, "state": float32 [B, D]}."""
    if isinstance(observations[0], Mapping):
        batch = {PIXELS: stack_camera([o[PIXELS] for o in observations])}
        if STATE in observations[0]:
            batch[STATE] = np.stack([np.asarray(o[STATE], np.float32) for o in observations])
        return batch
    return np.stack([np.asarray(o, np.uint8) for o in observations])


def camera_at(observations: Any, index: int) -> Any:
    """Env `index`'s observation of a `stack_camera` batch."""
    if isinstance(observations, Mapping):
        return {key: value[index] for key, value in observations.items()}
    return observations[index]


class FrameStack(wrappers.PyEnvironmentBaseWrapper):
    """Observations: the last `frame_stack` uint8 (H, W, C) frames, along the channels.

    The stacked observation is (H, W, frame_stack x C), the oldest frame first;
    after a reset every slot holds the reset frame. `frames_per_observation`
    (read through any wrapper above this one) tells the replay how many frames
    one observation holds.
    """

    def __init__(self, env: py_environment.PyEnvironment, frame_stack: int):
        super().__init__(env)
        spec = env.observation_spec()
        image = camera_image(spec)
        if image is None:
            raise ValueError(f"FrameStack takes uint8 (H, W, C) observations, not {spec}.")
        self.frames_per_observation = int(frame_stack)
        height, width, channels = image.shape
        stacked = array_spec.BoundedArraySpec(
            (height, width, channels * self.frames_per_observation),
            np.uint8,
            minimum=0,
            maximum=255,
            name=PIXELS if isinstance(spec, Mapping) else "observation",
        )
        self._spec = {**spec, PIXELS: stacked} if isinstance(spec, Mapping) else stacked
        self._frames: Deque[np.ndarray] = collections.deque(maxlen=self.frames_per_observation)

    def observation_spec(self) -> Any:
        return self._spec

    def _reset(self) -> ts.TimeStep:
        time_step = self._env.reset()
        self._restart(time_step.observation)
        return time_step._replace(observation=self._stacked(time_step.observation))

    def _step(self, action: np.ndarray) -> ts.TimeStep:
        time_step = self._env.step(action)
        if time_step.is_first():  # the inner env reset itself (auto-reset)
            self._restart(time_step.observation)
        else:
            self._frames.append(np.asarray(camera_pixels(time_step.observation), np.uint8))
        return time_step._replace(observation=self._stacked(time_step.observation))

    def _restart(self, observation: Any) -> None:
        frame = np.asarray(camera_pixels(observation), np.uint8)
        self._frames.clear()
        for _ in range(self.frames_per_observation):
            self._frames.append(frame)

    def _stacked(self, observation: Any) -> Any:
        stacked = np.concatenate(self._frames, axis=-1)
        if isinstance(observation, Mapping):
            return {**observation, PIXELS: stacked}
        return stacked


class ActionRepeat(wrappers.PyEnvironmentBaseWrapper):
    """Each action played for `action_repeat` env steps (fewer when the episode ends):
    rewards summed, discounts multiplied, the last observation returned."""

    def __init__(self, env: py_environment.PyEnvironment, action_repeat: int):
        super().__init__(env)
        self.action_repeat = int(action_repeat)

    def _reset(self) -> ts.TimeStep:
        return self._env.reset()

    def _step(self, action: np.ndarray) -> ts.TimeStep:
        reward = 0.0
        discount = 1.0
        time_step = None
        for _ in range(self.action_repeat):
            time_step = self._env.step(action)
            if time_step.is_first():  # an auto-reset step carries no reward
                return time_step
            reward += float(time_step.reward)
            discount *= float(time_step.discount)
            if time_step.is_last():
                break
        dtype = np.asarray(time_step.reward).dtype
        return time_step._replace(
            reward=np.asarray(reward, dtype), discount=np.asarray(discount, np.float32)
        )


def frames_per_observation(env: py_environment.PyEnvironment) -> int:
    """How many frames one observation of `env` stacks (1 for a single frame or a vector)."""
    return int(getattr(env, FRAMES_ATTRIBUTE, 1))


def camera_channels(env: py_environment.PyEnvironment) -> Tuple[int, ...]:
    """The channels of each camera in one frame of `env`'s pixels when it observes
    several cameras side by side, else () (one camera, or none)."""
    return tuple(int(c) for c in (getattr(env, CAMERAS_ATTRIBUTE, ()) or ()))
