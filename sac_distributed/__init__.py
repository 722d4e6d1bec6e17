"""Distributed Soft Actor-Critic on TF-Agents and Reverb.

Importing this package checks the platform (Reverb runs on Linux with
CPython <= 3.11 only) and selects Keras 2 (``TF_USE_LEGACY_KERAS=1``) before
TensorFlow is imported anywhere, because TF-Agents 0.19 needs tf-keras.
"""

import os
import sys

__version__ = "0.1.0"

_MAX_PYTHON = (3, 11)


def _check_platform() -> None:
    if sys.version_info[:2] > _MAX_PYTHON:
        raise ImportError(
            "sac_distributed needs Python <= 3.11: dm-reverb has no build for "
            f"Python {sys.version_info[0]}.{sys.version_info[1]}. Create a virtualenv "
            "with python3.11 (see README.md)."
        )
    if not sys.platform.startswith("linux"):
        raise ImportError(
            f"sac_distributed needs Linux: dm-reverb has no build for {sys.platform}. "
            "Use a Linux machine or the Docker image in launch/."
        )


_check_platform()
os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
