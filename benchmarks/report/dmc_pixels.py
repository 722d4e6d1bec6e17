"""DeepMind Control from pixels: our committed runs against DrQ's published per-seed curves.

    python -m benchmarks.report.dmc_pixels        # writes benchmarks/results/dmc_pixels/curves.png

Reads each `benchmarks/results/dmc_pixels/<task>_seed<S>/results.csv` (our greedy
evaluations; env_steps are policy steps, times the task's action repeat for frames)
and `drq_planet_bench_rows.csv` (DrQ's rows of data/dmc_planet_bench.csv from the
authors' repository, to 120k frames). Three of DrQ's seeds repeat another seed's run
to the last digit (cheetah_run 7 = 3 and 9 = 4, walker_walk 5 = 2); they are
counted once, as the paper's 100k-frame table does (344.6 +- 68.0 and 612.5 +- 164.5).
Runs of the SB3 peer (`benchmarks/peer_sb3_pixels.py`) in `sb3_<task>_seed<S>/` are
read the same way and drawn dashed. Prints, per task, the median of our seeds' last
evaluations (the issue's target is the median of 3), then, for each run, its return at its last
evaluation beside DrQ's median and range over distinct seeds at the nearest logged
frame count, and DrQ-v2's mean and median over its 10 seeds at the same mark
(`drqv2_curves_rows.csv`: the rows to 120k frames of curves/dmc_<task>.csv in
facebookresearch/drqv2, logged every 20k frames; their 100k-frame means are the
273 and 170 the issue quotes). Last, each SB3 run's last evaluation beside each of
our seeds' evaluation nearest the same frames and its last within the same wall time,
counted from each run's first evaluation (the peer's comes after its 1000 random
warm-up steps, ours at the start, so ours are charged for their warm-up; the wall times
are comparable only for runs on the same machine).
"""

from __future__ import annotations

import csv
import os
import re
import statistics
from typing import Dict, List, Tuple

HERE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "results", "dmc_pixels")
DRQ_ROWS = os.path.join(HERE, "drq_planet_bench_rows.csv")
DRQV2_ROWS = os.path.join(HERE, "drqv2_curves_rows.csv")
DRQV2_COLOR = "C6"
# Repeats of another seed's run in DrQ's file (identical to ~1e-13 at every step).
DRQ_REPEATED_SEEDS = {"cheetah_run": {"7", "9"}, "walker_walk": {"5"}}
ACTION_REPEAT = {"cheetah_run": 4, "walker_walk": 2}

Curve = List[Tuple[int, float]]  # (frames, return)
TimedCurve = List[Tuple[float, int, float]]  # (seconds since the first evaluation, frames, return)
OUR_COLORS = ("C0", "C2", "C3", "C4", "C5")  # one per seed of ours; DrQ's is C1
# Folders of the SB3 peer's runs (benchmarks/peer_sb3_pixels.py) start with this.
PEER_PREFIX = "sb3_"
PEER_COLOR = "C7"


def drq_curves(path: str = DRQ_ROWS) -> Dict[str, Dict[str, Curve]]:
    """task -> seed -> DrQ's curve, repeated seeds left out."""
    return _reference_curves(path, ("env", "seed", "step"), DRQ_REPEATED_SEEDS)


def drqv2_curves(path: str = DRQV2_ROWS) -> Dict[str, Dict[str, Curve]]:
    """task -> seed -> DrQ-v2's curve (the authors' curves/ files, to 120k frames)."""
    return _reference_curves(path, ("task", "seed", "frame"), {})


def _reference_curves(
    path: str, columns: Tuple[str, str, str], repeated: Dict[str, set]
) -> Dict[str, Dict[str, Curve]]:
    """A published per-seed file's (task, seed, frame) `columns` and episode_reward."""
    task_column, seed_column, frame_column = columns
    out: Dict[str, Dict[str, Curve]] = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            task, seed = row[task_column], row[seed_column]
            if seed in repeated.get(task, ()):
                continue
            point = (int(row[frame_column]), float(row["episode_reward"]))
            out.setdefault(task, {}).setdefault(seed, []).append(point)
    return out


def our_curves(directory: str = HERE) -> Dict[Tuple[str, int], Curve]:
    """(task, seed) -> our curve in frames, one per `<task>_seed<S>/results.csv`."""
    return _curves(directory, "")


def peer_curves(directory: str = HERE) -> Dict[Tuple[str, int], Curve]:
    """(task, seed) -> the SB3 peer's curve in frames (benchmarks/peer_sb3_pixels.py),
    one per `sb3_<task>_seed<S>/results.csv`."""
    return _curves(directory, PEER_PREFIX)


def _curves(directory: str, prefix: str) -> Dict[Tuple[str, int], Curve]:
    timed = timed_curves(directory, prefix)
    return {key: [(frames, value) for _, frames, value in curve] for key, curve in timed.items()}


def timed_curves(directory: str = HERE, prefix: str = "") -> Dict[Tuple[str, int], TimedCurve]:
    """(task, seed) -> (seconds since the run's first evaluation, frames, return), for
    our runs (prefix "") or the peer's (PEER_PREFIX)."""
    out = {}
    for name in sorted(os.listdir(directory)):
        match = re.fullmatch(r"(.+)_seed(\d+)", name)
        path = os.path.join(directory, name, "results.csv")
        if not match or not os.path.exists(path):
            continue
        task, seed = match.group(1), int(match.group(2))
        if task.startswith(PEER_PREFIX) != bool(prefix):
            continue
        task = task[len(prefix) :]
        with open(path) as f:
            rows = list(csv.DictReader(f))
        if not rows:
            continue
        repeat, start = ACTION_REPEAT[task], float(rows[0]["wall_time"])
        out[(task, seed)] = [
            (
                float(r["wall_time"]) - start,
                int(r["env_steps"]) * repeat,
                float(r["average_return"]),
            )
            for r in rows
        ]
    return out


def _nearest_frames(curve: TimedCurve, frames: int) -> Tuple[float, int, float]:
    """The evaluation of `curve` nearest `frames` (the earlier one on a tie)."""
    return min(curve, key=lambda point: (abs(point[1] - frames), point[1]))


def _last_within(curve: TimedCurve, seconds: float) -> Tuple[float, int, float]:
    """The last evaluation of `curve` at most `seconds` (>= 0) after its first one, which
    is at 0 s (timed_curves)."""
    return [point for point in curve if point[0] <= seconds][-1]


def _seed_points(points: List[Tuple[int, Tuple[float, int, float]]]) -> str:
    text = ", ".join(f"seed {s} {p[2]:.0f} at {p[1] / 1000:.1f}k frames" for s, p in points)
    return text or "none"


def peer_lines(
    ours: Dict[Tuple[str, int], TimedCurve], peer: Dict[Tuple[str, int], TimedCurve]
) -> List[str]:
    """Each peer run's last evaluation beside each of our seeds' evaluation nearest the
    same frames, and their last one within the same wall time since the first evaluation."""
    lines = []
    for (task, seed), curve in sorted(peer.items()):
        seconds, frames, value = curve[-1]
        mine = sorted((s, c) for (t, s), c in ours.items() if t == task)
        by_frames = _seed_points([(s, _nearest_frames(c, frames)) for s, c in mine])
        by_time = _seed_points([(s, _last_within(c, seconds)) for s, c in mine])
        lines.append(
            f"SB3 CnnPolicy {task} seed {seed}: {value:.0f} at {frames / 1000:.1f}k frames "
            f"after {seconds / 3600:.2f} h; ours nearest the same frames: {by_frames}; "
            f"ours within the same wall time: {by_time}"
        )
    return lines


def drq_at(curves: Dict[str, Curve], frames: int) -> Tuple[int, List[float]]:
    """DrQ's logged frame count nearest `frames` and every seed's return there."""
    steps = sorted({s for curve in curves.values() for s, _ in curve})
    nearest = min(steps, key=lambda s: (abs(s - frames), s))
    return nearest, [dict(curve)[nearest] for curve in curves.values() if nearest in dict(curve)]


def _by_frame(curves: Dict[str, Curve]) -> Tuple[List[int], List[List[float]]]:
    """Every logged frame count of `curves` and the seeds' returns at each."""
    steps = sorted({s for curve in curves.values() for s, _ in curve})
    return steps, [[dict(c)[s] for c in curves.values() if s in dict(c)] for s in steps]


def seed_medians(curves: Dict[Tuple[str, int], Curve]) -> Dict[str, Tuple[int, float, int, int]]:
    """task -> (seeds, median of their last evaluations, fewest frames, most frames):
    the issue's target is the median over seeds at the end of each run."""
    last: Dict[str, List[Tuple[int, float]]] = {}
    for (task, _), curve in curves.items():
        last.setdefault(task, []).append(curve[-1])
    return {
        task: (
            len(points),
            statistics.median(v for _, v in points),
            min(f for f, _ in points),
            max(f for f, _ in points),
        )
        for task, points in sorted(last.items())
    }


def summary_lines() -> List[str]:
    drq, drqv2, ours = drq_curves(), drqv2_curves(), our_curves()
    lines = []
    for task, (n, median, lo, hi) in seed_medians(ours).items():
        ends = dict.fromkeys((f"{lo / 1000:.1f}k", f"{hi / 1000:.1f}k"))
        span = "-".join(ends)
        lines.append(
            f"{task}: median {median:.0f} of our {n} seeds' last evaluations ({span} frames)"
        )
    runs = [("", key, c) for key, c in ours.items()]
    runs += [("SB3 CnnPolicy ", key, c) for key, c in peer_curves().items()]
    for system, (task, seed), curve in runs:
        frames, value = curve[-1]
        at, values = drq_at(drq[task], frames)
        at2, values2 = drq_at(drqv2[task], frames)
        lines.append(
            f"{system}{task} seed {seed}: {value:.0f} at {frames / 1000:.1f}k frames; DrQ at "
            f"{at / 1000:.0f}k: median {statistics.median(values):.0f} "
            f"[{min(values):.0f}, {max(values):.0f}] over {len(values)} seeds; DrQ-v2 at "
            f"{at2 / 1000:.0f}k: mean {statistics.mean(values2):.0f}, median "
            f"{statistics.median(values2):.0f} over {len(values2)} seeds"
        )
    return lines + peer_lines(timed_curves(), timed_curves(prefix=PEER_PREFIX))


def figure(path: str = os.path.join(HERE, "curves.png")) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drq, drqv2, ours, peer = drq_curves(), drqv2_curves(), our_curves(), peer_curves()
    tasks = sorted({task for task, _ in ours})
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        steps, per_step = _by_frame(drq[task])
        ax.fill_between(
            steps, [min(v) for v in per_step], [max(v) for v in per_step], alpha=0.2, color="C1"
        )
        label = f"DrQ (authors' data), median and range of {len(drq[task])} seeds"
        ax.plot(steps, [statistics.median(v) for v in per_step], color="C1", label=label)
        steps, per_step = _by_frame(drqv2[task])
        label = f"DrQ-v2 (authors' curves), median of {len(drqv2[task])} seeds"
        medians = [statistics.median(v) for v in per_step]
        ax.plot(steps, medians, ":", color=DRQV2_COLOR, label=label)
        mine = [(seed, curve) for (name, seed), curve in ours.items() if name == task]
        for color, (seed, curve) in zip(OUR_COLORS, mine):
            xs, ys = zip(*curve)
            ax.plot(xs, ys, "o-", color=color, ms=3, label=f"ours, seed {seed}")
        for seed, curve in [(seed, c) for (name, seed), c in peer.items() if name == task]:
            xs, ys = zip(*curve)
            label = f"SB3 SAC CnnPolicy (no augmentation), seed {seed}"
            ax.plot(xs, ys, "s--", color=PEER_COLOR, ms=3, label=label)
        ax.set_title(f"{task.replace('_', '-')} from pixels")
        ax.set_xlabel("frames (env steps x action repeat)")
        ax.set_ylabel("greedy return")
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


if __name__ == "__main__":
    print("\n".join(summary_lines()))
    print("wrote", figure())
