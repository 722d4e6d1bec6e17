"""The command-line programs. Importing this package, before TensorFlow or gym
is imported, hides their start-up chatter unless --verbose is on the command
line (absl parses flags only later, after every import).

The job binaries (server, actor, learner, evaluator) import `sac_distributed.jobs`,
and with it TensorFlow, TF-Agents and Reverb, inside `main`, once their flags,
config and root_dir have passed the checks: that import takes about 4 CPU-seconds,
so a mistyped flag is reported in well under a second instead of after it."""

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


_HELP = {"--help", "--helpshort", "--helpfull", "-?"}

# --help needs no gym: its import (and notice) would only slow the help down.
if not _VERBOSE.intersection(sys.argv[1:]) and not _HELP.intersection(sys.argv[1:]):
    _quiet_imports()
