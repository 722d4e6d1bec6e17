"""What a pixel SAC update and a pixel action cost on this machine's CPUs.

Issue 71 item 4 asks, before the pixel path is built, whether a DrQ-style learner
and a conv actor can run here, and which actor path is fast. This probe builds the
networks of DrQ (Kostrikov et al. 2020) in TensorFlow with random weights and
times them on constant random inputs (no replay, no env: only the networks' cost):

* encoder: uint8 84x84x(3 x stack) scaled to [0, 1], a 3x3 stride-2 conv and three
  3x3 stride-1 convs of 32 filters with ReLU, flattened (35x35x32), a Dense to 50
  features, LayerNorm and tanh;
* actor and twin critics: MLPs of two 1024-unit layers on the 50 features (the
  critics on features and action), target critics and target encoder;
* one update: random shift augmentation of s and s' (pad 4, random 84x84 crop,
  DrQ's), the critic loss through the encoder, the actor and temperature losses on
  the stopped-gradient features, Adam for all, the targets' Polyak step. Timed as
  updates/s at each --batch_sizes, in a tf.function, with and without XLA.

The acting cost is one greedy action (encoder and actor mean) for one observation,
in ms: eager TensorFlow, a tf.function, a tf.function compiled by XLA, and NumPy
(im2col through stride tricks and one matmul per conv, the kind of path
`algorithm/policy.py`'s NumPy MLP policy would need), checked to agree with the
TensorFlow output. JSON on stdout, and in --out when given:

    python benchmarks/probe.py pixel_update_cost --out=benchmarks/results/pixel_update_cost/cpu2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

import benchmarks.bench  # noqa: F401  (imports sac_distributed first: it selects Keras 2)

SIZE = 84
PAD = 4
FILTERS = 32
FEATURES = 50
HIDDEN = 1024
CHANNELS_PER_FRAME = 3


def _conv_layers(conv_dtype: str) -> List[tf.keras.layers.Layer]:
    strides = (2, 1, 1, 1)
    policy = "float32" if conv_dtype == "float32" else f"mixed_{conv_dtype}"
    return [tf.keras.layers.Conv2D(FILTERS, 3, s, activation="relu", dtype=policy) for s in strides]


class Encoder(tf.keras.Model):
    def __init__(self, conv_dtype: str = "float32"):
        super().__init__()
        self.conv_dtype = conv_dtype
        self.convs = _conv_layers(conv_dtype)
        self.flatten = tf.keras.layers.Flatten()
        self.dense = tf.keras.layers.Dense(FEATURES)
        self.norm = tf.keras.layers.LayerNormalization()

    def call(self, pixels):
        x = tf.cast(pixels, self.conv_dtype) / 255.0
        for conv in self.convs:
            x = conv(x)
        x = tf.cast(x, tf.float32)
        return tf.tanh(self.norm(self.dense(self.flatten(x))))


def _mlp(outputs: int) -> tf.keras.Sequential:
    layers = [tf.keras.layers.Dense(HIDDEN, activation="relu") for _ in range(2)]
    return tf.keras.Sequential([*layers, tf.keras.layers.Dense(outputs)])


class PixelSac(tf.Module):
    """DrQ's networks and one SAC update (critic through the encoder, actor detached)."""

    def __init__(self, channels: int, action_dims: int, conv_dtype: str = "float32"):
        super().__init__()
        self.action_dims = action_dims
        self.encoder, self.target_encoder = Encoder(conv_dtype), Encoder(conv_dtype)
        self.actor = _mlp(2 * action_dims)
        self.critics = [_mlp(1), _mlp(1)]
        self.target_critics = [_mlp(1), _mlp(1)]
        self.log_alpha = tf.Variable(np.log(0.1), dtype=tf.float32)
        self.target_entropy = -float(action_dims)
        obs = tf.zeros((1, SIZE, SIZE, channels), tf.uint8)
        features = self.encoder(obs)
        self.target_encoder(obs)
        self.actor(features)
        joint = tf.concat([features, tf.zeros((1, action_dims))], -1)
        for net in (*self.critics, *self.target_critics):
            net(joint)
        self._sync_targets(1.0)
        self.critic_opt = tf.keras.optimizers.Adam(1e-3)
        self.actor_opt = tf.keras.optimizers.Adam(1e-3)
        self.alpha_opt = tf.keras.optimizers.Adam(1e-3)

    def _target_pairs(self):
        online = self.encoder.variables + [v for c in self.critics for v in c.variables]
        target = self.target_encoder.variables + [
            v for c in self.target_critics for v in c.variables
        ]
        return zip(online, target)

    def _sync_targets(self, tau: float) -> None:
        for source, target in self._target_pairs():
            target.assign(tau * source + (1.0 - tau) * target)

    def _policy(self, features):
        mean, log_std = tf.split(self.actor(features), 2, axis=-1)
        log_std = tf.clip_by_value(log_std, -10.0, 2.0)
        noise = tf.random.normal(tf.shape(mean))
        pre_tanh = mean + tf.exp(log_std) * noise
        action = tf.tanh(pre_tanh)
        log_prob = tf.reduce_sum(
            -0.5 * noise**2 - log_std - 0.5 * np.log(2 * np.pi), -1
        ) - tf.reduce_sum(tf.math.log(1.0 - action**2 + 1e-6), -1)
        return action, log_prob

    def _q(self, critics, features, action):
        joint = tf.concat([features, action], -1)
        return [tf.squeeze(c(joint), -1) for c in critics]

    def update(self, obs, action, reward, next_obs, discount):
        obs, next_obs = random_shift(obs), random_shift(next_obs)
        alpha = tf.exp(self.log_alpha)
        next_features = self.target_encoder(next_obs)
        next_action, next_log_prob = self._policy(self.encoder(next_obs))
        next_q = tf.minimum(*self._q(self.target_critics, next_features, next_action))
        target = tf.stop_gradient(reward + 0.99 * discount * (next_q - alpha * next_log_prob))
        critic_vars = self.encoder.trainable_variables + [
            v for c in self.critics for v in c.trainable_variables
        ]
        with tf.GradientTape() as tape:
            features = self.encoder(obs)
            q1, q2 = self._q(self.critics, features, action)
            critic_loss = tf.reduce_mean((q1 - target) ** 2 + (q2 - target) ** 2)
        self.critic_opt.apply_gradients(zip(tape.gradient(critic_loss, critic_vars), critic_vars))
        detached = tf.stop_gradient(features)
        with tf.GradientTape() as tape:
            new_action, log_prob = self._policy(detached)
            q = tf.minimum(*self._q(self.critics, detached, new_action))
            actor_loss = tf.reduce_mean(alpha * log_prob - q)
        actor_vars = self.actor.trainable_variables
        self.actor_opt.apply_gradients(zip(tape.gradient(actor_loss, actor_vars), actor_vars))
        with tf.GradientTape() as tape:
            alpha_loss = -tf.reduce_mean(
                self.log_alpha * tf.stop_gradient(log_prob + self.target_entropy)
            )
        grads = tape.gradient(alpha_loss, [self.log_alpha])
        self.alpha_opt.apply_gradients(zip(grads, [self.log_alpha]))
        self._sync_targets(0.01)
        return critic_loss

    def greedy_action(self, obs):
        mean, _ = tf.split(self.actor(self.encoder(obs)), 2, axis=-1)
        return tf.tanh(mean)


def random_shift(pixels):
    """DrQ's augmentation: replicate-pad by PAD and crop a random SIZE x SIZE window
    per image."""
    batch = tf.shape(pixels)[0]
    padded = tf.pad(pixels, [[0, 0], [PAD, PAD], [PAD, PAD], [0, 0]], mode="SYMMETRIC")
    channels = pixels.shape[-1]
    return tf.image.random_crop(padded, tf.stack([batch, SIZE, SIZE, channels]))


def numpy_greedy_action(agent: PixelSac) -> Callable[[np.ndarray], np.ndarray]:
    """The same greedy action in NumPy: each conv as im2col (stride tricks) and a matmul."""
    convs = [(c.kernel.numpy(), c.bias.numpy(), c.strides[0]) for c in agent.encoder.convs]
    dense_w, dense_b = (v.numpy() for v in agent.encoder.dense.weights)
    gamma, beta = agent.encoder.norm.gamma.numpy(), agent.encoder.norm.beta.numpy()
    epsilon = agent.encoder.norm.epsilon
    actor = [(layer.kernel.numpy(), layer.bias.numpy()) for layer in agent.actor.layers]

    def conv(x, kernel, bias, stride):
        k, _, c_in, c_out = kernel.shape
        h_out = (x.shape[0] - k) // stride + 1
        w_out = (x.shape[1] - k) // stride + 1
        s0, s1, s2 = x.strides
        windows = np.lib.stride_tricks.as_strided(
            x, (h_out, w_out, k, k, c_in), (s0 * stride, s1 * stride, s0, s1, s2)
        )
        out = windows.reshape(h_out * w_out, k * k * c_in) @ kernel.reshape(-1, c_out)
        return np.maximum(out + bias, 0.0).reshape(h_out, w_out, c_out)

    def act(obs: np.ndarray) -> np.ndarray:
        x = obs.astype(np.float32) / 255.0
        for kernel, bias, stride in convs:
            x = conv(x, kernel, bias, stride)
        h = x.reshape(-1) @ dense_w + dense_b
        h = (h - h.mean()) / np.sqrt(h.var() + epsilon) * gamma + beta
        h = np.tanh(h)
        for i, (w, b) in enumerate(actor):
            h = h @ w + b
            if i < len(actor) - 1:
                h = np.maximum(h, 0.0)
        return np.tanh(h[: agent.action_dims])

    return act


def _median_rate(call: Callable[[], object], count: int, rounds: int) -> float:
    """Median over rounds of count calls per second (after one warm-up call)."""
    call()
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(count):
            call()
        rates.append(count / (time.perf_counter() - start))
    return statistics.median(rates)


def update_rates(args, channels: int) -> List[Dict]:
    rows = []
    rng = np.random.default_rng(0)
    paths = [(dtype, False) for dtype in args.conv_dtypes]
    paths += [("float32", True)] if args.xla else []
    for conv_dtype, jit in paths:
        for batch in args.batch_sizes:
            tf.random.set_seed(0)
            agent = PixelSac(channels, args.action_dims, conv_dtype)
            shape = (batch, SIZE, SIZE, channels)
            data = (
                tf.constant(rng.integers(0, 256, shape, dtype=np.uint8)),
                tf.constant(rng.uniform(-1, 1, (batch, args.action_dims)).astype(np.float32)),
                tf.constant(rng.uniform(0, 1, (batch,)).astype(np.float32)),
                tf.constant(rng.integers(0, 256, shape, dtype=np.uint8)),
                tf.ones((batch,)),
            )
            step = tf.function(agent.update, jit_compile=jit)
            rate = _median_rate(lambda s=step, d=data: s(*d).numpy(), args.updates, args.rounds)
            row = dict(kind="update", batch_size=batch, xla=jit, conv_dtype=conv_dtype)
            rows.append(dict(row, per_s=round(rate, 2)))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def action_costs(args, channels: int) -> List[Dict]:
    tf.random.set_seed(0)
    agent = PixelSac(channels, args.action_dims)
    obs = np.random.default_rng(1).integers(0, 256, (SIZE, SIZE, channels), dtype=np.uint8)
    batched = tf.constant(obs[None])
    as_numpy = numpy_greedy_action(agent)
    reference = agent.greedy_action(batched).numpy()[0]
    gap = float(np.max(np.abs(as_numpy(obs) - reference)))
    if gap > 1e-4:
        raise SystemExit(f"the NumPy action differs from TensorFlow's by {gap:.2e}")
    paths = {
        "eager": lambda: agent.greedy_action(batched).numpy(),
        "tf.function": _compiled(agent, batched, False),
        "tf.function+xla": _compiled(agent, batched, True),
        "numpy_im2col": lambda: as_numpy(obs),
    }
    rows = []
    for name, call in paths.items():
        rate = _median_rate(call, args.actions, args.rounds)
        rows.append(dict(kind="action", path=name, ms=round(1000.0 / rate, 3)))
        print(json.dumps(rows[-1]), flush=True)
    rows.append(dict(kind="action_check", numpy_max_abs_gap=gap))
    return rows


def _compiled(agent: PixelSac, batched, jit: bool) -> Callable[[], np.ndarray]:
    fn = tf.function(agent.greedy_action, jit_compile=jit)
    return lambda: fn(batched).numpy()


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stack", type=int, default=3, help="frames per observation (DrQ: 3)")
    p.add_argument("--action_dims", type=int, default=6, help="HalfCheetah/cheetah-run: 6")
    p.add_argument(
        "--batch_sizes", type=lambda s: [int(x) for x in s.split(",")], default=[128, 256]
    )
    p.add_argument(
        "--conv_dtypes",
        type=lambda s: s.split(","),
        default=["float32", "bfloat16"],
        help="the encoder convs' compute dtypes to time (bfloat16: AMX/AVX512-BF16 CPUs)",
    )
    p.add_argument("--xla", type=int, default=1, help="also time the float32 update under XLA")
    p.add_argument("--skip_actions", type=int, default=0, help="time updates only")
    p.add_argument("--updates", type=int, default=10, help="updates per timed round")
    p.add_argument("--actions", type=int, default=50, help="actions per timed round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default="", help="write OUT.json")
    args = p.parse_args(argv)
    if args.stack < 1 or args.action_dims < 1 or min(args.batch_sizes) < 1:
        p.error("--stack, --action_dims and every --batch_sizes entry must be >= 1")
    channels = CHANNELS_PER_FRAME * args.stack
    unknown = set(args.conv_dtypes) - {"float32", "bfloat16", "float16"}
    if unknown:
        p.error(f"--conv_dtypes takes float32, bfloat16 or float16, not {sorted(unknown)}")
    rows = [] if args.skip_actions else action_costs(args, channels)
    rows += update_rates(args, channels)
    meta = dict(
        machine=f"{platform.machine()}, {os.cpu_count()} CPUs",
        tensorflow=tf.__version__,
        args=vars(args),
        rows=rows,
    )
    text = json.dumps(meta, indent=2)
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out + ".json", "w") as f:
            f.write(text + "\n")
    return 0
