"""SAC's networks for camera observations: DrQ's conv encoder shared by the actor
and the critics, and the random-shift augmentation.

The encoder (its layout: algorithm/pixel_policy.py, which runs the same network
in NumPy for actors) is trained by the critic loss alone, as in SAC-AE, DrQ and
DrQ-v2: the actor reads a stopped-gradient copy of its features, so the policy
loss never moves it (RLlib's SAC once left such weights untrained, PR #13522;
here `PixelSacAgent.critic_variables` lists them). Nothing here knows of
Reverb, processes or flags.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence

import tensorflow as tf
from absl import logging
from tf_agents.networks import network
from tf_agents.utils import nest_utils

from sac_distributed.algorithm.common import actor_projection
from sac_distributed.algorithm.pixel_policy import (
    CONV_FILTERS,
    CONV_KERNEL,
    CONV_STRIDES,
    FEATURES,
    LAYER_NORM_EPSILON,
)
from sac_distributed.config import Hyperparams
from sac_distributed.envs.observations import PIXELS, STATE

# CPU flags (Linux /proc/cpuinfo) of instructions that compute bfloat16 natively; without
# them (and without a GPU) oneDNN emulates bfloat16 convs, slower than float32 ones.
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
CPUINFO = "/proc/cpuinfo"


def cpu_flags(path: str = CPUINFO) -> Optional[set]:
    """The CPU's feature flags, or None where the file cannot say (not Linux)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


def warn_if_bfloat16_is_emulated(
    conv_dtype: str, flags: Optional[Iterable[str]], gpus: int
) -> Optional[str]:
    """Logs (and returns) a warning when bfloat16 convs would run emulated: no GPU and a
    CPU known to lack BF16_CPU_FLAGS."""
    if conv_dtype != "bfloat16" or gpus or flags is None or set(BF16_CPU_FLAGS) & set(flags):
        return None
    message = (
        "--conv_dtype=bfloat16 on a CPU without AVX512-BF16 or AMX (and no GPU): its convs "
        "run emulated, likely slower than float32; drop --conv_dtype or use a CPU that has them."
    )
    logging.warning(message)
    return message


# Pixels each image is padded by (edge replicated) before a random crop back to
# its size: DrQ's and DrQ-v2's shift of up to +-4 pixels on 84x84.
SHIFT_PAD = 4


class ConvTower(tf.keras.layers.Layer):
    """One camera's encoder: uint8 [B, H, W, C] to [B, 50] features (pixel_policy.py).

    `conv_dtype` is what its convs compute in: float32, or bfloat16 (the kernels
    cast on the way in, the variables and everything after the convs float32), about
    1.45x the updates/s on CPUs with AVX512-BF16 (`benchmarks/results/pixel_update_cost/`).
    A call may ask for another (the exported policy computes in float32)."""

    def __init__(self, name: str = "ConvTower", conv_dtype: str = "float32"):
        super().__init__(name=name)
        self.conv_dtype = conv_dtype
        self.convs = [
            tf.keras.layers.Conv2D(CONV_FILTERS, CONV_KERNEL, stride, activation="relu")
            for stride in CONV_STRIDES
        ]
        self.flatten = tf.keras.layers.Flatten()
        self.dense = tf.keras.layers.Dense(FEATURES)
        self.norm = tf.keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON)

    def call(self, images, conv_dtype: Optional[str] = None) -> tf.Tensor:
        dtype = conv_dtype or self.conv_dtype
        x = tf.cast(images, dtype) / 255.0
        for conv in self.convs:
            x = conv(x) if dtype == "float32" else _conv_in(dtype, conv, x)
        x = tf.cast(x, tf.float32)
        return tf.tanh(self.norm(self.dense(self.flatten(x))))

    def acting_weights(self) -> List[tf.Variable]:
        """Its variables in pixel_policy.encoder_weight_shapes order."""
        weights: List[tf.Variable] = []
        for conv in self.convs:
            weights += [conv.kernel, conv.bias]
        return weights + [self.dense.kernel, self.dense.bias, self.norm.gamma, self.norm.beta]


def _conv_in(dtype: str, conv: tf.keras.layers.Conv2D, x: tf.Tensor) -> tf.Tensor:
    """`conv` (ReLU, valid padding) computed in `dtype` on its float32 variables."""
    if not conv.built:
        conv.build(x.shape)
    y = tf.nn.conv2d(x, tf.cast(conv.kernel, dtype), conv.strides, "VALID")
    return tf.nn.relu(tf.nn.bias_add(y, tf.cast(conv.bias, dtype)))


class PixelEncoder(ConvTower):
    """uint8 [B, H, W, C] observations to [B, 50 x cameras] features: each camera's
    channels (`channel_indices`, EnvSpecs.camera_channel_indices; None for one camera
    of all channels) through its own tower, the features concatenated in camera
    order. The first camera's tower is this layer itself (so a one-camera encoder
    checkpoints as it did before several cameras existed), the others are
    `more_cameras`. A camera with a state, {"pixels": those, "state": [B, D]}, gives
    the state concatenated after the features as it is (SB3's MultiInputPolicy)."""

    def __init__(
        self,
        channel_indices: Optional[Sequence[Sequence[int]]] = None,
        name: str = "PixelEncoder",
        conv_dtype: str = "float32",
    ):
        super().__init__(name=name, conv_dtype=conv_dtype)
        several = channel_indices is not None and len(channel_indices) > 1
        self._indices = [tuple(i) for i in channel_indices] if several else None
        count = len(self._indices) if several else 1
        self.more_cameras = [ConvTower(f"{name}_camera{i}", conv_dtype) for i in range(1, count)]

    @property
    def towers(self) -> List[ConvTower]:
        """One tower per camera, in camera order."""
        return [self, *self.more_cameras]

    def call(self, observations, conv_dtype: Optional[str] = None) -> tf.Tensor:
        if isinstance(observations, dict):
            features = self.call(observations[PIXELS], conv_dtype)
            if STATE not in observations:
                return features
            return tf.concat([features, tf.cast(observations[STATE], tf.float32)], axis=-1)
        if self._indices is None:
            return super().call(observations, conv_dtype)
        pixels = [tf.gather(observations, indices, axis=-1) for indices in self._indices]
        features = [super().call(pixels[0], conv_dtype)]
        features += [
            tower(x, conv_dtype=conv_dtype) for tower, x in zip(self.more_cameras, pixels[1:])
        ]
        return tf.concat(features, axis=-1)

    def acting_weights(self) -> List[tf.Variable]:
        """Its variables in pixel_policy.encoder_weight_shapes order, camera by camera."""
        weights = super().acting_weights()
        return weights + [w for tower in self.more_cameras for w in tower.acting_weights()]


def mlp(hidden_sizes, outputs: int, name: str) -> tf.keras.Sequential:
    """ReLU layers, then a linear layer of `outputs`."""
    layers = [tf.keras.layers.Dense(units, activation="relu") for units in hidden_sizes]
    return tf.keras.Sequential([*layers, tf.keras.layers.Dense(outputs)], name=name)


class QHead(tf.keras.Model):
    """Q(features, action): an MLP on the concatenated encoder features and action."""

    def __init__(self, hidden_sizes, name: str):
        super().__init__(name=name)
        self.body = mlp(hidden_sizes, 1, f"{name}_mlp")

    def call(self, features: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        joint = tf.concat([features, tf.cast(actions, tf.float32)], axis=-1)
        return tf.squeeze(self.body(joint), -1)


class PixelActorNetwork(network.Network):
    """The policy on images: the shared encoder (gradient stopped), an MLP, and
    TF-Agents' tanh-squashed Gaussian head, so that ActorPolicy, PolicySaver and
    GreedyPolicy take it as they take ActorDistributionNetwork."""

    def __init__(self, observation_spec, action_spec, encoder: PixelEncoder, hparams: Hyperparams):
        super().__init__(input_tensor_spec=observation_spec, state_spec=(), name="PixelActor")
        self.encoder = encoder
        self.hidden = [
            tf.keras.layers.Dense(units, activation="relu")
            for units in hparams.actor_fc_layer_params
        ]
        self.projection = actor_projection(hparams)(action_spec)

    def distribution(self, features: tf.Tensor, training: bool = False):
        """The action distribution on encoder features [B, 50 x cameras (+ state)]."""
        x = features
        for layer in self.hidden:
            x = layer(x)
        distribution, _ = self.projection(x, outer_rank=1, training=training)
        return distribution

    def call(self, observations, step_type=(), network_state=(), training=False):
        outer_rank = nest_utils.get_outer_rank(observations, self.input_tensor_spec)
        batch_shape = tf.shape(tf.nest.flatten(observations)[0])[:outer_rank]
        flat = tf.nest.map_structure(
            lambda x, spec: tf.reshape(x, [-1, *spec.shape]), observations, self.input_tensor_spec
        )
        # In float32 whatever the learner's conv_dtype: an exported policy runs anywhere.
        features = tf.stop_gradient(self.encoder(flat, conv_dtype="float32"))
        x = features
        for layer in self.hidden:
            x = layer(x)
        x = tf.reshape(x, tf.concat([batch_shape, tf.shape(x)[-1:]], 0))
        distribution, _ = self.projection(x, outer_rank=outer_rank, training=training)
        return distribution, network_state

    @property
    def head_variables(self) -> List[tf.Variable]:
        """The actor's own trainable variables: the MLP and the head, not the encoder."""
        variables: List[tf.Variable] = []
        for layer in self.hidden:
            variables += [layer.kernel, layer.bias]
        return variables + list(self.projection.trainable_variables)


def random_shift(images, pad: int = SHIFT_PAD):
    """Each image of [B, H, W, C] shifted by up to `pad` pixels (edges replicated); of a
    camera with a state, the pixels shifted and the state as it is."""
    if isinstance(images, dict):
        return {**images, PIXELS: random_shift(images[PIXELS], pad)}
    if pad <= 0:
        return images
    shape = tf.shape(images)
    padded = tf.pad(images, [[0, 0], [pad, pad], [pad, pad], [0, 0]], mode="SYMMETRIC")
    offsets = tf.random.uniform([shape[0], 2], 0, 2 * pad + 1, dtype=tf.int32)
    rows = tf.range(shape[1])[None, :] + offsets[:, :1]  # [B, H]
    cols = tf.range(shape[2])[None, :] + offsets[:, 1:]  # [B, W]
    shifted = tf.gather(padded, rows, axis=1, batch_dims=1)
    return tf.gather(shifted, cols, axis=2, batch_dims=1)
