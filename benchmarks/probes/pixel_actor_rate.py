"""How fast an actor steps a camera env, against the rendered env alone.

Issue 71 item 4: an actor on a pixel env should keep >= 80% of the raw rendered
env's steps/s. Both sides load the env as a run does (`load_env` with the frame
stack; a user's `module:factory` from --module_dir):

  raw    the env stepped with uniform random actions: the ceiling;
  actor  `jobs.actor_loop.ActorLoop` writing through `replay.FrameWriter` to a
         real in-process Reverb server (`replay.make_tables`), acting with the
         NumPy conv policy (`pixel_policy.NumpyPixelActorPolicy`) on weights of
         the run's shapes pushed to the variable container, warm-up 0, so every
         step pays the encoder and actor and the frame write.

Rounds alternate; medians reported, JSON on stdout (and in --out):

    python benchmarks/probe.py pixel_actor_rate --env_name=pointmass:make_env \
        --module_dir=examples --env_kwargs='{"pixels": true}'
    python benchmarks/probe.py pixel_actor_rate --env_name=mujoco_pixels:make_env \
        --module_dir=examples --env_kwargs='{"size": 84}' --seconds=20
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Optional

import numpy as np
import reverb

import benchmarks.bench  # noqa: F401  (imports sac_distributed first: it selects Keras 2)
from sac_distributed import config as config_lib
from sac_distributed import replay
from sac_distributed.algorithm.pixel_policy import acting_weight_shapes_for
from sac_distributed.algorithm.policy import ObservationNormalization
from sac_distributed.envs import loader
from sac_distributed.jobs.actor_loop import ActorLoop
from sac_distributed.replay.connection import Connection
from sac_distributed.replay.variables import VariableContainer
from sac_distributed.runtime import Metrics


def _load(args, seed: int):
    return loader.load_env(
        args.env_name,
        seed,
        config_lib.parse_env_kwargs(args.env_kwargs),
        module_dirs=(args.module_dir,) if args.module_dir else (),
        frame_stack=args.frame_stack,
    )


def raw_rate(env, seconds: float, seed: int) -> float:
    spec = env.action_spec()
    rng = np.random.default_rng(seed)
    env.reset()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step = env.step(rng.uniform(spec.minimum, spec.maximum, spec.shape).astype(spec.dtype))
        if step.is_last():
            env.reset()
        steps += 1
    return steps / (time.perf_counter() - start)


def actor_rate(args, env, hparams, address: str, seconds: float) -> float:
    client_config = config_lib.ClientConfig(address, address, connect_timeout_s=30.0)
    config = config_lib.ActorConfig(
        args.env_name, hparams, tempfile.mkdtemp(), client=client_config, seed=0
    )
    connection = Connection(client_config, "probe actor", lambda: False)
    connection.open()
    deadline = time.monotonic() + seconds
    loop = ActorLoop(config, [env], connection, Metrics(None), lambda: time.monotonic() >= deadline)
    start = time.monotonic()
    stats = loop.run()
    if stats.weight_updates < 1 or not loop.warm:
        raise SystemExit("the actor ran without weights: it would not measure the policy")
    return stats.env_steps / (time.monotonic() - start)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env_name", default="pointmass:make_env")
    p.add_argument("--env_kwargs", default='{"pixels": true}')
    p.add_argument("--module_dir", default="examples", help="where the env's module is")
    p.add_argument("--frame_stack", type=int, default=3)
    p.add_argument("--seconds", type=float, default=10.0, help="per measurement")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    if args.module_dir:
        args.module_dir = os.path.abspath(args.module_dir)
    hparams = config_lib.Hyperparams(
        initial_collect_steps=0,
        frame_stack=args.frame_stack,
        samples_per_insert=None,
        actor_fc_layer_params=(1024, 1024),  # DrQ's
    )
    env = _load(args, 0)
    specs = loader.env_specs(env, args.env_name)
    if not specs.is_image:
        raise SystemExit(f"{args.env_name} does not observe a camera image")
    server_config = config_lib.ServerConfig(args.env_name, hparams, tempfile.mkdtemp())
    server = reverb.Server(replay.make_tables(server_config, specs), port=None)
    address = f"localhost:{server.port}"
    rng = np.random.default_rng(0)
    weights = [
        rng.normal(0, 0.05, shape).astype(np.float32)
        for shape in acting_weight_shapes_for(specs, hparams)
    ]
    normalization = ObservationNormalization.identity(specs.observation.shape)
    VariableContainer(reverb.Client(address)).push(weights, 1, normalization=normalization)
    rows: Dict[str, list] = {"raw": [], "actor": []}
    for _ in range(args.rounds):
        rows["raw"].append(raw_rate(env, args.seconds, 0))
        rows["actor"].append(actor_rate(args, env, hparams, address, args.seconds))
    server.stop()
    raw, actor = (statistics.median(rows[k]) for k in ("raw", "actor"))
    result = dict(
        machine=f"{platform.machine()}, {os.cpu_count()} CPUs",
        env_name=args.env_name,
        env_kwargs=args.env_kwargs,
        observation_shape=specs.observation.shape.as_list(),
        actor_layers=list(hparams.actor_fc_layer_params),
        raw_env_steps_per_s=round(raw, 1),
        actor_env_steps_per_s=round(actor, 1),
        actor_fraction_of_raw_env=round(actor / raw, 3),
        rounds=rows,
    )
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
