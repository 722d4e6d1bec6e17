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
from typing import Deque, Tuple

import numpy as np
from tf_agents.environments import py_environment, wrappers
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

# What the learner's encoder takes: frames stacked along the channel axis.
FRAMES_ATTRIBUTE = "frames_per_observation"


def is_image_spec(shape: Tuple[int, ...], dtype) -> bool:
    """True for what trains from pixels: a uint8 (H, W, C) observation."""
    return len(shape) == 3 and np.dtype(dtype) == np.uint8


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
        if not is_image_spec(tuple(spec.shape), spec.dtype):
            raise ValueError(f"FrameStack takes uint8 (H, W, C) observations, not {spec}.")
        self.frames_per_observation = int(frame_stack)
        height, width, channels = spec.shape
        self._spec = array_spec.BoundedArraySpec(
            (height, width, channels * self.frames_per_observation),
            np.uint8,
            minimum=0,
            maximum=255,
            name="observation",
        )
        self._frames: Deque[np.ndarray] = collections.deque(maxlen=self.frames_per_observation)

    def observation_spec(self) -> array_spec.BoundedArraySpec:
        return self._spec

    def _reset(self) -> ts.TimeStep:
        time_step = self._env.reset()
        frame = np.asarray(time_step.observation, np.uint8)
        for _ in range(self.frames_per_observation):
            self._frames.append(frame)
        return time_step._replace(observation=self._stacked())

    def _step(self, action: np.ndarray) -> ts.TimeStep:
        time_step = self._env.step(action)
        if time_step.is_first():  # the inner env reset itself (auto-reset)
            self._frames.clear()
            for _ in range(self.frames_per_observation):
                self._frames.append(np.asarray(time_step.observation, np.uint8))
        else:
            self._frames.append(np.asarray(time_step.observation, np.uint8))
        return time_step._replace(observation=self._stacked())

    def _stacked(self) -> np.ndarray:
        return np.concatenate(self._frames, axis=-1)


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
