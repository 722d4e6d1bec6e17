"""Reverb servers in child processes, and how much memory a filled one holds.

With `--server=subprocess` the throughput pieces talk to servers in other
processes, as the distributed job does; server_rss and stock_server_rss
always do, because a server's resident memory can only be read apart from
the benchmark's own. Ours is the real binary
(`python -m sac_distributed.bin.reverb_server`); the stock one is a bare
Reverb server holding the tutorial's table.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from typing import Callable, Dict, List, Sequence

import numpy as np
import portpicker
import reverb
from tf_agents.trajectories import trajectory

from benchmarks.bench.experience import write_rows
from benchmarks.bench.stock import STOCK_TABLE, stock_observer
from sac_distributed import replay
from sac_distributed.config import Hyperparams
from sac_distributed.errors import ServerUnreachableError

SERVER_START_TIMEOUT_S = 180.0

# stock.stock_table in a bare server: importing TensorFlow there would swell its memory.
_STOCK_SERVER_SCRIPT = """
import sys
import reverb
port, capacity, name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
table = reverb.Table(name, max_size=capacity, sampler=reverb.selectors.Uniform(),
                     remover=reverb.selectors.Fifo(),
                     rate_limiter=reverb.rate_limiters.MinSize(1))
reverb.Server([table], port=port).wait()
"""


class ServerProcess:
    """A Reverb server in a child process; stop() SIGKILLs it (no exit checkpoint)."""

    def __init__(self, argv: List[str], log_path: str, port: int):
        self._log = open(log_path, "w")
        self._log_path = log_path
        self.address = f"localhost:{port}"
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)

    def connect(self) -> reverb.Client:
        """A client once the server answers; its log in the error if it never does."""
        try:
            return replay.connect(self.address, SERVER_START_TIMEOUT_S, "benchmark")
        except ServerUnreachableError as e:
            with open(self._log_path) as f:
                tail = f.read()[-2000:]
            raise RuntimeError(f"Server did not start: {e}\n--- its log ---\n{tail}") from e

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # SIGKILL: skip the replay checkpoint a SIGTERM would write
        self.proc.wait()
        self._log.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def measurement_flags(hp: Hyperparams) -> List[str]:
    """Flags that give our binaries the benchmark's table and networks, with no
    rate limit and no random warm-up (as `settings.throughput_hparams`)."""
    layers = ",".join(str(u) for u in hp.actor_fc_layer_params)
    critic = ",".join(str(u) for u in hp.critic_joint_fc_layer_params)
    return [
        "--samples_per_insert=0",
        "--initial_collect_steps=0",
        f"--batch_size={hp.batch_size}",
        f"--transitions_per_item={hp.transitions_per_item}",
        f"--actor_fc_layer_params={layers}",
        f"--critic_joint_fc_layer_params={critic}",
    ]


def our_server_process(
    root_dir: str,
    env_name: str,
    hp: Hyperparams,
    capacity: int,
    extra_flags: Sequence[str] = (),
) -> ServerProcess:
    """`python -m sac_distributed.bin.reverb_server` with the benchmark's settings
    (and `extra_flags`, e.g. a shard's --num_replay_shards and --replay_shard)."""
    port = portpicker.pick_unused_port()
    argv = [
        sys.executable,
        "-m",
        "sac_distributed.bin.reverb_server",
        f"--root_dir={root_dir}",
        f"--env_name={env_name}",
        f"--port={port}",
        f"--replay_buffer_capacity={capacity}",
        *measurement_flags(hp),
        "--replay_checkpoint_interval=0",
        "--stats_interval=3600",
        *extra_flags,
    ]
    return ServerProcess(argv, os.path.join(root_dir, "log.txt"), port)


def stock_server_process(root_dir: str, capacity: int) -> ServerProcess:
    """A bare Reverb server holding the tutorial's table."""
    port = portpicker.pick_unused_port()
    argv = [sys.executable, "-c", _STOCK_SERVER_SCRIPT, str(port), str(capacity), STOCK_TABLE]
    return ServerProcess(argv, os.path.join(root_dir, "log.txt"), port)


def read_rss_mb(pid: int) -> float:
    """VmRSS of process `pid` in MiB, from /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"No VmRSS in /proc/{pid}/status")


def measure_server_rss(
    root_dir: str, env_name: str, hp: Hyperparams, items: int, rows: Sequence[np.ndarray]
) -> Dict[str, float]:
    """RSS of `python -m sac_distributed.bin.reverb_server` after `items` transitions."""
    k = hp.transitions_per_item
    capacity = max(hp.replay_buffer_capacity, -(-items // k) * k)
    with our_server_process(root_dir, env_name, hp, capacity) as server:
        client = server.connect()
        writer = replay.TransitionWriter(client)
        cycle = itertools.cycle(rows)

        def write(count: int) -> None:
            write_rows(writer, itertools.islice(cycle, -(-count // k) * k))

        return _fill_and_read_rss(server.proc.pid, client, replay.REPLAY_TABLE, write, items, k)


def measure_stock_server_rss(
    root_dir: str, capacity: int, items: int, trajectories: Sequence[trajectory.Trajectory]
) -> Dict[str, float]:
    """The same for the tutorial's table (2-step items) in a bare Reverb server."""
    with stock_server_process(root_dir, max(capacity, items)) as server:
        client = server.connect()
        observer = stock_observer(client)
        cycle = itertools.cycle(trajectories)

        def write(count: int) -> None:
            for traj in itertools.islice(cycle, count):
                observer(traj)
            observer.flush()

        return _fill_and_read_rss(server.proc.pid, client, STOCK_TABLE, write, items)


def _fill_and_read_rss(
    pid: int,
    client: reverb.Client,
    table: str,
    write: Callable[[int], None],
    items: int,
    transitions_per_item: int = 1,
) -> Dict[str, float]:
    """Fills `table` with `items` transitions; `size` counts transitions (items x K)."""
    time.sleep(1.0)  # let the freshly started server settle before the baseline
    before = read_rss_mb(pid)
    size = 0
    while size < items:
        write(min(10_000, items - size))
        size = client.server_info(timeout=10)[table].current_size * transitions_per_item
    time.sleep(1.0)
    after = read_rss_mb(pid)
    return {
        "rss_mb": after,
        "rss_before_mb": before,
        "bytes_per_transition": (after - before) * 2**20 / size,
        "items": float(size),
    }
