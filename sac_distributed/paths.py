"""The run directory: every name a job reads or writes under root_dir.

All jobs of one run share one root_dir (a local path or a shared volume). Its
layout is a contract between processes that never import each other (the
learner writes checkpoints and policies, sac-evaluate and the notebook read
them, sac-status counts the actors' summary directories, sac-launch and
sac-plot read the evaluator's results), so it is written down here once, in a
module that imports nothing heavier than `os`: the tools can know the layout
without importing TensorFlow, the learner or the evaluator.

    root_dir/
      run_info.json                   env and hparams of the learner that owns the run
      learner.lock                    flock naming that learner
      train/                          learner summaries
      train/checkpoints/ckpt-<step>*  learner checkpoints
      policies/<policy name>/         SavedModel exports (POLICY_NAMES)
      eval/                           evaluator summaries
      eval/results.csv                one row per evaluation (RESULTS_HEADER)
      collect/actor_<task>/           actor summaries
      collect/actor_<task>/episodes.csv  one row per training episode (EPISODES_HEADER)
      server/                         Reverb server summaries
      server_shard<i>/                summaries of replay shard i > 0
      replay_checkpoints/<time>/      Reverb checkpoints (.writing/, .unreadable/)
      replay_checkpoints_shard<i>/    those of replay shard i > 0 (shard 0: the above)
      server.lock, server_shard<i>.lock  flock of the server serving that replay shard
      logs/<job>.log                  per-process logs written by sac-launch

A new file in the run directory gets its name here, next to its neighbours.
"""

from __future__ import annotations

import os
from typing import List

# --- the learner ---------------------------------------------------------------
RUN_INFO_FILE = "run_info.json"  # env_name + hparams; sac-evaluate reads the env from it
LOCK_FILE = "learner.lock"  # ownership.RootDirLock's flock
TRAIN_DIR = "train"  # learner TensorBoard summaries
CHECKPOINT_DIR = os.path.join(TRAIN_DIR, "checkpoints")
CHECKPOINT_PREFIX = "ckpt"  # files ckpt-<train_step>.index / .data-*
POLICIES_DIR = "policies"
POLICY_NAMES = ("policy", "collect_policy", "greedy_policy")

# --- the evaluator -------------------------------------------------------------
EVAL_DIR = "eval"  # evaluator TensorBoard summaries and results
RESULTS_FILE = "results.csv"
RESULTS_HEADER = (
    "train_step",
    "env_steps",
    "average_return",
    "average_episode_length",
    "wall_time",
)

# --- actors and server -------------------------------------------------------
COLLECT_DIR = "collect"
ACTOR_DIR_PREFIX = "actor_"  # collect/actor_<task>
EPISODES_FILE = "episodes.csv"  # collect/actor_<task>/episodes.csv
EPISODES_HEADER = ("wall_time", "actor_env_steps", "episode_return", "episode_length")
ACTOR_LOCK_FILE = "actor.lock"  # collect/actor_<task>/actor.lock: ActorSlot's flock
SERVER_SUMMARY_DIR = "server"
REPLAY_CHECKPOINT_DIR = "replay_checkpoints"
REPLAY_WRITING_DIR = ".writing"  # the replay checkpoint being written
REPLAY_UNREADABLE_DIR = ".unreadable"  # replay checkpoints that failed to load
REPLAY_SIZES_FILE = "sac_file_sizes.json"  # in each adopted replay checkpoint
SHARD_SUFFIX = "_shard"  # replay shard i > 0: replay_checkpoints_shard<i>, server_shard<i>
SERVER_LOCK_NAME = "server"  # server.lock, server_shard<i>.lock: ShardLock's flock

# --- the local launcher ------------------------------------------------------
LOG_DIR = "logs"  # logs/<job>.log


def run_info_path(root_dir: str) -> str:
    return os.path.join(root_dir, RUN_INFO_FILE)


def lock_path(root_dir: str) -> str:
    return os.path.join(root_dir, LOCK_FILE)


def train_dir(root_dir: str) -> str:
    return os.path.join(root_dir, TRAIN_DIR)


def checkpoint_dir(root_dir: str) -> str:
    return os.path.join(root_dir, CHECKPOINT_DIR)


def checkpoint_index_pattern(root_dir: str) -> str:
    """A glob matching the index file of every complete learner checkpoint."""
    return os.path.join(checkpoint_dir(root_dir), f"{CHECKPOINT_PREFIX}-*.index")


def policies_dir(root_dir: str) -> str:
    return os.path.join(root_dir, POLICIES_DIR)


def policy_dir(root_dir: str, name: str) -> str:
    """The SavedModel of one exported policy (one of POLICY_NAMES)."""
    return os.path.join(root_dir, POLICIES_DIR, name)


def eval_dir(root_dir: str) -> str:
    return os.path.join(root_dir, EVAL_DIR)


def results_path(root_dir: str) -> str:
    """Where the evaluator of a run on `root_dir` writes its results."""
    return os.path.join(root_dir, EVAL_DIR, RESULTS_FILE)


def collect_dir(root_dir: str) -> str:
    return os.path.join(root_dir, COLLECT_DIR)


def actor_summary_dir(root_dir: str, task: int) -> str:
    return os.path.join(root_dir, COLLECT_DIR, f"{ACTOR_DIR_PREFIX}{task}")


def episodes_path(root_dir: str, task: int) -> str:
    """Where actor `task` logs each finished training episode."""
    return os.path.join(actor_summary_dir(root_dir, task), EPISODES_FILE)


def actor_lock_path(root_dir: str, task: int) -> str:
    """The flock that keeps task index `task` to one running actor."""
    return os.path.join(actor_summary_dir(root_dir, task), ACTOR_LOCK_FILE)


def actor_episode_files(root_dir: str) -> List[str]:
    """Every actor's episodes.csv under `root_dir`, in task order."""
    found = []
    collect = os.path.join(root_dir, COLLECT_DIR)
    for name in os.listdir(collect) if os.path.isdir(collect) else ():
        task = name[len(ACTOR_DIR_PREFIX) :]
        if name.startswith(ACTOR_DIR_PREFIX) and task.isdigit():
            if os.path.exists(episodes_path(root_dir, int(task))):
                found.append((int(task), episodes_path(root_dir, int(task))))
    return [path for _, path in sorted(found)]


def _sharded(name: str, shard: int) -> str:
    """Shard 0 keeps the unsharded name, so a one-server run's layout is unchanged."""
    return name if shard == 0 else f"{name}{SHARD_SUFFIX}{shard}"


def server_summary_dir(root_dir: str, shard: int = 0) -> str:
    return os.path.join(root_dir, _sharded(SERVER_SUMMARY_DIR, shard))


def replay_checkpoint_dir(root_dir: str, shard: int = 0) -> str:
    """Replay shard `shard`'s Reverb checkpoints."""
    return os.path.join(root_dir, _sharded(REPLAY_CHECKPOINT_DIR, shard))


def server_lock_path(root_dir: str, shard: int = 0) -> str:
    """The flock held by the server that serves replay shard `shard` of root_dir."""
    return os.path.join(root_dir, _sharded(SERVER_LOCK_NAME, shard) + ".lock")


def log_dir(root_dir: str) -> str:
    return os.path.join(root_dir, LOG_DIR)
