"""A Gymnasium MuJoCo task seen through its camera: the rendered frame as the
observation, for the pixel path (a conv encoder on stacked frames).

    cd examples && MUJOCO_GL=egl sac-launch --env_name=mujoco_pixels:make_env \
        --env_kwargs='{"env_id": "HalfCheetah-v5", "size": 84}' --action_repeat=4

MuJoCo renders headless through EGL (Debian's libegl1 and a Mesa driver; on a
machine without a GPU, Mesa's llvmpipe) or OSMesa (`MUJOCO_GL=osmesa`, Debian's
libosmesa6). On CPUs this is the slow part: about 16 frames/s at 84x84 on the
2-core machines here (benchmarks/results/pixel_replay_bytes).
"""

from __future__ import annotations

import os

import gymnasium


def make_env(env_id: str = "HalfCheetah-v5", size: int = 84, **kwargs) -> gymnasium.Env:
    """`env_id` rendered at size x size RGB, the frame as its only observation."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    env = gymnasium.make(env_id, render_mode="rgb_array", width=size, height=size, **kwargs)
    return gymnasium.wrappers.AddRenderObservation(env, render_only=True)
