"""The tensor specs of an environment: the source of every signature and network."""

from __future__ import annotations

import dataclasses

from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts


@dataclasses.dataclass(frozen=True)
class EnvSpecs:
    """Tensor specs of one environment, the source of every signature."""

    observation: tensor_spec.TensorSpec
    action: tensor_spec.BoundedTensorSpec
    time_step: ts.TimeStep
