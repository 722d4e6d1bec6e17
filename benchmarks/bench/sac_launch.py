"""Running our whole distributed job, `sac-launch`, from a benchmark.

compare.py's time_to_return mode, learning.py and probe.py's job_cpu and
startup_timeline modes each start `sac-launch` as a subprocess with flag sets
named on their command line. Standard library and absl only: these scripts
import it before (or without) TensorFlow.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from typing import Dict, Tuple

from absl import logging


def sac_launch_executable() -> str:
    """The `sac-launch` next to this Python (its virtualenv), else the one on PATH."""
    exe = os.path.join(os.path.dirname(sys.executable), "sac-launch")
    if not os.path.exists(exe):
        exe = shutil.which("sac-launch") or ""
    if not exe:
        raise FileNotFoundError("sac-launch is not installed (pip install -e . provides it).")
    return exe


def parse_named_flags(text: str, option: str) -> Dict[str, Tuple[str, ...]]:
    """'name=--flag --flag2;name2=' -> {name: flags}, for option `option`'s error.

    Names are letters, digits and _ (they name result groups and directories).
    """
    named: Dict[str, Tuple[str, ...]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, sep, flags = part.partition("=")
        if not sep or not name.strip().replace("_", "").isalnum():
            raise SystemExit(f"{option}: {part!r} is not name=flags (name: letters, digits, _).")
        named[name.strip()] = tuple(shlex.split(flags))
    return named


def stop_process_group(proc: subprocess.Popen, grace_s: float = 60.0) -> None:
    """SIGTERM to the launcher (it stops its jobs), SIGKILL to its group if it hangs.

    `proc` must have been started with start_new_session=True: its process
    group is then the launcher and every job it started, and nothing else.
    """
    if proc.poll() is not None:
        return
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the session this benchmark started
        proc.wait()
    logging.info(
        "sac-launch stopped in %.1f s (exit code %s).", time.monotonic() - start, proc.returncode
    )
