"""Time-to-return mode: wall time until the greedy eval return reaches a target.

Ours runs `sac-launch` as a subprocess and watches root_dir/eval/results.csv;
stock runs the TF-Agents tutorial loop in-process (collect one step, train
one step, evaluate every eval_interval and at step 0). The two alternate for
--repeats rounds; the report is each side's median time, a run that missed
the target within --max_minutes counting as endless.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Callable, Dict, List, Optional

from absl import logging

from benchmarks.bench.sac_launch import sac_launch_executable, stop_process_group
from benchmarks.bench.settings import Settings, preset_hparams
from benchmarks.bench.stock import EVAL_SEED_OFFSET, make_stock_evaluator, make_stock_tutorial_loop
from benchmarks.bench.timing import median_time
from sac_distributed import paths, results
from sac_distributed.config import Hyperparams
from sac_distributed.envs import loader as env_loader
from sac_distributed.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Reached:
    """When (seconds since start) and where an eval first reached the target."""

    seconds: float
    train_step: int
    env_steps: int
    average_return: float


def run_time_to_return(s: Settings) -> Dict[str, object]:
    """Alternates stock and ours for --repeats rounds; median time (inf = not reached)."""
    hp = preset_hparams(s)
    sides: Dict[str, Callable[[], Optional[Reached]]] = {
        "stock": lambda: stock_time_to_return(s, hp),
        "ours": lambda: ours_time_to_return(s),
    }
    runs: Dict[str, List[Optional[Reached]]] = {side: [] for side in sides}
    for round_index in range(s.repeats):
        for side, run in sides.items():
            logging.info(
                "Round %d/%d: %s time to return %.0f.",
                round_index + 1,
                s.repeats,
                side,
                s.target_return,
            )
            runs[side].append(run())
            logging.info("%s: %s", side, runs[side][-1])
    return {
        "mode": "time_to_return",
        "stock_time_to_return_s": _median_seconds(runs["stock"]),
        "time_to_return_s": _median_seconds(runs["ours"]),
        "target_return": s.target_return,
        "max_minutes": s.max_minutes,
        "config": {
            "env_name": s.env_name,
            "layers": list(hp.actor_fc_layer_params),
            "batch_size": hp.batch_size,
            "num_actors": s.num_actors,
            "repeats": s.repeats,
        },
        "runs": {
            side: [dataclasses.asdict(r) if r else None for r in rs] for side, rs in runs.items()
        },
    }


def _median_seconds(reached: List[Optional[Reached]]) -> Optional[float]:
    return median_time([r.seconds if r else None for r in reached])


# --- stock: the tutorial loop, in-process ------------------------------------------


def stock_time_to_return(s: Settings, hp: Hyperparams) -> Optional[Reached]:
    """The TF-Agents SAC tutorial loop, in-process, until the target or the cap."""
    start = time.monotonic()
    deadline = start + 60.0 * s.max_minutes
    collect_env = env_loader.load_env(s.env_name, s.seed)
    eval_env = env_loader.load_env(s.env_name, s.seed + EVAL_SEED_OFFSET)
    loop = make_stock_tutorial_loop(collect_env, s.env_name, hp, s.seed)
    try:
        evaluate = make_stock_evaluator(eval_env, loop.agent, loop.train_step, hp.num_eval_episodes)
        step = 0
        while True:
            if step % hp.eval_interval == 0:
                average, _ = evaluate()
                logging.info("stock: train_step %d, eval AverageReturn %.1f", step, average)
                if average >= s.target_return:
                    env_steps = hp.initial_collect_steps + step
                    return Reached(time.monotonic() - start, step, env_steps, average)
            if time.monotonic() >= deadline:
                return None
            loop.collect.run()
            loop.learner.run(iterations=1)
            step = int(loop.learner.train_step_numpy)
    finally:
        loop.close()


# --- ours: sac-launch, watched through its results file ------------------------------


def launch_command(s: Settings, root_dir: str) -> List[str]:
    """`sac-launch` with the shared flags this benchmark controls."""
    argv = [
        sac_launch_executable(),
        f"--root_dir={root_dir}",
        f"--env_name={s.env_name}",
        f"--num_actors={s.num_actors}",
        f"--seed={s.seed}",
    ]
    if s.batch_size:
        argv.append(f"--batch_size={s.batch_size}")
    if s.layers:
        layers = ",".join(str(u) for u in s.layers)
        argv += [f"--actor_fc_layer_params={layers}", f"--critic_joint_fc_layer_params={layers}"]
    if s.num_envs > 1:
        argv.append(f"--num_envs={s.num_envs}")
    return argv + list(s.launch_flags)


def ours_time_to_return(s: Settings) -> Optional[Reached]:
    """Runs sac-launch and watches root_dir/eval/results.csv until the target or the cap."""
    root_dir = tempfile.mkdtemp(prefix="sac_bench_launch_")
    log_path = os.path.join(root_dir, "launch_output.txt")
    argv = launch_command(s, root_dir)
    logging.info("ours: %s", " ".join(argv))
    start_wall = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            reached = _watch_results(paths.results_path(root_dir), proc, start_wall, s)
        finally:
            stop_process_group(proc)
    if reached is None and proc.returncode not in (0, -signal.SIGTERM, None):
        with open(log_path) as f:
            logging.warning(
                "sac-launch exited %s; last output:\n%s", proc.returncode, f.read()[-3000:]
            )
    shutil.rmtree(root_dir, ignore_errors=True)
    return reached


def _watch_results(
    path: str, proc: subprocess.Popen, start_wall: float, s: Settings
) -> Optional[Reached]:
    """Polls the evaluator's results until a row reaches the target, the job ends or the cap."""
    deadline = start_wall + 60.0 * s.max_minutes
    while time.time() < deadline:
        exited = proc.poll() is not None
        for point in read_points_so_far(path):
            if point.average_return >= s.target_return:
                return Reached(
                    point.wall_time - start_wall,
                    point.train_step,
                    point.env_steps,
                    point.average_return,
                )
        if exited:
            logging.warning("sac-launch exited (code %s) before the target.", proc.returncode)
            return None
        time.sleep(1.0)
    return None


def read_points_so_far(path: str) -> List[results.EvalPoint]:
    """The evaluations so far; none while the file is missing or a row half written."""
    try:
        return results.read_results(path)
    except ConfigError:
        return []


def format_time_to_return_table(result: Dict[str, object]) -> str:
    """The human-readable report: each side's median, then every round."""

    def show(v: Optional[float]) -> str:
        return "not reached" if v is None else f"{v:.1f} s"

    c = result["config"]
    lines = [
        f"Time to eval AverageReturn >= {result['target_return']:g} on {c['env_name']} "
        f"(cap {result['max_minutes']:g} min, {c['repeats']} round(s), median):",
        f"  stock tutorial loop (in-process): {show(result['stock_time_to_return_s'])}",
        f"  sac-launch, {c['num_actors']} actor(s): {show(result['time_to_return_s'])}",
    ]
    for side, rs in result["runs"].items():
        for i, r in enumerate(rs):
            detail = (
                "not reached"
                if r is None
                else (
                    f"{r['seconds']:.1f} s at train_step {r['train_step']}, env_steps "
                    f"{r['env_steps']}, return {r['average_return']:.1f}"
                )
            )
            lines.append(f"  {side} round {i + 1}: {detail}")
    return "\n".join(lines)
