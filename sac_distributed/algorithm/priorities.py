"""Prioritized replay's arithmetic on the learner's side: importance weights and
each item's new priority from its rows' TD errors.

Any algorithm whose update can weight its critic loss per row and return the
rows' |TD error| uses these (sac/update.py does); replay/priorities.py sends
the priorities to the servers. Nothing here knows of Reverb.
"""

from __future__ import annotations

import tensorflow as tf

# Added to every new priority: an item at priority 0 would never be sampled
# again, although its TD error changes as the critics learn.
PRIORITY_EPSILON = 1e-6


def importance_weights(
    probability: tf.Tensor, replay_size: tf.Tensor, beta: float, rows_per_item: int
) -> tf.Tensor:
    """Per-row importance weights (N * P(i)) ** -beta / their batch maximum, float32.

    `probability` is each item's sampling probability P(i) within the whole
    replay and `replay_size` N its size in items, so the weights undo the
    bias of prioritized sampling by a fraction beta (Schaul et al. 2016);
    dividing by the batch's largest weight keeps them in (0, 1], so they only
    ever scale updates down (under a multi-replica strategy, each replica's
    batch is normalized on its own). Each of an item's K = `rows_per_item` rows gets
    the item's weight (rows are item-major). float64 inside: N * P(i) of a
    rarely drawn item is tiny. Uniform sampling (P = 1/N) gives weights of 1.
    """
    size = tf.cast(replay_size, tf.float64)
    weights = tf.pow(size * tf.cast(probability, tf.float64), -float(beta))
    weights /= tf.reduce_max(weights)
    return tf.cast(tf.repeat(weights, rows_per_item), tf.float32)


def item_priorities(td_errors: tf.Tensor, rows_per_item: int) -> tf.Tensor:
    """Each item's new priority: the mean |TD error| of its K rows, + epsilon (float64).

    The mean, not the max: an item's K rows are consecutive steps of one
    episode, sampled together, and the mean says how much the item as a whole
    has left to teach without one outlier step deciding it.
    """
    per_item = tf.reduce_mean(tf.reshape(td_errors, [-1, rows_per_item]), axis=1)
    return tf.cast(per_item, tf.float64) + PRIORITY_EPSILON
