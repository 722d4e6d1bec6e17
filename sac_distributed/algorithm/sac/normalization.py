"""Observation normalization: running mean and variance, shared by every network.

With `normalize_observations` the learner keeps one `ObservationNormalizer`.
Each SGD step first folds the sampled batch's observations into the running
statistics, then trains on `clip((observation - mean) / std)`:

- the policy applies it through TF-Agents' `ActorPolicy(observation_normalizer=)`,
  so the agent's policies and the exported SavedModels take raw observations;
- the critics (online and target) apply it through `NormalizedCriticNetwork`;
- actors and the evaluator receive (mean, std, clip) with the weights from the
  variable container and apply the same formula in NumPy
  (`policy.ObservationNormalization`).

Replay keeps raw observations, so changing statistics never invalidate it.
The statistics come from replay samples, as Acme's JAX learners do: the
distribution the networks are trained on.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf
from tf_agents.networks import network
from tf_agents.specs import tensor_spec

from sac_distributed.algorithm.policy import ObservationNormalization

# Normalized observations are clipped to [-CLIP, CLIP] (SB3's VecNormalize default).
OBSERVATION_CLIP = 10.0
# Added to the variance so that a constant observation dimension stays finite.
VARIANCE_EPSILON = 1e-6


class ObservationNormalizer(tf.Module):
    """Running per-element mean and variance of observations, updated batch by batch.

    Batches are merged with the parallel-variance formula (Chan et al.), on
    values centred on the current mean for accuracy in float32. Under a
    distribution strategy every replica all-reduces its batch moments, so the
    replicas compute the same statistics and only the first one writes them.
    """

    def __init__(
        self,
        observation_spec: tensor_spec.TensorSpec,
        clip: float = OBSERVATION_CLIP,
        epsilon: float = VARIANCE_EPSILON,
        name: str = "ObservationNormalizer",
    ):
        super().__init__(name=name)
        self._shape = tuple(observation_spec.shape.as_list())
        self._dtype = tf.as_dtype(observation_spec.dtype)
        self.clip = float(clip)
        self.epsilon = float(epsilon)
        options = dict(trainable=False, aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        with tf.name_scope(name):
            self.count = tf.Variable(0.0, name="count", **options)
            self.mean = tf.Variable(tf.zeros(self._shape), name="mean", **options)
            self.variance = tf.Variable(tf.ones(self._shape), name="variance", **options)

    def std(self) -> tf.Tensor:
        return tf.sqrt(self.variance + self.epsilon)

    def normalize(self, observation: tf.Tensor) -> tf.Tensor:
        """clip((observation - mean) / std), in the observation spec's dtype."""
        x = tf.cast(observation, tf.float32)
        x = tf.clip_by_value((x - self.mean) / self.std(), -self.clip, self.clip)
        return tf.cast(x, self._dtype)

    def update(self, observation: tf.Tensor) -> None:
        """Folds a batch [..., *observation_shape] into the running statistics."""
        x = tf.reshape(tf.cast(observation, tf.float32), (-1,) + self._shape)
        mean = tf.convert_to_tensor(self.mean)
        centred = x - mean
        moments = [
            tf.cast(tf.shape(x)[0], tf.float32),
            tf.reduce_sum(centred, axis=0),
            tf.reduce_sum(tf.square(centred), axis=0),
        ]
        context = tf.distribute.get_replica_context()
        if context is not None:  # None only in a cross-replica context
            moments = context.all_reduce(tf.distribute.ReduceOp.SUM, moments)
        new_count, new_mean, new_variance = merge_moments(self.count, mean, self.variance, *moments)
        self.count.assign(new_count)
        self.mean.assign(new_mean)
        self.variance.assign(new_variance)

    def numpy_params(self) -> ObservationNormalization:
        """The statistics as actors apply them in NumPy."""
        return ObservationNormalization(self.mean.numpy(), self.std().numpy(), self.clip)


def merge_moments(count, mean, variance, batch_count, centred_sum, centred_square_sum):
    """Running (count, mean, variance) merged with a batch given by its moments
    about `mean`: batch_count, sum(x - mean) and sum((x - mean)^2)."""
    total = count + batch_count
    delta = centred_sum / batch_count  # batch mean - running mean
    batch_variance = tf.maximum(centred_square_sum / batch_count - tf.square(delta), 0.0)
    new_mean = mean + delta * (batch_count / total)
    new_variance = (
        count * variance
        + batch_count * batch_variance
        + tf.square(delta) * count * batch_count / total
    ) / total
    return total, new_mean, new_variance


class NormalizedCriticNetwork(network.Network):
    """A critic Q((observation, action)) that normalizes the observation first.

    The normalizer is held as a bound method, which Keras does not track, so
    the online and target critics share one set of statistics without sharing
    variables (TF-Agents refuses target networks that share variables).
    """

    def __init__(
        self,
        critic: network.Network,
        normalize_fn,
        name: Optional[str] = None,
    ):
        super().__init__(
            input_tensor_spec=critic.input_tensor_spec,
            state_spec=critic.state_spec,
            name=name or critic.name,
        )
        self._critic = critic
        self._normalize_fn = normalize_fn

    def call(self, inputs, step_type=(), network_state=(), training=False):
        observation, action = inputs
        return self._critic(
            (self._normalize_fn(observation), action),
            step_type=step_type,
            network_state=network_state,
            training=training,
        )

    def copy(self, **kwargs) -> NormalizedCriticNetwork:
        """A new critic with fresh weights and the same normalizer."""
        name = kwargs.pop("name", None)
        return NormalizedCriticNetwork(
            self._critic.copy(**kwargs), self._normalize_fn, name=name or self.name
        )
