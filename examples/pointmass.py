"""A user's own environment: a point mass that must reach a goal (Gymnasium API).

Not registered anywhere: sac_distributed loads it from its factory,

    cd examples && sac-launch --env_name=pointmass:make_env --num_iterations=3000

or, seen through a camera (32x32 RGB frames of the mass and the goal instead of
their coordinates: the pixel path, a conv encoder on stacked frames),

    cd examples && sac-launch --env_name=pointmass:make_env --env_kwargs='{"pixels": true}'

(or from any folder with PYTHONPATH=/path/to/examples). With
`{"pixels": true, "velocity": true}` the observation is a Dict of the camera and
the mass's velocity, what a robot gives (a camera and its own sensors): the run
reads the encoder's features of the camera and the velocity beside them. With
`"wrist": true` as well, the Dict also holds a second camera that rides on the
mass, a grey close-up of the square around it stored channels-first (1, H, W):
each camera then has its own encoder. Keyword arguments of the factory come from
--env_kwargs, e.g. --env_kwargs='{"goal_radius": 0.05}'.

The mass sits in the square [-1, 1]^2 and is pushed by a force (the action,
each component in [-1, 1]). The observation is its position, its velocity and
the goal's position; the reward is minus the distance to the goal each step,
and the episode terminates (discount 0) when the mass is within `goal_radius`
of the goal, or is truncated by the time limit (the critic bootstraps then).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium
import numpy as np
from gymnasium import spaces


class PointMassEnv(gymnasium.Env):
    """A 2-D point mass with friction, pushed towards a random goal."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        goal_radius: float = 0.1,
        dt: float = 0.1,
        render_mode: Optional[str] = None,
        pixels: bool = False,
        image_size: int = 32,
        velocity: bool = False,
        wrist: bool = False,
    ):
        self.goal_radius = float(goal_radius)
        self.dt = float(dt)
        self.render_mode = render_mode
        self.pixels = bool(pixels)
        self.image_size = int(image_size)
        self.velocity = bool(velocity)
        self.wrist = bool(wrist)
        if self.velocity and not self.pixels:
            raise ValueError("velocity=True adds the velocity beside the camera: set pixels=True.")
        if self.wrist and not self.velocity:
            raise ValueError("wrist=True adds a camera to the Dict: set pixels and velocity True.")
        self.action_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        if self.pixels:  # what a camera above the square sees: (H, W, 3) uint8
            shape = (self.image_size, self.image_size, 3)
            self.observation_space = spaces.Box(0, 255, shape, dtype=np.uint8)
            if self.velocity:
                speed = spaces.Box(-2.0, 2.0, shape=(2,), dtype=np.float32)
                cameras = {"camera": self.observation_space, "velocity": speed}
                if self.wrist:  # channels-first grey, as some robot SDKs give
                    close_up = (1, self.image_size, self.image_size)
                    cameras["wrist"] = spaces.Box(0, 255, close_up, dtype=np.uint8)
                self.observation_space = spaces.Dict(cameras)
        else:
            high = np.array([1, 1, 2, 2, 1, 1], dtype=np.float32)
            self.observation_space = spaces.Box(-high, high, dtype=np.float32)
        self._position = np.zeros(2)
        self._velocity = np.zeros(2)
        self._goal = np.zeros(2)

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None
    ) -> Tuple[np.ndarray, Dict[str, Any]]:
        super().reset(seed=seed)  # seeds self.np_random on a seeded reset
        self._position = self.np_random.uniform(-0.9, 0.9, size=2)
        self._velocity = np.zeros(2)
        self._goal = self.np_random.uniform(-0.9, 0.9, size=2)
        return self._observation(), {}

    def step(self, action: np.ndarray):
        force = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        self._velocity = np.clip(0.9 * self._velocity + force * self.dt * 2.0, -2.0, 2.0)
        self._position = np.clip(self._position + self._velocity * self.dt, -1.0, 1.0)
        distance = float(np.linalg.norm(self._position - self._goal))
        terminated = distance < self.goal_radius
        reward = -distance + (10.0 if terminated else 0.0)
        return self._observation(), reward, terminated, False, {"distance": distance}

    def render(self) -> Optional[np.ndarray]:
        if self.render_mode != "rgb_array":
            return None
        return self._draw(64)

    def _draw(self, size: int) -> np.ndarray:
        """A size x size top view: white square, the goal green, the mass red."""
        frame = np.full((size, size, 3), 255, dtype=np.uint8)
        half = max(1, size // 32)  # a 3x3 dot at 32 pixels, 5x5 at 64
        for point, colour in ((self._goal, (0, 160, 0)), (self._position, (200, 0, 0))):
            x, y = ((point + 1.0) / 2.0 * (size - 1)).astype(int)
            frame[max(0, y - half) : y + half + 1, max(0, x - half) : x + half + 1] = colour
        return frame

    def _close_up(self, size: int) -> np.ndarray:
        """(1, size, size) grey: the quarter of the square centred on the mass, twice as
        near as the top view (the goal shows once within about 0.5 of the mass)."""
        view = self._draw(4 * size).mean(axis=-1).astype(np.uint8)
        padded = np.pad(view, size, constant_values=0)  # black beyond the square's edges
        x, y = ((self._position + 1.0) / 2.0 * (4 * size - 1)).astype(int) + size
        return padded[y - size : y + size : 2, x - size : x + size : 2][None]

    def _observation(self) -> Any:
        if self.pixels and self.velocity:
            speed = self._velocity.astype(np.float32)
            observation = {"camera": self._draw(self.image_size), "velocity": speed}
            if self.wrist:
                observation["wrist"] = self._close_up(self.image_size)
            return observation
        if self.pixels:
            return self._draw(self.image_size)
        return np.concatenate([self._position, self._velocity, self._goal]).astype(np.float32)


def make_env(max_episode_steps: int = 100, **kwargs: Any) -> gymnasium.Env:
    """The factory sac_distributed calls: the env with a time limit (truncation)."""
    return gymnasium.wrappers.TimeLimit(PointMassEnv(**kwargs), max_episode_steps)
