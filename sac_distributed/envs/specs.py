"""The tensor specs of an environment: the source of every signature and network."""

from __future__ import annotations

import dataclasses
from typing import Any, List, Optional, Tuple

import tensorflow as tf
from tf_agents.trajectories import time_step as ts

from sac_distributed.envs.observations import PIXELS, STATE


@dataclasses.dataclass(frozen=True)
class EnvSpecs:
    """Tensor specs of one environment, the source of every signature.

    `observation` is one TensorSpec, or for a camera with a state (envs/observations.py)
    the dict {"pixels": uint8 (H, W, C), "state": float32 [D]}.
    """

    observation: Any
    action: Any  # a BoundedTensorSpec
    time_step: ts.TimeStep
    # Frames stacked along the channels of an image observation (envs/pixels.py).
    frame_stack: int = 1
    # Several cameras side by side in each frame: the channels of each, in order
    # (envs/observations.py); () for one camera or none.
    cameras: Tuple[int, ...] = ()
    # The env's own action spec (BoundedTensorSpec) where the jobs act on [-1, 1]
    # (Hyperparams.rescale_actions, envs/actions.py), else None: `action` is the env's.
    env_action: Any = None

    @property
    def image(self) -> Optional[tf.TensorSpec]:
        """The (stacked) image spec of a camera observation, else None."""
        spec = self.observation
        if isinstance(spec, dict):
            spec = spec.get(PIXELS)
        if spec is None or tf.nest.is_nested(spec):
            return None
        return spec if spec.shape.rank == 3 and spec.dtype == tf.uint8 else None

    @property
    def is_image(self) -> bool:
        """Whether the observation is a camera (a uint8 (H, W, C) image, with or
        without a state vector beside it): the pixel path."""
        return self.image is not None

    @property
    def state_size(self) -> int:
        """Floats of a camera observation's state vector (0: none, or not a camera)."""
        if not isinstance(self.observation, dict) or STATE not in self.observation:
            return 0
        return int(self.observation[STATE].shape.num_elements())

    @property
    def frame_shape(self) -> tuple:
        """(H, W, C) of one frame of an image observation."""
        height, width, channels = self.image.shape.as_list()
        return (height, width, channels // self.frame_stack)

    @property
    def camera_count(self) -> int:
        """Cameras in each frame of an image observation (each has its own encoder)."""
        return max(1, len(self.cameras))

    def camera_channel_indices(self) -> List[List[int]]:
        """For each camera, its channels of the stacked pixels, oldest frame first
        (a frame's channels are its cameras' side by side)."""
        channels = self.frame_shape[-1]
        split = self.cameras or (channels,)
        if sum(split) != channels:
            raise ValueError(f"Cameras of {split} channels do not make frames of {channels}.")
        starts = [sum(split[:i]) for i in range(len(split))]
        return [
            [f * channels + start + c for f in range(self.frame_stack) for c in range(count)]
            for start, count in zip(starts, split)
        ]
