"""Network and loss pieces every algorithm builds on: the actor's tanh-squashed
Gaussian head as the hyperparameters choose it, PyTorch's layer initialisation,
and the per-row TD loss of a critic."""

from __future__ import annotations

import math

import tensorflow as tf
from tf_agents.agents.sac import sac_agent
from tf_agents.utils import common

from sac_distributed.algorithm import squash
from sac_distributed.config import Hyperparams


def actor_projection(hparams: Hyperparams):
    """The constructor of the actor's head: TF-Agents' tanh-squashed Gaussian.

    With clip_policy_log_std the head's log std goes through TF-Agents' own
    std_clip_transform (clip to [-20, 2], then exp) instead of a bare exp; with
    squash_log_prob_epsilon > 0 its log-probability caps the tanh term (squash.py).
    """
    std_transform = sac_agent.std_clip_transform if hparams.clip_policy_log_std else tf.exp
    return squash.projection_network(hparams.squash_log_prob_epsilon, std_transform)


def td_errors_loss_fn(critic_loss: str):
    """The per-row loss of a critic's prediction against its TD target, named by
    Hyperparams.critic_loss."""
    if critic_loss == "huber":
        return common.element_wise_huber_loss  # delta 1
    return tf.math.squared_difference


def torch_default_init(net: tf.Module) -> None:
    """Re-draws every Dense layer of `net` the way PyTorch's nn.Linear starts.

    Kernel and bias are uniform in +-1/sqrt(fan_in), where Keras' default is
    Glorot-uniform kernels (about 1.9x wider on a 400x300 layer, 2.4x on a
    300x1 critic output) and zero biases. Draws follow TensorFlow's global seed.
    """
    dense = [m for m in net.submodules if isinstance(m, tf.keras.layers.Dense)]
    if not dense:
        raise ValueError(f"{net.name} has no Dense layers to initialise.")
    for layer in dense:
        bound = 1.0 / math.sqrt(layer.kernel.shape[0])
        for var in (layer.kernel, layer.bias):
            var.assign(tf.random.uniform(var.shape, -bound, bound, dtype=var.dtype))
