"""The actor network evaluated in NumPy, for actors and evaluators.

TF-Agents' `collect_policy.action` costs about 1 ms per call on a 2-core CPU
while the same MLP in NumPy costs about 0.02 ms (see benchmarks/), and that
per-step overhead is what keeps the stock actor at a quarter of the raw
environment speed. `NumpyActorPolicy` computes exactly what
`ActorDistributionNetwork` + `TanhNormalProjectionNetwork` compute: ReLU layers,
a projection to (mean, log std), a Gaussian sample, tanh, then a rescale to
the action bounds. Its weights are the network's variables in their own order;
with observation normalization it first applies the learner's statistics as
`normalization.ObservationNormalizer.normalize` does.
"""

from __future__ import annotations

import dataclasses
from typing import Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from threadpoolctl import ThreadpoolController


def limit_blas_threads(num_threads: int = 1) -> bool:
    """Limits the BLAS thread pools of this process; False if NumPy loaded no BLAS.

    A batch-1 policy call is a matrix-vector product, which OpenBLAS splits
    across threads once a layer has more than ~9k weights (256x256 has 65k).
    Between env steps those threads fall asleep, and waking them costs 100-160
    us per call on 2 cores, against ~35 us for the whole call on one thread.
    Actors and evaluators call this once; it affects every NumPy matmul of the
    process (TensorFlow uses its own thread pools). threadpoolctl finds the
    BLAS libraries loaded so far (OpenBLAS, MKL or BLIS) and keeps the limit
    until the process ends.
    """
    blas = ThreadpoolController().select(user_api="blas")
    if not blas.lib_controllers:
        return False
    blas.limit(limits=num_threads)
    return True


@dataclasses.dataclass(frozen=True)
class ObservationNormalization:
    """The learner's observation statistics, applied as clip((obs - mean) / std)."""

    mean: np.ndarray
    std: np.ndarray
    clip: float

    @classmethod
    def identity(cls, observation_shape: Sequence[int]) -> ObservationNormalization:
        """What a learner without normalization sends: no change (clip = inf)."""
        shape = tuple(observation_shape)
        return cls(np.zeros(shape, np.float32), np.ones(shape, np.float32), float("inf"))

    @property
    def enabled(self) -> bool:
        return bool(np.isfinite(self.clip))

    def apply(self, observations: np.ndarray) -> np.ndarray:
        """Normalized float32 observations [B, obs_size] (a new array)."""
        x = np.asarray(observations, np.float32).reshape(len(observations), -1)
        x = (x - self.mean.reshape(-1)) / self.std.reshape(-1)
        np.clip(x, -self.clip, self.clip, out=x)
        return x


def acting_weight_shapes(
    observation_size: int, action_size: int, hidden_sizes: Sequence[int]
) -> List[Tuple[int, ...]]:
    """The shapes of the acting weights `NumpyActorPolicy.set_weights` takes, in order.

    A (kernel, bias) pair per hidden layer, then the projection to the mean and
    pre-transform std of every action dimension: the layout of TF-Agents'
    ActorDistributionNetwork's variables, which every learner's acting weights
    follow (CrossQ folds its BatchRenorm layers into it). The variable container's
    signature is built from these, without building a network.
    """
    sizes = [int(observation_size), *(int(units) for units in hidden_sizes)]
    shapes: List[Tuple[int, ...]] = []
    for fan_in, fan_out in zip(sizes, sizes[1:] + [2 * int(action_size)]):
        shapes += [(fan_in, fan_out), (fan_out,)]
    return shapes


class NumpyActorPolicy:
    """Batched SAC actor: `action(obs[B, ...]) -> actions[B, action_dim]`."""

    def __init__(
        self,
        action_minimum: np.ndarray,
        action_maximum: np.ndarray,
        action_shape: Sequence[int],
        weights: Optional[List[np.ndarray]] = None,
        seed: Optional[int] = None,
        log_std_range: Optional[Tuple[float, float]] = None,
    ):
        """log_std_range: bounds the log std is clipped to before exp (the network's
        std_clip_transform; Hyperparams.clip_policy_log_std), None: unclipped."""
        low = np.broadcast_to(np.asarray(action_minimum, np.float32), action_shape)
        high = np.broadcast_to(np.asarray(action_maximum, np.float32), action_shape)
        self._action_shape = tuple(action_shape)
        self._action_dim = int(np.prod(action_shape))
        self._center = ((high + low) / 2.0).reshape(-1)
        self._magnitude = ((high - low) / 2.0).reshape(-1)
        self._low = low.reshape(-1)
        self._high = high.reshape(-1)
        self._rng = np.random.default_rng(seed)
        self._log_std_range = log_std_range
        self._layers: List[tuple] = []
        self._normalization: Optional[ObservationNormalization] = None
        if weights is not None:
            self.set_weights(weights)

    @property
    def has_weights(self) -> bool:
        return bool(self._layers)

    def set_weights(
        self,
        weights: Sequence[np.ndarray],
        normalization: Optional[ObservationNormalization] = None,
    ) -> None:
        """Takes (kernel, bias) pairs, hidden layers first, projection last, and the
        observation statistics the weights were trained with (None: raw observations)."""
        if len(weights) < 2 or len(weights) % 2:
            raise ValueError(
                f"Expected (kernel, bias) pairs of the actor network, got {len(weights)} arrays."
            )
        pairs = [
            (np.asarray(weights[i], np.float32), np.asarray(weights[i + 1], np.float32))
            for i in range(0, len(weights), 2)
        ]
        out_dim = pairs[-1][0].shape[1]
        if out_dim != 2 * self._action_dim:
            raise ValueError(
                f"Projection layer has {out_dim} outputs; expected 2 * action_dim = "
                f"{2 * self._action_dim}. The weights belong to another action spec."
            )
        if normalization is not None and normalization.mean.size != pairs[0][0].shape[0]:
            raise ValueError(
                f"Observation statistics have {normalization.mean.size} elements; the first "
                f"layer takes {pairs[0][0].shape[0]} inputs."
            )
        self._layers = pairs
        self._normalization = normalization if normalization and normalization.enabled else None

    def distribution_params(self, observations: np.ndarray) -> tuple:
        """Pre-tanh Gaussian (mean, std) for a batch of observations."""
        mean, log_std = self._forward(observations)
        return mean, np.exp(log_std)

    def _forward(self, observations: np.ndarray) -> tuple:
        """(mean, log std) of the projection layer's output, log std clipped if asked."""
        if self._normalization is not None:
            x = self._normalization.apply(observations)
        else:
            x = np.asarray(observations, np.float32).reshape(len(observations), -1)
        for kernel, bias in self._layers[:-1]:
            x = x @ kernel
            x += bias
            np.maximum(x, 0.0, out=x)
        kernel, bias = self._layers[-1]
        out = x @ kernel
        out += bias
        log_std = out[:, self._action_dim :]
        if self._log_std_range is not None:
            np.clip(log_std, *self._log_std_range, out=log_std)
        return out[:, : self._action_dim], log_std

    def action(self, observations: np.ndarray, greedy: bool = False) -> np.ndarray:
        """Samples (or, with greedy=True, takes the mode of) squashed actions."""
        if not self._layers:
            return self.random_action(batch_size(observations))
        mean, log_std = self._forward(observations)
        if greedy:
            z = np.tanh(mean)
        else:
            z = self._rng.standard_normal(mean.shape, np.float32)
            z *= np.exp(log_std)
            z += mean
            np.tanh(z, out=z)
        z *= self._magnitude
        z += self._center
        # tanh can round to exactly +-1 in float32; keep actions inside the spec.
        np.maximum(z, self._low, out=z)
        np.minimum(z, self._high, out=z)
        return z.reshape((len(z),) + self._action_shape)

    def random_action(self, batch_size: int) -> np.ndarray:
        """Uniform actions in the bounds, the initial-collect policy."""
        u = self._rng.uniform(self._low, self._high, size=(batch_size, self._action_dim))
        return u.astype(np.float32).reshape((batch_size,) + self._action_shape)


def batch_size(observations: Any) -> int:
    """Observations in a batch: an array's first dimension, or a dict's arrays' (a
    camera and its state, envs/observations.py)."""
    if isinstance(observations, Mapping):
        return len(next(iter(observations.values())))
    return len(observations)


def add_batch(observation: Any) -> Any:
    """One env's observation as a batch of one (each array of a dict, too)."""
    if isinstance(observation, Mapping):
        return {key: np.asarray(value)[None] for key, value in observation.items()}
    return np.asarray(observation)[None]
