"""Replay checkpoints that cannot strand a run (issue 10), with the real server binary.

The server keeps the last --replay_checkpoints_to_keep checkpoints; a truncated
newest one falls back to the previous one; with none readable it refuses in
one paragraph, or starts empty with --replay_start_empty; a second SIGTERM
during the final checkpoint does not cut it short.
"""

import os
import signal
import subprocess
import sys
import time
from typing import Optional

import numpy as np
import portpicker
import pytest
import reverb
import tensorflow as tf
from support.processes import DEADLINE_S, read, start, stop, wait_for_log

from sac_distributed import replay
from sac_distributed.paths import REPLAY_CHECKPOINT_DIR
from sac_distributed.paths import REPLAY_SIZES_FILE as SIZES_FILE
from sac_distributed.paths import REPLAY_UNREADABLE_DIR as UNREADABLE_DIR
from sac_distributed.replay.replay_checkpoints import (
    ReplayCheckpoints,
    damaged_file,
    wrong_size,
)
from sac_distributed.runtime import StopSignal

pytestmark = pytest.mark.slow

FLAGS = [
    "--env_name=Pendulum-v1",
    "--replay_buffer_capacity=10000",
    "--transitions_per_item=1",
    "--replay_checkpoint_interval=0",  # only the final checkpoint, at SIGTERM
    "--stats_interval=5",
]
SERVING = r"listening on port"


class Server:
    """The server binary on one root_dir, started again and again on the same port."""

    def __init__(self, root: str):
        self.root = root
        self.port = portpicker.pick_unused_port()
        self.log = os.path.join(root, "server.log")
        self.proc = None

    def start(self, *extra: str) -> int:
        """Starts it; returns the log offset of this start."""
        mark = len(read(self.log))
        flags = [f"--root_dir={self.root}", f"--port={self.port}", *FLAGS, *extra]
        self.proc = start("reverb_server", flags, self.log)
        return mark

    def serve(self, *extra: str) -> int:
        mark = self.start(*extra)
        wait_for_log(self.log, SERVING, DEADLINE_S, {"server": self.proc}, start_at=mark)
        return mark

    def client(self) -> reverb.Client:
        return reverb.Client(f"localhost:{self.port}")

    def size(self) -> int:
        return replay.table_info(self.client(), replay.REPLAY_TABLE, timeout_s=60).current_size

    def write(self, count: int) -> None:
        writer = replay.TransitionWriter(self.client())
        obs = np.zeros(3, np.float32)
        for _ in range(count):
            writer.write(
                {
                    replay.OBSERVATION: obs,
                    replay.ACTION: np.zeros(1, np.float32),
                    replay.REWARD: np.float32(-1.0),
                    replay.DISCOUNT: np.float32(1.0),
                    replay.NEXT_OBSERVATION: obs,
                }
            )
            assert writer.throttle(timeout_ms=60_000)
        assert writer.close(timeout_ms=60_000) == 0

    def stop(self) -> str:
        """SIGTERM; returns the log of this run. It must exit 0."""
        assert stop(self.proc) == 0, read(self.log)[-3000:]
        return read(self.log)

    def kept(self):
        directory = os.path.join(self.root, REPLAY_CHECKPOINT_DIR)
        return sorted(
            (name for name in os.listdir(directory) if not name.startswith(".")), reverse=True
        )

    def cleanup(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def server(tmp_path):
    s = Server(str(tmp_path))
    yield s
    s.cleanup()


def _records(path: str) -> Optional[int]:
    """How many records the file reads back as, or None when reading fails."""
    try:
        return sum(1 for _ in tf.data.TFRecordDataset(path, compression_type="ZLIB"))
    except tf.errors.OpError:
        return None


def _cut(path: str, reads_cleanly: bool) -> None:
    """Cuts the file near its middle: where it still reads back as a shorter valid
    file (`reads_cleanly`, the cut Reverb restores without a word) or where it fails."""
    with open(path, "rb") as f:
        data = f.read()
    for size in range(len(data) // 2, 0, -1):
        with open(path, "wb") as f:
            f.write(data[:size])
        count = _records(path)
        if count if reads_cleanly else count is None:
            return
    raise AssertionError(f"no cut of {path} with reads_cleanly={reads_cleanly}")


def _truncate_chunks(server: Server, name: str) -> str:
    """As a save cut short would leave it, at a point Reverb's reader does not notice."""
    path = os.path.join(server.root, REPLAY_CHECKPOINT_DIR, name, "chunks.tfrecord")
    records = _records(path)
    _cut(path, reads_cleanly=True)
    assert 0 < _records(path) < records  # fewer, all valid: only the recorded sizes tell
    return path


def test_last_two_are_kept_and_a_truncated_newest_falls_back(server):
    server.serve()
    server.write(64)
    server.stop()
    first = server.kept()
    assert len(first) == 1
    server.serve()
    assert server.size() == 64
    server.write(64)
    server.stop()
    assert server.kept()[1:] == first  # the previous one is still there
    newest = server.kept()[0]

    _truncate_chunks(server, newest)
    mark = server.serve()
    log = read(server.log)[mark:]
    expected = (
        f"Replay checkpoint {os.path.join(server.root, REPLAY_CHECKPOINT_DIR, newest)} is "
        "unreadable: chunks.tfrecord: "
    )
    assert "bytes are left (truncated)" in log, log[-3000:]
    assert expected in log, log[-3000:]
    assert "Trying the previous one." in log
    assert (
        f"Replay restored from {os.path.join(server.root, REPLAY_CHECKPOINT_DIR, first[0])}" in log
    )
    assert server.size() == 64  # the previous checkpoint's content
    unreadable = os.path.join(server.root, REPLAY_CHECKPOINT_DIR, UNREADABLE_DIR)
    assert os.listdir(unreadable) == [newest]  # set aside, for inspection
    server.stop()
    kept = server.kept()
    assert len(kept) == 2 and kept[1] == first[0], kept  # a new newest; the oldest stays


def test_none_readable_is_refused_in_one_paragraph_or_started_empty(server):
    server.serve()
    server.write(32)
    server.stop()
    (only,) = server.kept()
    _truncate_chunks(server, only)

    server.start()
    assert server.proc.wait(timeout=DEADLINE_S) == 2
    text = read(server.log)
    errors = [line for line in text.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, text[-3000:]
    directory = os.path.join(server.root, REPLAY_CHECKPOINT_DIR)
    assert errors[0].startswith(
        f"error: None of the 1 replay checkpoint(s) in {directory} can be read: {only} "
        "(chunks.tfrecord: "
    ), errors[0]
    assert "move" in errors[0] and "--replay_start_empty" in errors[0]
    assert "Traceback" not in text

    mark = server.serve("--replay_start_empty")
    assert server.size() == 0
    assert "Starting with an empty replay (--replay_start_empty)." in read(server.log)[mark:]
    assert os.listdir(os.path.join(directory, UNREADABLE_DIR)) == [only]
    server.stop()


def test_sigterm_twice_as_timeout_sends_it_still_leaves_the_checkpoint(server):
    """Whether the second signal lands during the final checkpoint or after the
    exit depends on timing; in both cases the server must exit 0 with it."""
    server.serve()
    server.write(64)
    mark = len(read(server.log))
    # As `timeout` does: SIGTERM to the process, then again (to its group).
    server.proc.send_signal(signal.SIGTERM)
    wait_for_log(server.log, "Received SIGTERM: stopping gracefully", DEADLINE_S, start_at=mark)
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
    log = server.stop()[mark:]
    assert "Replay checkpoint written to" in log
    server.serve()
    assert server.size() == 64
    server.stop()


def test_a_second_signal_does_not_interrupt_final_work():
    """StopSignal with final work, given real signals in this process: the second
    SIGTERM and a SIGINT are logged and ignored instead of ending the process."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        stop_signal = StopSignal(finishing="writing the replay checkpoint").install()
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + DEADLINE_S
        while not stop_signal():
            assert time.monotonic() < deadline, "the first SIGTERM was never handled"
            time.sleep(0.01)
        for sig in (signal.SIGTERM, signal.SIGINT):
            os.kill(os.getpid(), sig)  # the old handler let these end the process
            time.sleep(0.1)  # Python runs handlers between bytecodes of the main thread
        assert signal.getsignal(signal.SIGTERM) == stop_signal._handle  # noqa: SLF001
        assert stop_signal()
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


_REENTERED = """
import signal, threading
from sac_distributed.runtime import StopSignal

for finishing in (None, "writing the replay checkpoint"):
    stop = StopSignal(finishing=finishing)
    # A signal that lands while this thread holds Event.set's lock: the old handler
    # called Event.set() there and waited for that lock forever.
    with stop._event._cond:
        stop._handle(signal.SIGTERM, None)
        stop._handle(signal.SIGTERM, None)
    woke = threading.Event()
    threading.Thread(target=lambda: stop.wait(60) and woke.set(), daemon=True).start()
    assert woke.wait(30) and stop()
print("handled")
"""


def test_a_signal_inside_event_set_does_not_hang_the_process():
    """The handler takes no lock: a burst of signals cannot deadlock the main thread,
    and a thread waiting on the signal still wakes."""
    done = subprocess.run(
        [sys.executable, "-c", _REENTERED], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "handled", done.stderr[-2000:]


def test_recorded_sizes_catch_a_clean_cut_and_the_reader_names_a_broken_record(tmp_path):
    """In process: a checkpoint adopted with its sizes; a cut at a record boundary is
    told by the sizes alone, and a cut inside a record by the reader too."""
    table = reverb.Table.queue("queue", 1000)
    checkpoints = ReplayCheckpoints(str(tmp_path), keep=2)
    server = reverb.Server([table], checkpointer=checkpoints.checkpointer(None))
    try:
        client = reverb.Client(f"localhost:{server.port}")
        for i in range(50):
            client.insert(np.full(64, i, np.float32), {"queue": 1.0})
        path = checkpoints.adopt(client.checkpoint())
    finally:
        server.stop()
    assert wrong_size(path) is None and damaged_file(path) is None
    assert os.path.exists(os.path.join(path, SIZES_FILE))

    chunks = os.path.join(path, "chunks.tfrecord")
    size = os.path.getsize(chunks)
    _cut(chunks, reads_cleanly=True)
    assert damaged_file(path) is None  # the reader alone sees nothing wrong
    assert wrong_size(path) == (
        f"chunks.tfrecord: {os.path.getsize(chunks)} of its {size} bytes are left (truncated)"
    )
    _cut(chunks, reads_cleanly=False)
    assert damaged_file(path).startswith("chunks.tfrecord: ")
    os.remove(os.path.join(path, SIZES_FILE))  # as a checkpoint from before sizes were kept
    assert wrong_size(path) is None
