"""The tensor specs of an environment: the source of every signature and network."""

from __future__ import annotations

import dataclasses

import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts


@dataclasses.dataclass(frozen=True)
class EnvSpecs:
    """Tensor specs of one environment, the source of every signature."""

    observation: tensor_spec.TensorSpec
    action: tensor_spec.BoundedTensorSpec
    time_step: ts.TimeStep
    # Frames stacked along the channels of an image observation (envs/pixels.py).
    frame_stack: int = 1

    @property
    def is_image(self) -> bool:
        """Whether the observation is a uint8 (H, W, C) image: the pixel path."""
        shape = self.observation.shape
        return shape.rank == 3 and self.observation.dtype == tf.uint8

    @property
    def frame_shape(self) -> tuple:
        """(H, W, C) of one frame of an image observation."""
        height, width, channels = self.observation.shape.as_list()
        return (height, width, channels // self.frame_stack)
