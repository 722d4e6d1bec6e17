"""Process plumbing shared by the jobs: stop signals, metrics, file helpers."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import threading
import time
from typing import Mapping, Optional

from absl import logging


class StopSignal:
    """Turns SIGTERM/SIGINT into a flag that loops poll between steps.

    The first signal asks for a graceful stop (flush, checkpoint, exit 0). A
    second one ends the process at once, unless `finishing` names final work
    that must not be cut short (the replay checkpoint, the learner's last
    checkpoint, a launcher stopping its jobs): `timeout`, Docker and Kubernetes
    send SIGTERM to the process and then to its group, and only SIGKILL after
    their grace period should end such a job.

    The handler takes no lock: it runs in the main thread between two bytecodes,
    possibly while that thread holds the lock of `threading.Event.set` (a burst of
    signals, as when a Jupyter kernel dies, re-entered it and hung the process). It
    sets a plain flag; `wait` polls that flag beside the event that `set` uses.
    """

    _POLL_S = 0.05

    def __init__(self, finishing: Optional[str] = None) -> None:
        self._event = threading.Event()
        self._signalled = False  # written by the handler only
        self._finishing = finishing

    def install(self) -> StopSignal:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, _frame) -> None:
        name = signal.Signals(signum).name
        if self() and self._finishing:
            logging.warning(
                "Received %s again: still %s; it is not interrupted (SIGKILL ends the "
                "process at once, without it).",
                name,
                self._finishing,
            )
            return
        self._signalled = True
        logging.info("Received %s: stopping gracefully.", name)
        if not self._finishing:
            signal.signal(signum, signal.SIG_DFL)

    def set(self) -> None:
        self._event.set()

    def __call__(self) -> bool:
        return self._signalled or self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleeps up to `seconds`; returns True as soon as a stop is requested."""
        deadline = time.monotonic() + seconds
        while not self():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._event.wait(min(left, self._POLL_S))
        return True


class Metrics:
    """One TensorBoard writer per job; keys like `learner/critic_loss`."""

    def __init__(self, logdir: Optional[str]):
        import tensorflow as tf  # lazily: the launcher uses this module without TF

        self._tf = tf
        self._writer = tf.summary.create_file_writer(logdir) if logdir else None

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        if self._writer is None:
            return
        with self._writer.as_default(step=int(step)):
            for key, value in values.items():
                self._tf.summary.scalar(key, float(value))

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def replace_dir(src: str, dst: str) -> None:
    """Moves the finished directory `src` to `dst`, replacing any old `dst`.

    Readers see either the old or the new directory except for the instant
    between the two renames; a partially written `src` is never visible as `dst`.
    """
    old = dst + ".old"
    if os.path.exists(old):
        shutil.rmtree(old)
    if os.path.exists(dst):
        os.rename(dst, old)
    os.rename(src, dst)
    if os.path.exists(old):
        shutil.rmtree(old)


def write_json(path: str, data: dict) -> None:
    """Writes `data` as JSON through a temporary file, so readers never see half of it."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
    os.replace(tmp, path)


def port_in_use(port: int) -> bool:
    """Whether something listens on TCP `port` of this host (any address).

    gRPC binds with SO_REUSEPORT, so a second Reverb server on a served port
    would start without error; this probe binds with SO_REUSEADDR (a port left
    in TIME_WAIT by a stopped server is free) but without SO_REUSEPORT, which
    every listener refuses.
    """
    for family, host in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError:  # no IPv6 on this host
            continue
        try:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return True
            if family != socket.AF_INET6:
                raise
        finally:
            probe.close()
    return False


def check_root_dir(path: str) -> None:
    """Creates `path` if missing; raises ConfigError unless it is a writable directory.

    Runs before any connection or banner, so a mistyped root_dir costs nothing.
    """
    from sac_distributed.errors import ConfigError

    blocker = _first_non_directory(path)
    if blocker is not None:
        raise ConfigError(
            f"root_dir {path} cannot be created: {blocker} is a file, not a directory. Pass "
            "a --root_dir whose parents are all directories (e.g. a new path under /tmp)."
        )
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".write_test.{os.getpid()}")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as error:
        raise ConfigError(
            f"root_dir {path} is not writable ({error.strerror or error}). Pass a --root_dir "
            "you can write to, or fix its permissions."
        ) from None


def _first_non_directory(path: str) -> Optional[str]:
    """The first existing component of `path` that is not a directory, if any."""
    current = os.path.abspath(path)
    parts = []
    while True:
        parts.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for part in reversed(parts):
        if os.path.exists(part) and not os.path.isdir(part):
            return part
    return None
