"""A DeepMind Control Suite task from pixels (DrQ's and DrQ-v2's benchmark), as a
Gymnasium env whose observation is the rendered frame.

    pip install dm-control==1.0.52   # beside the pinned stack (see docs/own-env.md)
    cd examples && MUJOCO_GL=egl sac-launch --env_name=dmc_pixels:make_env \
        --env_kwargs='{"domain": "cheetah", "task": "run", "action_repeat": 4}' \
        --initial_alpha=0.1

The action repeat happens here, not with --action_repeat: the physics steps R
times and the camera renders once, where the generic wrapper would render every
step. Rewards are summed over the repeat; the suite's 1000-step time limit ends an
episode as a truncation (the critic bootstraps). Step counts of the run are
policy steps: multiply by R for the papers' env steps (frames).
"""

from __future__ import annotations

import os
from typing import Optional

import gymnasium
import numpy as np

# DrQ's cameras: 2 for the quadruped, 0 for the rest.
_CAMERAS = {"quadruped": 2}


class DmcPixels(gymnasium.Env):
    """`domain`-`task` of dm_control's suite, observed as a size x size RGB frame."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self,
        domain: str = "cheetah",
        task: str = "run",
        size: int = 84,
        action_repeat: int = 1,
        render_mode: Optional[str] = None,
    ):
        os.environ.setdefault("MUJOCO_GL", "egl")
        from dm_control import suite  # optional: only this example needs it

        if action_repeat < 1:
            raise ValueError(f"action_repeat must be >= 1, got {action_repeat}.")
        self._env = suite.load(domain, task)
        self._size, self._repeat = int(size), int(action_repeat)
        self._camera = _CAMERAS.get(domain, 0)
        self.render_mode = render_mode
        spec = self._env.action_spec()
        self.action_space = gymnasium.spaces.Box(
            spec.minimum.astype(np.float32), spec.maximum.astype(np.float32), dtype=np.float32
        )
        self.observation_space = gymnasium.spaces.Box(
            0, 255, (self._size, self._size, 3), dtype=np.uint8
        )

    def _frame(self) -> np.ndarray:
        return self._env.physics.render(self._size, self._size, camera_id=self._camera)

    def reset(self, *, seed: Optional[int] = None, options=None):
        super().reset(seed=seed)
        if seed is not None:  # the run's seed (sac_distributed seeds the first reset)
            self._env.task.random.seed(seed)
        self._env.reset()
        return self._frame(), {}

    def step(self, action):
        reward, time_step = 0.0, None
        for _ in range(self._repeat):
            time_step = self._env.step(action)
            reward += time_step.reward or 0.0
            if time_step.last():
                break
        terminated = time_step.last() and time_step.discount == 0.0
        truncated = time_step.last() and not terminated
        return self._frame(), reward, terminated, truncated, {}

    def render(self):
        return self._frame()

    def close(self):
        self._env.close()


def make_env(**kwargs) -> gymnasium.Env:
    """The factory sac_distributed calls (`--env_kwargs` are DmcPixels' arguments)."""
    return DmcPixels(**kwargs)
