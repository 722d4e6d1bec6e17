"""The tf.distribute strategy a learner trains under, one per kind and process."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import tensorflow as tf

_STRATEGIES: Dict[Tuple[str, Optional[str]], tf.distribute.Strategy] = {}


def make_strategy(kind: str, tpu: Optional[str] = None) -> tf.distribute.Strategy:
    """default: one device; mirrored: all local GPUs or logical CPUs; tpu: a TPU.

    One strategy per kind and process: two MirroredStrategy objects number
    their collective ops alike, and the second one's all-reduces then clash
    with the shapes the first one's left behind (e.g. a second learner in a
    notebook). A TPU system is initialised only once as well.
    """
    key = (kind, tpu)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = _new_strategy(kind, tpu)
    return _STRATEGIES[key]


def _new_strategy(kind: str, tpu: Optional[str]) -> tf.distribute.Strategy:
    if kind == "default":
        return tf.distribute.get_strategy()
    if kind == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = gpus or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([d.name for d in devices])
    if kind == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"Unknown strategy {kind!r}; use default, mirrored or tpu.")


def use_logical_cpus(count: int) -> None:
    """Splits the CPU into `count` logical devices (before TensorFlow starts).

    MirroredStrategy then runs one replica per logical CPU, which is how the
    multi-device code path is exercised on a machine without accelerators.
    """
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
    )
