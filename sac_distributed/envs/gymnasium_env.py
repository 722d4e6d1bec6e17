"""A Gymnasium `Env` as a TF-Agents `PyEnvironment`, and a step checker for any env.

TF-Agents 0.19 has no Gymnasium suite, and its `GymWrapper` speaks gym's
4-tuple API. Gymnasium's `step` returns (obs, reward, terminated, truncated,
info) and seeds through `reset(seed=)`; the wrapper maps them onto TF-Agents'
time steps the way SAC needs them:

- `terminated` (the state is terminal): a LAST step with discount 0;
- `truncated` (a time limit, or the env gave up): a LAST step with discount 1,
  so the critic bootstraps from the last observation;
- `seed(s)` makes the next reset `reset(seed=s)` (and seeds the action space),
  so a seeded run repeats; later resets continue the env's own generator.

Observations are float32, as the replay stores them (MuJoCo's are float64),
except a camera: an observation that is one uint8 image stays uint8, turned
channels-last if its channels come first (`observations.image_layout`), for the
pixel path (pixels.py), and a Dict or Tuple holding such images becomes
{"pixels": the images side by side, "state": its other parts flattened}
(`observations.split_camera`; `camera_channels` says which channels are whose).
Any other Dict, Tuple, Discrete, MultiDiscrete or MultiBinary observation is
flattened into one float32 vector by Gymnasium's own `spaces.utils.flatten` (the
parts and their order: `observations`).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import numpy as np
from tf_agents.environments import py_environment, wrappers
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

from sac_distributed.envs import observations
from sac_distributed.errors import EnvError


class GymnasiumEnvironment(py_environment.PyEnvironment):
    """One Gymnasium env (Box observations and actions) as a PyEnvironment."""

    def __init__(self, env: Any, name: str = ""):
        super().__init__(handle_auto_reset=True)
        self._env = env
        self._name = name or str(getattr(env, "spec", None) and env.spec.id)
        space = env.observation_space
        self._flatten: Optional[Callable[[Any], Any]] = None
        self._image, self._channels_first = False, False
        if observations.is_flat_box(space):
            self._image, self._channels_first = observations.image_layout(
                tuple(space.shape), space.dtype
            )
        parts = None if self._image else observations.observation_parts(space, self._name)
        # A Dict or Tuple with cameras: observed as {"pixels", "state"} (split_camera).
        self._camera = bool(parts) and observations.is_camera(parts)
        # The channels of each camera in one frame (pixels.CAMERAS_ATTRIBUTE); () is one.
        cameras = observations.camera_channels(parts) if self._camera else ()
        self.camera_channels = cameras if len(cameras) > 1 else ()
        if self._image:
            self._observation_spec = _image_spec(tuple(space.shape), self._channels_first)
        elif self._camera:
            self._flatten = observations.split_camera(space)
            self._observation_spec = _camera_specs(parts)
        else:
            if not observations.is_flat_box(space):
                from gymnasium.spaces import utils

                self._flatten = functools.partial(utils.flatten, space)
                space = utils.flatten_space(space)
            self._observation_spec = _box_spec(space, np.float32, "observation")
        self._action_spec = _box_spec(env.action_space, env.action_space.dtype, "action")
        self._seed: Optional[int] = None
        self._info: Any = {}

    def observation_spec(self) -> Any:
        return self._observation_spec

    def action_spec(self) -> array_spec.BoundedArraySpec:
        return self._action_spec

    def seed(self, seed: Optional[int]) -> None:
        """The next reset starts from `seed` (Gymnasium seeds through `reset`)."""
        self._seed = None if seed is None else int(seed)
        if seed is not None:
            self._env.action_space.seed(int(seed))

    def get_info(self) -> Any:
        return self._info

    def render(self, mode: str = "rgb_array") -> Optional[np.ndarray]:
        if mode != "rgb_array":
            raise ValueError(f"Only rgb_array frames are rendered here, not {mode!r}.")
        return self._env.render()

    def close(self) -> None:
        self._env.close()

    def _reset(self) -> ts.TimeStep:
        observation, self._info = self._env.reset(seed=self._seed)
        self._seed = None
        return ts.restart(self._observation(observation))

    def _step(self, action: np.ndarray) -> ts.TimeStep:
        observation, reward, terminated, truncated, self._info = self._env.step(action)
        observation, reward = self._observation(observation), np.float32(reward)
        if terminated:
            return ts.termination(observation, reward)
        if truncated:
            return ts.truncation(observation, reward, discount=np.float32(1.0))
        return ts.transition(observation, reward, discount=np.float32(1.0))

    def _observation(self, observation: Any) -> np.ndarray:
        if self._image:
            image = np.asarray(observation, dtype=np.uint8)
            return (
                np.ascontiguousarray(np.moveaxis(image, 0, -1)) if self._channels_first else image
            )
        if self._flatten is not None:
            observation = self._flatten(observation)
        if self._camera:  # split_camera's dict, or a Dict's images alone
            return observation
        return np.asarray(observation, dtype=np.float32)


class CheckedEnvironment(wrappers.PyEnvironmentBaseWrapper):
    """Names the env and the step when an env raises or returns a wrong observation.

    A user's simulator that fails mid-run should say which env and which step,
    not leave a stack trace from deep inside the replay writer. Non-finite
    rewards and observations are left to the actor, which drops such steps.
    """

    def __init__(self, env: py_environment.PyEnvironment, name: str):
        super().__init__(env)
        self._name = name
        shape = getattr(env.observation_spec(), "shape", None)  # None: nested (refused later)
        self._shape = None if shape is None else tuple(shape)
        self._env_steps = 0

    def _reset(self) -> ts.TimeStep:
        return self._checked(self._env.reset, "reset")

    def _step(self, action: np.ndarray) -> ts.TimeStep:
        self._env_steps += 1
        return self._checked(lambda: self._env.step(action), f"step {self._env_steps}")

    def _checked(self, call: Any, what: str) -> ts.TimeStep:
        try:
            time_step = call()
        except EnvError:
            raise
        except Exception as e:
            raise EnvError(
                f"{self._name} raised {type(e).__name__} at {what}: {e}. The run's replay and "
                "other jobs are unharmed; fix the env and restart this job."
            ) from e
        shape = np.shape(time_step.observation)
        if self._shape is not None and shape != self._shape:
            raise EnvError(
                f"{self._name} returned an observation of shape {shape} at {what}, but its "
                f"observation space has shape {self._shape}: make the env return what its "
                "space says."
            )
        return time_step


def _image_spec(shape: tuple, channels_first: bool) -> array_spec.BoundedArraySpec:
    """A uint8 image spec, channels-last."""
    if channels_first:
        shape = (shape[1], shape[2], shape[0])
    return array_spec.BoundedArraySpec(shape, np.uint8, minimum=0, maximum=255, name="observation")


def _camera_specs(parts) -> Any:
    """{"pixels": the cameras' spec, "state": float32[the other parts' size]}; the
    pixels' spec alone when nothing else is observed."""
    pixels = _image_spec(observations.camera_shape(parts), False)
    size = observations.state_size(parts)
    if not size:
        return pixels
    state = array_spec.ArraySpec((size,), np.float32, name=observations.STATE)
    return {observations.PIXELS: pixels, observations.STATE: state}


def _box_spec(space: Any, dtype: Any, name: str) -> array_spec.BoundedArraySpec:
    low = np.asarray(space.low, dtype=dtype)
    high = np.asarray(space.high, dtype=dtype)
    if low.size and np.all(low == low.flat[0]) and np.all(high == high.flat[0]):
        low, high = low.flat[0], high.flat[0]  # one bound for all, as TF-Agents' GymWrapper
    return array_spec.BoundedArraySpec(space.shape, dtype, minimum=low, maximum=high, name=name)
