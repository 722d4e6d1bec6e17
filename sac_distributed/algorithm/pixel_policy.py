"""The pixel actor in NumPy: DrQ's conv encoder, then the SAC actor MLP.

The encoder (Kostrikov et al. 2020, DrQ; the same as SAC-AE's) takes uint8
(H, W, C) observations scaled to [0, 1]: a 3x3 conv with stride 2 and three 3x3
convs with stride 1, 32 filters each, ReLU, no padding; the flattened maps go
through a Dense to 50 features, LayerNorm and tanh. The learner trains it in
TensorFlow (sac/pixels.py); actors and the evaluator run it here, each conv as
im2col (a strided view of the input's 3x3 windows) and one matmul, which costs
about what a tf.function does per action on these CPUs and keeps actors free of
TensorFlow's per-call overhead (benchmarks/results/pixel_update_cost).

The acting weights are the encoder's, in `encoder_weight_shapes` order (one
encoder per camera where an observation holds several, camera by camera), then
the actor MLP's (kernel, bias) pairs on the 50 features of each camera, as
`policy.py` lays them out; the variable container's signature is built from
these shapes.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from sac_distributed.algorithm.policy import (
    NumpyActorPolicy,
    ObservationNormalization,
    acting_weight_shapes,
)
from sac_distributed.envs.observations import PIXELS, STATE

CONV_FILTERS = 32
CONV_KERNEL = 3
CONV_STRIDES = (2, 1, 1, 1)
FEATURES = 50
LAYER_NORM_EPSILON = 1e-3  # Keras' LayerNormalization default
# Arrays per encoder: (kernel, bias) per conv, the Dense's pair, LayerNorm's gamma, beta.
ENCODER_ARRAYS = 2 * len(CONV_STRIDES) + 4


def conv_output_size(size: int) -> int:
    """Height (or width) of the encoder's last feature map for an input of `size`."""
    for stride in CONV_STRIDES:
        size = (size - CONV_KERNEL) // stride + 1
    return size


def min_image_size() -> int:
    """The smallest height and width the encoder's convs leave a map for."""
    size = 1
    while conv_output_size(size) < 1:
        size += 1
    return size


def check_image_size(observation_shape: Sequence[int], env_name: str) -> None:
    """Refuses an image too small for the encoder's convs, in one line."""
    from sac_distributed.errors import EnvError

    height, width = (int(d) for d in observation_shape[:2])
    smallest = min_image_size()
    if min(height, width) < smallest:
        raise EnvError(
            f"{env_name} observes {height}x{width} images, smaller than the {smallest}x"
            f"{smallest} the conv encoder's four 3x3 convs need; render the camera larger."
        )


def encoder_weight_shapes(observation_shape: Sequence[int]) -> List[Tuple[int, ...]]:
    """Shapes of the encoder's acting weights for (H, W, C) observations, in order."""
    height, width, channels = (int(d) for d in observation_shape)
    shapes: List[Tuple[int, ...]] = []
    fan_in = channels
    for _ in CONV_STRIDES:
        shapes += [(CONV_KERNEL, CONV_KERNEL, fan_in, CONV_FILTERS), (CONV_FILTERS,)]
        fan_in = CONV_FILTERS
    flat = conv_output_size(height) * conv_output_size(width) * CONV_FILTERS
    shapes += [(flat, FEATURES), (FEATURES,), (FEATURES,), (FEATURES,)]
    return shapes


def pixel_acting_weight_shapes(
    observation_shape: Sequence[int],
    action_size: int,
    hidden_sizes: Sequence[int],
    state_size: int = 0,
    camera_channels: Sequence[int] = (),
) -> List[Tuple[int, ...]]:
    """The encoders' shapes (one per camera, each on its `camera_channels` of the
    stacked channels; () for one camera of all), then the actor MLP's on their
    features (and the state's `state_size` floats concatenated after them)."""
    height, width, _ = (int(d) for d in observation_shape)
    cameras = camera_channels or (int(observation_shape[-1]),)
    shapes: List[Tuple[int, ...]] = []
    for channels in cameras:
        shapes += encoder_weight_shapes((height, width, channels))
    return shapes + acting_weight_shapes(
        FEATURES * len(cameras) + state_size, action_size, hidden_sizes
    )


def _conv_relu(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray, stride: int) -> np.ndarray:
    """A valid 2-D conv with ReLU on [B, H, W, C] as im2col and one matmul."""
    k, _, c_in, c_out = kernel.shape
    batch, height, width, _ = x.shape
    h_out = (height - k) // stride + 1
    w_out = (width - k) // stride + 1
    sb, sh, sw, sc = x.strides
    windows = np.lib.stride_tricks.as_strided(
        x,
        (batch, h_out, w_out, k, k, c_in),
        (sb, sh * stride, sw * stride, sh, sw, sc),
        writeable=False,
    )
    out = windows.reshape(batch * h_out * w_out, k * k * c_in) @ kernel.reshape(-1, c_out)
    out += bias
    np.maximum(out, 0.0, out=out)
    return out.reshape(batch, h_out, w_out, c_out)


class NumpyEncoder:
    """DrQ's encoder on uint8 [B, H, W, C] observations: [B, FEATURES] float32."""

    def __init__(self, weights: Sequence[np.ndarray]):
        if len(weights) != ENCODER_ARRAYS:
            raise ValueError(f"Expected {ENCODER_ARRAYS} encoder arrays, got {len(weights)}.")
        w = [np.asarray(a, np.float32) for a in weights]
        n = 2 * len(CONV_STRIDES)
        self._convs = [(w[i], w[i + 1], s) for i, s in zip(range(0, n, 2), CONV_STRIDES)]
        self._dense, self._dense_bias, self._gamma, self._beta = w[n:]

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        x = np.asarray(observations, np.float32) * np.float32(1.0 / 255.0)
        for kernel, bias, stride in self._convs:
            x = _conv_relu(x, kernel, bias, stride)
        h = x.reshape(len(x), -1) @ self._dense + self._dense_bias
        mean = h.mean(axis=1, keepdims=True)
        var = h.var(axis=1, keepdims=True)
        h = (h - mean) / np.sqrt(var + LAYER_NORM_EPSILON) * self._gamma + self._beta
        return np.tanh(h)


class NumpyPixelActorPolicy(NumpyActorPolicy):
    """`NumpyActorPolicy` on the encoders' features of uint8 image observations: one
    encoder per camera, on its `channel_indices` of the stacked channels (None: one
    camera of all channels), their features concatenated in camera order."""

    def __init__(self, *args, channel_indices: Optional[Sequence[Sequence[int]]] = None, **kwargs):
        self._encoders: List[NumpyEncoder] = []
        self._indices = None
        if channel_indices is not None and len(channel_indices) > 1:
            self._indices = [np.asarray(indices, np.intp) for indices in channel_indices]
        super().__init__(*args, **kwargs)

    def set_weights(
        self,
        weights: Sequence[np.ndarray],
        normalization: Optional[ObservationNormalization] = None,
    ) -> None:
        """Takes each camera's encoder arrays, then the actor MLP's pairs (no normalization)."""
        del normalization  # images are scaled to [0, 1] by the encoder alone
        count = 1 if self._indices is None else len(self._indices)
        n = ENCODER_ARRAYS
        self._encoders = [NumpyEncoder(weights[i * n : (i + 1) * n]) for i in range(count)]
        super().set_weights(weights[count * n :], None)

    def _features(self, pixels: np.ndarray) -> np.ndarray:
        if self._indices is None:
            return self._encoders[0](pixels)
        pixels = np.asarray(pixels)
        return np.concatenate(
            [
                encoder(np.take(pixels, indices, axis=-1))
                for encoder, indices in zip(self._encoders, self._indices)
            ],
            axis=1,
        )

    def _forward(self, observations: Any) -> tuple:
        """Observations: uint8 [B, H, W, C], or {"pixels": those, "state": float32 [B, D]}."""
        if not isinstance(observations, Mapping):
            return super()._forward(self._features(observations))
        features = self._features(observations[PIXELS])
        if STATE in observations:
            state = np.asarray(observations[STATE], np.float32).reshape(len(features), -1)
            features = np.concatenate([features, state], axis=1)
        return super()._forward(features)


def make_acting_policy(specs, hparams, seed: Optional[int] = None) -> NumpyActorPolicy:
    """The NumPy acting policy for an env's specs: the pixel one for images."""
    action = specs.action
    args = (action.minimum, action.maximum, tuple(action.shape.as_list()))
    kwargs = dict(seed=seed, log_std_range=hparams.policy_log_std_range)
    if specs.is_image:
        indices = specs.camera_channel_indices()
        return NumpyPixelActorPolicy(*args, channel_indices=indices, **kwargs)
    return NumpyActorPolicy(*args, **kwargs)


def acting_weight_shapes_for(specs, hparams) -> List[Tuple[int, ...]]:
    """The acting weights' shapes of an env's policy (the variable container's)."""
    action_size = specs.action.shape.num_elements()
    if specs.is_image:
        stacked = tuple(c * specs.frame_stack for c in specs.cameras)
        return pixel_acting_weight_shapes(
            specs.image.shape.as_list(),
            action_size,
            hparams.actor_fc_layer_params,
            specs.state_size,
            stacked,
        )
    return acting_weight_shapes(
        specs.observation.shape.num_elements(), action_size, hparams.actor_fc_layer_params
    )
