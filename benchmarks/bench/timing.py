"""Timed windows and medians: how every benchmark here turns work into a number.

A piece is measured by calling a chunk of work until a deadline and dividing
the work done by the time taken; each piece runs several alternating rounds
and the report keeps their median, so a busy spell on a shared machine
moves one round, not the result. Standard library only (learning.py's tests
import it without TensorFlow).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Optional, Sequence

Measure = Callable[[float], float]  # duration in seconds -> rate per second


def run_for(
    chunk: Callable[[], int],
    duration: float,
    lead_in: float = 0.0,
    finish: Optional[Callable[[], object]] = None,
) -> float:
    """Calls `chunk` (which returns the work it did) for `duration` s; returns work/s.

    The first `lead_in` seconds are not counted: they drain the prefetch
    buffers that filled while the piece sat idle, so every round measures the
    steady state. `finish` (e.g. a writer flush) runs inside the timed window.
    """
    lead_end = time.monotonic() + lead_in
    while time.monotonic() < lead_end:
        chunk()
    done = 0
    start = time.monotonic()
    deadline = start + duration
    while time.monotonic() < deadline:
        done += chunk()
    if finish is not None:
        finish()
    return done / (time.monotonic() - start)


def timed_rate(chunk: Callable[[], int]) -> Measure:
    """The Measure of a chunk in the steady state: `run_for` after `lead_in_for`."""
    return lambda duration: run_for(chunk, duration, lead_in_for(duration))


def lead_in_for(duration: float) -> float:
    """Untimed seconds before each measurement: 10 %, at most 2 s."""
    return min(2.0, 0.1 * duration)


def median(values: Sequence[float]) -> float:
    """The median as a plain float."""
    return float(statistics.median(values))


def median_time(seconds: Sequence[Optional[float]]) -> Optional[float]:
    """Median time to a target; a run that never reached it (None) counts as endless.

    None when the median itself is such a run (most runs did not reach it).
    """
    value = statistics.median([float("inf") if s is None else s for s in seconds])
    return None if value == float("inf") else value
