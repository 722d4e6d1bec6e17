"""Actions on [-1, 1]: an env's Box actions rescaled, as SB3's policies and Acme's
canonical action spec act (`Hyperparams.rescale_actions`).

SAC squashes its Gaussian with tanh and the policy's bounds are the action spec's.
With the env's own bounds (Pusher-v5: [-2, 2]) the critics see actions on that
scale, and the log-probabilities (so the entropy target -dim(A) and the entropy
bonus in the critics' target) are measured there, not on [-1, 1] as in SB3. With
`UnitActions` every job (actors, learner, evaluator) sees the [-1, 1] spec and only
the env's step maps an action to its bounds; the exported policies act in the
env's own bounds again (`algorithm/env_units.py`), so a SavedModel fits the env
as it is. An env whose bounds already are [-1, 1] is left as it is.
"""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np
from tf_agents.environments import py_environment, wrappers
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts


def is_bounded(spec: Any) -> bool:
    """Whether a spec has finite minimum and maximum in every dimension."""
    minimum, maximum = getattr(spec, "minimum", None), getattr(spec, "maximum", None)
    if minimum is None or maximum is None:
        return False
    return bool(np.all(np.isfinite(minimum)) and np.all(np.isfinite(maximum)))


def needs_rescale(spec: Any) -> bool:
    """A bounded float action spec other than [-1, 1] (anything else is left alone:
    an unbounded or discrete one is refused later, by env_specs, in its own words)."""
    if not is_bounded(spec) or not np.issubdtype(spec.dtype, np.floating):
        return False
    low, high = np.broadcast_to(spec.minimum, spec.shape), np.broadcast_to(spec.maximum, spec.shape)
    if max(np.max(np.abs(low)), np.max(np.abs(high))) >= np.finfo(spec.dtype).max:
        return False  # an infinite bound, which a BoundedArraySpec stores as the largest float
    return not (np.all(low == -1.0) and np.all(high == 1.0))


def center_and_half_range(spec: Any) -> Tuple[np.ndarray, np.ndarray]:
    """(center, half range) of a bounded array or tensor spec, per dimension, in its
    dtype: the env's action is center + half_range x the [-1, 1] action."""
    shape, dtype = tuple(spec.shape), getattr(spec.dtype, "as_numpy_dtype", spec.dtype)
    low = np.broadcast_to(np.asarray(spec.minimum, np.float64), shape)
    high = np.broadcast_to(np.asarray(spec.maximum, np.float64), shape)
    return ((high + low) / 2).astype(dtype), ((high - low) / 2).astype(dtype)


def unit_spec(spec: Any, name: str = "action") -> array_spec.BoundedArraySpec:
    """The [-1, 1] spec of `spec`'s shape and dtype."""
    return array_spec.BoundedArraySpec(spec.shape, spec.dtype, -1.0, 1.0, name=name)


class UnitActions(wrappers.PyEnvironmentBaseWrapper):
    """An env acting on [-1, 1]: each action is mapped to the env's own bounds.

    `env_action_spec` is the wrapped env's spec (read through the wrappers above it,
    which forward attributes). Actions outside [-1, 1] are clipped first, as the
    policies' spec says they never are."""

    def __init__(self, env: py_environment.PyEnvironment):
        super().__init__(env)
        self.env_action_spec = env.action_spec()
        self._center, self._half_range = center_and_half_range(self.env_action_spec)
        self._spec = unit_spec(self.env_action_spec, self.env_action_spec.name or "action")

    def action_spec(self) -> array_spec.BoundedArraySpec:
        return self._spec

    def _step(self, action: np.ndarray) -> ts.TimeStep:
        unit = np.clip(np.asarray(action, self._spec.dtype), -1.0, 1.0)
        return self._env.step(self._center + self._half_range * unit)
