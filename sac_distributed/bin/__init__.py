"""The command-line programs. Importing this package, before TensorFlow or gym
is imported, hides their start-up chatter unless --verbose is on the command
line (absl parses flags only later, after every import)."""

import contextlib
import io
import os
import sys

_VERBOSE = {"--verbose", "--verbose=true", "--verbose=True", "--verbose=1"}


def _quiet_imports() -> None:
    # TensorFlow's C++ start-up lines (CUDA factories, CPU features) are ERROR
    # and INFO records of its own logger: level 3 hides them.
    # (sac_distributed itself sets 2, which still shows the ERROR lines.)
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2") == "2":
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            import gym  # noqa: F401  (prints a notice about its maintenance at import)
        except ImportError:
            pass


if not _VERBOSE.intersection(sys.argv[1:]):
    _quiet_imports()
