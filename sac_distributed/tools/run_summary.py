"""A run at a glance from its root_dir alone: what `sac-status --root_dir` shows
without a server (a finished run, or one whose server is gone).

It reads only files whose names `paths` defines: run_info.json (the env and
the settings), the learner's checkpoint index files, the evaluator's
results.csv, the exported policies, the actors' episodes.csv and the replay
checkpoint folders. It imports neither Reverb nor TensorFlow.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
from typing import Any, Dict, Optional, Tuple

from sac_distributed import paths
from sac_distributed.errors import ConfigError
from sac_distributed.results import EvalPoint, merge_actor_episodes, read_results
from sac_distributed.run_info import read_run_info

_CHECKPOINT_STEP = re.compile(rf"{paths.CHECKPOINT_PREFIX}-(\d+)\.index$")
_LAST_EPISODES = 10


@dataclasses.dataclass(frozen=True)
class RunSummary:
    root_dir: str
    run_info: Optional[Dict[str, Any]]
    checkpoint_steps: Tuple[int, ...]  # learner checkpoints on disk, ascending
    evaluations: Tuple[EvalPoint, ...]
    policies: Tuple[str, ...]  # exported SavedModels (paths.POLICY_NAMES present)
    episodes: Tuple[Tuple[int, float], ...]  # (env steps, return) of training episodes
    actors_seen: int
    replay_checkpoints: int  # over every shard's folder

    @property
    def is_empty(self) -> bool:
        return not (self.run_info or self.checkpoint_steps or self.evaluations)


def read_run(root_dir: str) -> RunSummary:
    """Everything the summary shows; raises ConfigError for a missing directory."""
    if not os.path.isdir(root_dir):
        raise ConfigError(f"--root_dir {root_dir} does not exist.")
    steps = sorted(
        int(match.group(1))
        for path in glob.glob(paths.checkpoint_index_pattern(root_dir))
        if (match := _CHECKPOINT_STEP.search(os.path.basename(path)))
    )
    results = paths.results_path(root_dir)
    collect = paths.collect_dir(root_dir)
    actors = glob.glob(os.path.join(collect, f"{paths.ACTOR_DIR_PREFIX}*"))
    return RunSummary(
        root_dir=root_dir,
        run_info=read_run_info(root_dir),
        checkpoint_steps=tuple(steps),
        evaluations=tuple(read_results(results)) if os.path.exists(results) else (),
        policies=tuple(
            name for name in paths.POLICY_NAMES if os.path.isdir(paths.policy_dir(root_dir, name))
        ),
        episodes=tuple(merge_actor_episodes(paths.actor_episode_files(root_dir))),
        actors_seen=len([a for a in actors if os.path.isdir(a)]),
        replay_checkpoints=_count_replay_checkpoints(root_dir),
    )


def _count_replay_checkpoints(root_dir: str) -> int:
    pattern = os.path.join(root_dir, paths.REPLAY_CHECKPOINT_DIR + "*", "*")
    # .writing and .unreadable hold no restorable checkpoint
    return len([p for p in glob.glob(pattern) if os.path.isdir(p)])


def format_run(summary: RunSummary) -> str:
    """A few lines: the env and settings, checkpoints, evaluations, policies, actors."""
    lines = [f"Run in {summary.root_dir} (from its files)"]
    lines.append("  " + _settings_line(summary.run_info))
    if summary.checkpoint_steps:
        lines.append(
            f"  learner checkpoints: {len(summary.checkpoint_steps)}, the latest at "
            f"train_step {summary.checkpoint_steps[-1]}"
        )
    else:
        lines.append("  learner checkpoints: none")
    lines.append("  " + _evaluations_line(summary.evaluations))
    lines.append(
        "  exported policies: "
        + (", ".join(summary.policies) if summary.policies else "none")
        + f"; replay checkpoints: {summary.replay_checkpoints}"
    )
    lines.append("  " + _episodes_line(summary))
    return "\n".join(lines)


def _settings_line(info: Optional[Dict[str, Any]]) -> str:
    if not info:
        return f"env: unknown (no {paths.RUN_INFO_FILE}: the learner writes it when it starts)"
    hparams = info.get("hparams", {})

    def sizes(name: str) -> str:
        return ",".join(str(v) for v in hparams.get(name) or ()) or "?"

    return (
        f"env: {info.get('env_name', '?')}; actor {sizes('actor_fc_layer_params')}, critic "
        f"{sizes('critic_joint_fc_layer_params')}; num_iterations "
        f"{hparams.get('num_iterations', '?')}"
    )


def _evaluations_line(points) -> str:
    if not points:
        return "evaluations: none"
    first, last = points[0], points[-1]
    best = max(points, key=lambda p: p.average_return)
    return (
        f"evaluations: {len(points)}, return {first.average_return:.1f} at train_step "
        f"{first.train_step} -> {last.average_return:.1f} at train_step {last.train_step} "
        f"({last.env_steps} env steps); best {best.average_return:.1f} at train_step "
        f"{best.train_step}"
    )


def _episodes_line(summary: RunSummary) -> str:
    line = f"actors seen: {summary.actors_seen}; training episodes: {len(summary.episodes)}"
    if summary.episodes:
        last = [ret for _, ret in summary.episodes[-_LAST_EPISODES:]]
        line += f", the last {len(last)} averaged {sum(last) / len(last):.1f}"
    return line
