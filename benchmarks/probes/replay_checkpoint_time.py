"""How long the server's final replay checkpoint takes for a full table.

The stop grace periods in launch/docker-compose.yml must cover it, or Docker
and Kubernetes SIGKILL the server mid-save. Fills the replay table of an
environment's preset (default: HalfCheetahBulletEnv-v0, 1M transitions at
K=8) through the actors' writer, then times `ServerLoop.checkpoint()` (the
Reverb save plus the move among the kept checkpoints) and a restore.

    python benchmarks/probe.py replay_checkpoint_time [--env_name=...] [--fill=1.0]
"""

import argparse
import os
import tempfile
import time
from typing import List, Optional

import numpy as np

import sac_distributed  # noqa: F401  (selects Keras 2 before TensorFlow)
from sac_distributed import config as config_lib
from sac_distributed import replay
from sac_distributed.envs import loader as env_loader
from sac_distributed.jobs.server import ServerLoop, make_server
from sac_distributed.runtime import Metrics


def _fill(server, specs, transitions: int) -> float:
    layout = replay.row_layout(specs)
    writer = replay.TransitionWriter(server.localhost_client())
    rows = np.random.default_rng(0).uniform(-1, 1, (1024, layout.width)).astype(np.float32)
    start = time.monotonic()
    for i in range(transitions):
        writer.write_row(rows[i % len(rows)])
        writer.throttle(timeout_ms=60_000)
    writer.close(timeout_ms=600_000)
    return time.monotonic() - start


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env_name", default="HalfCheetahBulletEnv-v0", help="whose preset to use")
    p.add_argument("--fill", type=float, default=1.0, help="share of the replay capacity to fill")
    args = p.parse_args(argv)
    hparams = config_lib.hyperparams_for(args.env_name)
    root = tempfile.mkdtemp(prefix="replay_ckpt_")
    config = config_lib.ServerConfig(args.env_name, hparams, root, port=0)
    specs = env_loader.specs_for(args.env_name)
    server = make_server(config)
    transitions = int(hparams.replay_buffer_capacity * args.fill)
    fill_s = _fill(server, specs, transitions)
    loop = ServerLoop(config, server, Metrics(None))
    start = time.monotonic()
    path = loop.checkpoint()
    save_s = time.monotonic() - start
    size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    server.stop()
    start = time.monotonic()
    restored = make_server(config)
    restore_s = time.monotonic() - start
    items = replay.table_info(restored.localhost_client(), replay.REPLAY_TABLE).current_size
    restored.stop()
    print(
        f"{args.env_name}: {transitions} transitions (K={hparams.transitions_per_item}, "
        f"filled in {fill_s:.0f} s): checkpoint {size / 2**20:.0f} MiB saved in {save_s:.1f} s, "
        f"restored ({items} items) in {restore_s:.1f} s"
    )
    return 0
