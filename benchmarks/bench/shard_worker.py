"""One writer/sampler process of replay_shards mode, driven over stdin and stdout.

    python -m bench.shard_worker --env_name=Pendulum-v1 --transitions_per_item=1 --seed=3

The benchmark starts many of these (processes, not threads: in one process
the GIL, not the server, would cap the writers) and sends each one JSON
request per line on stdin; the worker answers with one JSON line on stdout:

  {"cmd": "prepare_writer", "address": A}   a TransitionWriter on A, a few rows written
  {"cmd": "write", "start": t0, "end": t1}  writes as fast as it can until t1; replies
                                            {"per_s": transitions/s written in [t0, t1]}
  {"cmd": "prepare_sampler", "address": A, "batch_size": B}  replay.make_dataset on A
  {"cmd": "sample", "start": t0, "end": t1} draws batches until t1; replies {"per_s": ...}
  {"cmd": "exit"}

t0 and t1 are `time.monotonic()` values, which all processes on one Linux
machine share (CLOCK_MONOTONIC). Work before t0 is the lead-in and is not
counted. A failed request replies {"error": traceback}. Everything other than
the replies (TensorFlow and Reverb logs) goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from typing import Dict, Iterator, Optional, TextIO

import numpy as np

from sac_distributed import replay
from sac_distributed.envs import loader as env_loader

CONNECT_TIMEOUT_S = 120.0
ROWS_PER_CLOCK_READ = 32  # rows written between two looks at the clock
DISTINCT_ROWS = 1024  # random rows cycled through (their content does not matter)


class ShardWorker:
    """Writes to or samples from one replay server at a time, on request."""

    def __init__(self, env_name: str, transitions_per_item: int, seed: int):
        self._specs = env_loader.specs_for(env_name)
        self._k = transitions_per_item
        width = replay.row_layout(self._specs).width
        rng = np.random.default_rng(seed)
        self._rows = rng.standard_normal((DISTINCT_ROWS, width)).astype(np.float32)
        self._writer: Optional[replay.TransitionWriter] = None
        self._batches: Optional[Iterator] = None
        self._batch_size = 0

    def handle(self, request: Dict[str, object]) -> Dict[str, object]:
        """Runs one request; its reply."""
        cmd = request["cmd"]
        if cmd == "prepare_writer":
            return self.prepare_writer(str(request["address"]))
        if cmd == "write":
            return {"per_s": self.write(float(request["start"]), float(request["end"]))}
        if cmd == "prepare_sampler":
            return self.prepare_sampler(str(request["address"]), int(request["batch_size"]))
        if cmd == "sample":
            return {"per_s": self.sample(float(request["start"]), float(request["end"]))}
        raise ValueError(f"unknown request {cmd!r}")

    def prepare_writer(self, address: str) -> Dict[str, object]:
        """A TransitionWriter on `address`, past its first (slow-path) rows."""
        client = replay.connect(address, CONNECT_TIMEOUT_S, "benchmark writer")
        self._writer = replay.TransitionWriter(client, self._k)
        self._write_rows(0, 2 * self._k)
        self._writer.flush()
        return {"ok": True}

    def write(self, start: float, end: float) -> float:
        """Writes and throttles as ActorLoop does until `end`; transitions/s in [start, end]."""
        writer = self._writer
        if writer is None:
            raise RuntimeError("write before prepare_writer")
        i, counted_from, t_start = 0, None, start
        now = time.monotonic()
        while now < end:
            i = self._write_rows(i, ROWS_PER_CLOCK_READ)
            now = time.monotonic()
            if counted_from is None and now >= start:
                counted_from, t_start = writer.items_written, now
        written = writer.items_written - (counted_from or 0)
        writer.close()
        self._writer = None
        return written / max(now - t_start, 1e-9) if counted_from is not None else 0.0

    def _write_rows(self, i: int, count: int) -> int:
        """Writes `count` rows from row i of the cycle; the next row's index."""
        rows, writer = self._rows, self._writer
        for _ in range(count):
            writer.write_row(rows[i % DISTINCT_ROWS])
            while not writer.throttle():
                pass
            i += 1
        return i

    def prepare_sampler(self, address: str, batch_size: int) -> Dict[str, object]:
        """replay.make_dataset on `address` alone, one batch drawn (traced, streams open)."""
        replay.connect(address, CONNECT_TIMEOUT_S, "benchmark sampler")
        dataset = replay.make_dataset(
            address, self._specs, batch_size, transitions_per_item=self._k
        )
        self._batches = iter(dataset)
        self._batch_size = batch_size
        next(self._batches)
        return {"ok": True}

    def sample(self, start: float, end: float) -> float:
        """Draws batches until `end`; transitions/s drawn in [start, end]."""
        if self._batches is None:
            raise RuntimeError("sample before prepare_sampler")
        drawn, t_start = 0, None
        now = time.monotonic()
        while now < end:
            next(self._batches)
            now = time.monotonic()
            if t_start is None:
                if now >= start:
                    t_start = now
            else:
                drawn += self._batch_size
        self._batches = None
        return drawn / max(now - t_start, 1e-9) if t_start is not None else 0.0


def _reserve_stdout() -> TextIO:
    """Points fd 1 at stderr (C-level chatter) and returns the old stdout for replies."""
    sys.stdout.flush()
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    return replies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env_name", required=True)
    parser.add_argument("--transitions_per_item", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    replies = _reserve_stdout()
    worker = ShardWorker(args.env_name, args.transitions_per_item, args.seed)
    replies.write(json.dumps({"ok": True, "started": True}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        if request["cmd"] == "exit":
            break
        try:
            reply = worker.handle(request)
        except Exception:  # the benchmark raises it, with this traceback
            reply = {"error": traceback.format_exc()}
        replies.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
