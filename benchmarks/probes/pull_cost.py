"""What one weight pull costs an actor, against a server in another process.

Starts `sac_distributed.bin.reverb_server` for an environment's preset, pushes
the preset's policy weights once, and times from a second client:
  server_info     Reverb's `Client.server_info` (decodes every table's signature)
  table_counts    `replay.table_counts` (the same answer, signatures left encoded)
  pull_unchanged  `VariableContainer.pull` when the learner has not pushed since
  push_and_pull   a push, then a pull that fetches the new weights

Milliseconds per call, wall and CPU of this process, as JSON on stdout (and in
--out when given):

    python benchmarks/probe.py pull_cost --env_name=HalfCheetahBulletEnv-v0 --calls=300
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional

import numpy as np
import portpicker
import reverb

import sac_distributed  # noqa: F401  (selects Keras 2 before TensorFlow)
from sac_distributed import config as config_lib
from sac_distributed import replay
from sac_distributed.envs import loader as env_loader
from sac_distributed.replay.variables import VariableContainer


def _time(fn: Callable[[], object], calls: int) -> Dict[str, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    return {
        "wall_ms": round((time.perf_counter() - wall) / calls * 1e3, 3),
        "cpu_ms": round((time.process_time() - cpu) / calls * 1e3, 3),
    }


def measure(env_name: str, calls: int) -> Dict[str, object]:
    port = portpicker.pick_unused_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "sac_distributed.bin.reverb_server",
         f"--root_dir={tempfile.mkdtemp()}", f"--env_name={env_name}", f"--port={port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        address = f"localhost:{port}"
        client = replay.connect(address, 300, "pull_cost")
        hparams = config_lib.hyperparams_for(env_name, {})
        shapes = replay.variable_signature(env_loader.specs_for(env_name), hparams)[
            replay.POLICY_VARIABLES
        ]
        weights = [np.zeros(s.shape, np.float32) for s in shapes]
        learner = VariableContainer(client)
        step = iter(range(1, 10**9))
        learner.push(weights, train_step=next(step))
        actor = VariableContainer(reverb.Client(address))
        actor.pull()

        def push_and_pull():
            learner.push(weights, train_step=next(step))
            actor.pull()

        return {
            "env_name": env_name,
            "weight_bytes": int(sum(w.nbytes for w in weights)),
            "calls": calls,
            "server_info": _time(lambda: client.server_info(timeout=10), calls),
            # (absent before replay.table_counts existed, to time the old pull too)
            "table_counts": _time(lambda: replay.table_counts(client, 10), calls)
            if hasattr(replay, "table_counts")
            else None,
            "pull_unchanged": _time(actor.pull, calls),
            "push_and_pull": _time(push_and_pull, max(1, calls // 3)),
        }
    finally:
        server.terminate()
        server.wait()


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env_name", default="HalfCheetahBulletEnv-v0")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    result = measure(args.env_name, args.calls)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0
