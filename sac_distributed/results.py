"""The run's two CSV files of returns: each one's one writer and one reader.

root_dir/eval/results.csv: each greedy evaluation appends one row
(`paths.RESULTS_HEADER`: train_step, env_steps, average_return,
average_episode_length, wall_time). The evaluator and the benchmark peers
write it through `append_result`; sac-plot, sac-launch's closing summary and
the benchmarks read it through `read_results`, so a file written by any of
them reads the same everywhere.

root_dir/collect/actor_<task>/episodes.csv: each training episode an actor
finishes appends one row (`paths.EPISODES_HEADER`: wall_time,
actor_env_steps, episode_return, episode_length), as SB3's Monitor does. These
are the returns of the exploring policy, the ones rl-baselines3-zoo publishes.
`EpisodeLog` writes it and `read_episodes` reads it.

Standard library only: the SB3 benchmark peer imports it from a virtualenv
without TensorFlow.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import time
from typing import List, Optional, Sequence, Tuple

from sac_distributed.errors import ConfigError
from sac_distributed.paths import (
    EPISODES_FILE,
    EPISODES_HEADER,
    EVAL_DIR,
    RESULTS_FILE,
    RESULTS_HEADER,
)


@dataclasses.dataclass(frozen=True)
class EvalPoint:
    """One row of results.csv: where an evaluation was and what it measured."""

    train_step: int
    env_steps: int
    average_return: float
    average_episode_length: float
    wall_time: float  # seconds since the epoch when the row was written

    def to_row(self) -> List[str]:
        """The row as written: returns to 3 decimals, length and time to 1."""
        return [
            str(int(self.train_step)),
            str(int(self.env_steps)),
            f"{self.average_return:.3f}",
            f"{self.average_episode_length:.1f}",
            f"{self.wall_time:.1f}",
        ]


def append_result(path: str, point: EvalPoint) -> None:
    """Appends `point` (and the header first if the file is new), then fsyncs.

    Raises ConfigError when an existing file starts with another header: rows
    appended there would be read under the wrong column names.
    """
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    if not new:
        _check_header(path, _first_row(path))
    with open(path, "a", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        if new:
            writer.writerow(RESULTS_HEADER)
        writer.writerow(point.to_row())
        f.flush()
        os.fsync(f.fileno())


def read_results(path: str) -> List[EvalPoint]:
    """The rows of a results.csv, in file order.

    Raises ConfigError when the file is missing, has another header, or holds
    a malformed row (the message names the line).
    """
    if not os.path.isfile(path):
        raise ConfigError(
            f"No results file at {path!r}. The evaluator (sac-evaluator) writes "
            f"root_dir/{EVAL_DIR}/{RESULTS_FILE} after its first evaluation."
        )
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    _check_header(path, rows[0] if rows else [])
    return [_parse(path, line, row) for line, row in enumerate(rows[1:], start=2) if row]


def last_evaluated_step(path: str) -> Optional[int]:
    """The highest train_step in a results.csv; None while there is no file or row yet.

    A row being appended right now may read as malformed: that is None too
    (ask again), not an error, since the caller polls a live file.
    """
    try:
        points = read_results(path)
    except ConfigError:
        return None
    return max((p.train_step for p in points), default=None)


def _first_row(path: str) -> List[str]:
    with open(path, newline="") as f:
        return next(csv.reader(f), [])


def _check_header(path: str, row: Sequence[str]) -> None:
    if tuple(row) != RESULTS_HEADER:
        raise ConfigError(
            f"{path} does not start with the header {','.join(RESULTS_HEADER)}; "
            "it is not an evaluator results file."
        )


def _parse(path: str, line: int, row: Sequence[str]) -> EvalPoint:
    try:
        step, env_steps, ret, length, wall = row
        return EvalPoint(int(step), int(env_steps), float(ret), float(length), float(wall))
    except ValueError as e:
        raise ConfigError(f"{path}, line {line}: malformed row {row!r} ({e}).") from e


# --- training episodes: collect/actor_<task>/episodes.csv ------------------------

# Training episodes averaged into one "training return": the actors' AverageReturn
# summary, sac-plot's running mean and the learning benchmark's train column.
TRAINING_RETURN_WINDOW = 10


@dataclasses.dataclass(frozen=True)
class Episode:
    """One row of episodes.csv: a training episode an actor finished."""

    wall_time: float  # seconds since the epoch when the episode ended
    actor_env_steps: int  # env steps this actor had taken when it ended
    episode_return: float
    episode_length: int

    def to_row(self) -> List[str]:
        return [
            f"{self.wall_time:.1f}",
            str(int(self.actor_env_steps)),
            f"{self.episode_return:.3f}",
            str(int(self.episode_length)),
        ]


_HEADER_LINE = ",".join(EPISODES_HEADER) + "\n"


class EpisodeLog:
    """Appends an actor's finished training episodes to its episodes.csv.

    A restarted actor appends to the same file and goes on counting env steps
    from its last logged episode (the steps of the episode cut off by the
    restart are not counted). A row cut short by a kill is dropped on opening.
    Raises ConfigError when the file starts with another header.
    """

    def __init__(self, path: str):
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        existing = read_episodes(path) if _has_content(path) else []  # refuses a foreign file
        _drop_torn_last_row(path)
        self.steps_before = existing[-1].actor_env_steps if existing else 0
        self._file = open(path, "a", newline="")
        self._writer = csv.writer(self._file, lineterminator="\n")
        if not _has_content(path):
            self._writer.writerow(EPISODES_HEADER)

    def append(self, actor_env_steps: int, episode_return: float, episode_length: int) -> None:
        """Logs an episode that ended after `actor_env_steps` steps of this actor's life."""
        episode = Episode(
            time.time(), self.steps_before + actor_env_steps, episode_return, episode_length
        )
        self._writer.writerow(episode.to_row())
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_episodes(path: str) -> List[Episode]:
    """The rows of an episodes.csv in file order; a half-written last row is left out.

    Raises ConfigError when the file is missing, has another header, or holds
    a malformed row before its last.
    """
    if not os.path.isfile(path):
        raise ConfigError(
            f"No training episodes file at {path!r}. Each actor writes "
            f"root_dir/collect/actor_<task>/{EPISODES_FILE} when its first episode ends."
        )
    with open(path, newline="") as f:
        text = f.read()
    complete = text if text.endswith("\n") else text[: text.rfind("\n") + 1]
    if not complete and _HEADER_LINE.startswith(text):
        return []  # the header itself was cut short
    rows = list(csv.reader(complete.splitlines()))
    if tuple(rows[0] if rows else ()) != EPISODES_HEADER:
        raise ConfigError(
            f"{path} does not start with the header {','.join(EPISODES_HEADER)}; "
            "it is not an actor's training episodes file. Move it away or use a new root_dir."
        )
    return [_parse_episode(path, n, row) for n, row in enumerate(rows[1:], start=2) if row]


def merge_actor_episodes(paths_by_task: Sequence[str]) -> List[Tuple[int, float]]:
    """(env steps of all actors together, return) at each training episode's end.

    Each actor counts its own steps; merged by wall time, the total at an
    episode's end is the sum of every actor's latest count.
    """
    ended = []
    for task, path in enumerate(paths_by_task):
        for e in read_episodes(path):
            ended.append((e.wall_time, task, e.actor_env_steps, e.episode_return))
    latest = {}
    merged = []
    for _, task, steps, episode_return in sorted(ended):
        latest[task] = steps
        merged.append((sum(latest.values()), episode_return))
    return merged


def _parse_episode(path: str, line: int, row: Sequence[str]) -> Episode:
    try:
        wall, steps, ret, length = row
        return Episode(float(wall), int(steps), float(ret), int(length))
    except ValueError as e:
        raise ConfigError(f"{path}, line {line}: malformed row {row!r} ({e}).") from e


def _has_content(path: str) -> bool:
    return os.path.exists(path) and os.path.getsize(path) > 0


def _drop_torn_last_row(path: str) -> None:
    """Cuts a file back to its last newline: what follows is a row a kill cut short."""
    if not _has_content(path):
        return
    with open(path, "rb+") as f:
        data = f.read()
        if not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)
