"""Replay checkpoints that cannot strand a run.

Reverb writes a checkpoint into a directory of its own and then deletes every
older one there, so a damaged newest checkpoint used to leave nothing to fall
back to. Here Reverb writes into `replay_checkpoints/.writing`, and only a
complete checkpoint (Reverb's DONE file is its last write) is moved, with one
rename, to `replay_checkpoints/<timestamp>`; the last `keep` of those stay. On
start the newest readable one is restored: an unreadable one is set aside in
`replay_checkpoints/.unreadable` with a log line naming the file and why, and
the previous one is tried.

Reverb's files are ZLIB-compressed TFRecords flushed record by record, so a file
cut short at a flush point reads back as a shorter, valid file, and Reverb then
restores items whose chunks are gone (or hangs). Each adopted checkpoint
therefore gets a list of its files' sizes, and a checkpoint whose files no
longer have them is unreadable before Reverb sees it.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
from typing import Callable, List, Optional

import reverb
import tensorflow as tf
from absl import logging

from sac_distributed import paths
from sac_distributed.errors import ReplayCheckpointError

_DONE = "DONE"  # Reverb's marker of a complete checkpoint, written last
_FILES = ("tables.tfrecord", "chunks.tfrecord", "items.tfrecord")


class ReplayCheckpoints:
    """The kept replay checkpoints of one root_dir, newest first."""

    def __init__(self, root_dir: str, keep: int, shard: int = 0):
        self.directory = paths.replay_checkpoint_dir(root_dir, shard)
        self.writing_dir = os.path.join(self.directory, paths.REPLAY_WRITING_DIR)
        self._keep = keep
        os.makedirs(self.writing_dir, exist_ok=True)

    def kept(self) -> List[str]:
        """Complete checkpoints, newest first (their names are ISO timestamps)."""
        found = [
            path
            for path in glob.glob(os.path.join(self.directory, "*"))
            if os.path.isdir(path) and os.path.exists(os.path.join(path, _DONE))
        ]
        return sorted(found, key=os.path.basename, reverse=True)

    def tidy(self) -> None:
        """After a crash: keeps what Reverb finished, drops what it did not."""
        for path in glob.glob(os.path.join(self.writing_dir, "*")):
            if os.path.exists(os.path.join(path, _DONE)):
                self.adopt(path)
            else:
                logging.warning("Removing %s: a replay checkpoint whose save never finished.", path)
                shutil.rmtree(path, ignore_errors=True)

    def adopt(self, path: str) -> str:
        """Moves a complete checkpoint from the writing directory among the kept ones."""
        kept = os.path.join(self.directory, os.path.basename(path))
        _write_sizes(path)
        os.rename(path, kept)
        for old in self.kept()[self._keep :]:
            shutil.rmtree(old, ignore_errors=True)
        return kept

    def set_aside(self, path: str) -> str:
        """Moves an unreadable checkpoint out of the way, for inspection."""
        target = os.path.join(self.directory, paths.REPLAY_UNREADABLE_DIR, os.path.basename(path))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.rename(path, target)
        return target

    def checkpointer(self, restore_from: Optional[str]) -> reverb.checkpointers.CheckpointerBase:
        return reverb.checkpointers.DefaultCheckpointer(
            path=self.writing_dir, fallback_checkpoint_path=restore_from
        )


def restore_server(
    checkpoints: ReplayCheckpoints,
    build: Callable[[reverb.checkpointers.CheckpointerBase], reverb.Server],
    start_empty: bool,
) -> reverb.Server:
    """A server from the newest readable checkpoint, or empty when there is none.

    Raises ReplayCheckpointError when checkpoints exist but none can be read,
    unless `start_empty`.
    """
    checkpoints.tidy()
    failures = []
    for path in checkpoints.kept():
        server, reason = _try_restore(checkpoints, build, path)
        if server is None:
            failures.append((path, reason))
            logging.warning(
                "Replay checkpoint %s is unreadable: %s. Trying the previous one.", path, reason
            )
            continue
        _set_aside_all(checkpoints, failures)
        logging.info("Replay restored from %s.", path)
        return server
    if failures and not start_empty:
        raise ReplayCheckpointError(_none_readable_message(checkpoints.directory, failures))
    _set_aside_all(checkpoints, failures)
    if failures:
        logging.warning("Starting with an empty replay (--replay_start_empty).")
    return build(checkpoints.checkpointer(None))


def _try_restore(checkpoints, build, path: str):
    """(server, None) from the checkpoint at `path`, or (None, why it is unreadable)."""
    reason = wrong_size(path)
    if reason:
        return None, reason
    try:
        return build(checkpoints.checkpointer(path)), None
    except RuntimeError as error:  # what Reverb raises for a damaged checkpoint
        return None, damaged_file(path) or _first_line(str(error))


def _set_aside_all(checkpoints: ReplayCheckpoints, failures) -> None:
    for path, _ in failures:
        logging.warning("Moved the unreadable %s to %s.", path, checkpoints.set_aside(path))


def _write_sizes(path: str) -> None:
    sizes = {name: os.path.getsize(os.path.join(path, name)) for name in _FILES}
    temporary = os.path.join(path, paths.REPLAY_SIZES_FILE + ".tmp")
    with open(temporary, "w") as f:
        json.dump(sizes, f)
    os.replace(temporary, os.path.join(path, paths.REPLAY_SIZES_FILE))


def wrong_size(path: str) -> Optional[str]:
    """'chunks.tfrecord: 1364 of its 2728 bytes are left' when a file was cut, if any.

    Checkpoints adopted before the sizes were recorded are not checked.
    """
    listed = os.path.join(path, paths.REPLAY_SIZES_FILE)
    if not os.path.exists(listed):
        return None
    with open(listed) as f:
        sizes = json.load(f)
    for name, size in sizes.items():
        file = os.path.join(path, name)
        if not os.path.exists(file):
            return f"{name} is missing"
        left = os.path.getsize(file)
        if left != size:
            change = "are left (truncated)" if left < size else "are there (appended to)"
            return f"{name}: {left} of its {size} bytes {change}"
    return None


def damaged_file(path: str) -> Optional[str]:
    """'chunks.tfrecord: corrupted record at 0' for the first unreadable file, if any."""
    for name in _FILES:
        file = os.path.join(path, name)
        if not os.path.exists(file):
            return f"{name} is missing"
        try:
            for _ in tf.data.TFRecordDataset(file, compression_type="ZLIB"):
                pass
        except tf.errors.OpError as error:
            return f"{name}: {_first_line(re.sub(r'{{.*?}}', '', error.message))}"
    return None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text.strip() else "unknown error"


def _none_readable_message(directory: str, failures) -> str:
    listed = "; ".join(f"{os.path.basename(p)} ({reason})" for p, reason in failures)
    set_aside = os.path.join(directory, paths.REPLAY_UNREADABLE_DIR)
    return (
        f"None of the {len(failures)} replay checkpoint(s) in {directory} can be read: "
        f"{listed}. Either move {directory} aside (and keep it for inspection) to start "
        "with an empty replay, or pass --replay_start_empty to start empty now; the "
        f"unreadable checkpoints are then moved to {set_aside}. "
        "The learner's own checkpoints are not affected either way."
    )
