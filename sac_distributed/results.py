"""The evaluation results file, root_dir/eval/results.csv: its one writer and one reader.

Each greedy evaluation appends one row (`paths.RESULTS_HEADER`: train_step,
env_steps, average_return, average_episode_length, wall_time). The evaluator
and the benchmark peers write it through `append_result`; sac-plot, sac-launch's
closing summary and the benchmarks read it through `read_results`, so a file
written by any of them reads the same everywhere. Standard library only: the
SB3 benchmark peer imports it from a virtualenv without TensorFlow.
"""

from __future__ import annotations

import csv
import dataclasses
import os
from typing import List, Optional, Sequence

from sac_distributed.errors import ConfigError
from sac_distributed.paths import EVAL_DIR, RESULTS_FILE, RESULTS_HEADER


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
