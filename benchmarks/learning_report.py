"""The learning benchmark's report: one table and one curve per env from OUT/runs.

Reads every OUT/runs/<env>/<system>-<variant>/seed<N>/{results.csv,run.json}
that `learning.py` left and writes OUT/summary.json, OUT/summary.md and
OUT/<env>.png. Pure Python plus matplotlib; nothing here trains.

As a command, it publishes what the committed runs show (benchmarks/report/):

    python benchmarks/learning_report.py tables        # docs/generated/*.md, README's table
    python benchmarks/learning_report.py figure        # benchmarks/results/curves.png
    python benchmarks/learning_report.py mean_return --runs=DIR --groups=G1,G2 \\
        --window=20000,50000,5000                       # mean greedy return over a window

Definitions (also printed under the table):
  * return at a mark: the greedy eval return linearly interpolated at that many
    env steps (evals fall every --eval_every env steps; ours logs the replay's
    insert count when it pulls the weights it evaluates);
  * seconds to a mark: wall time from the run's start (process start, so
    start-up and warm-up are included) to the first eval at or past the mark;
  * unstable: after some best return B (first eval F), three evals in a row
    below F + (B - F) / 2, i.e. the run lost half of what it had learned;
  * holds (InvertedPendulumBulletEnv-v0): after the first eval >= 1000, at
    least 80% of the later evals >= 900 (per seed: yes, NO, never reached, or
    last-eval-only, reached only at the run's last eval, with nothing to judge);
  * train return at a mark: the mean return of the last 10 training episodes
    (the exploring policy's, the measure of rl-baselines3-zoo's monitor logs)
    that ended by that many env steps, from each actor's episodes.csv.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
from typing import Dict, List, Optional, Sequence, Tuple

if __package__ in (None, ""):  # run as a file: the repo root, so that `benchmarks` imports
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from sac_distributed import results  # noqa: E402

# Mean training-episode return of rl-baselines3-zoo's SAC runs (1 update per env
# step, published monitor logs) at env steps: the reference table.
REFERENCE: Dict[str, Dict[int, float]] = {
    "HalfCheetahBulletEnv-v0": {50_000: 518, 100_000: 582, 300_000: 1132, 1_000_000: 2792},
    "AntBulletEnv-v0": {50_000: 416, 100_000: 569, 300_000: 1391, 1_000_000: 3073},
    "HopperBulletEnv-v0": {50_000: 296, 100_000: 1145, 300_000: 1203, 1_000_000: 2603},
    "Walker2DBulletEnv-v0": {50_000: 143, 100_000: 313, 300_000: 1682, 1_000_000: 2292},
    "Pendulum-v1": {20_000: -157},
    # The TF-Agents SAC Minitaur tutorial's curve at 100k train steps, one per env step
    # after its 10k warm-up steps.
    "MinitaurBulletEnv-v0": {110_000: -0.28},
    # SAC on Gymnasium's MuJoCo v4 envs (the SimbaV2 authors' runs, 10 seeds): v5's
    # Hopper, Walker2d and Ant rewards differ a little from v4's (README, Results).
    "HalfCheetah-v5": {100_000: 6156, 300_000: 8593},
    "Hopper-v5": {100_000: 1103, 300_000: 2160},
    "Walker2d-v5": {100_000: 690, 300_000: 2470},
    "Ant-v5": {100_000: 747, 300_000: 3532},
}
_SAC_V4 = "SAC on v4"
REFERENCE_NAME: Dict[str, str] = {
    "MinitaurBulletEnv-v0": "TF-Agents tutorial",
    **{env: _SAC_V4 for env in ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5")},
}
# Returns printed with decimals where the whole range is a few units.
RETURN_DIGITS: Dict[str, int] = {"MinitaurBulletEnv-v0": 2}
# Returns whose wall time to reach we report (the time targets).
TARGETS: Dict[str, float] = {
    "HalfCheetahBulletEnv-v0": 500.0,
    "Pendulum-v1": -200.0,
    "InvertedPendulumBulletEnv-v0": 1000.0,
    "AntBulletEnv-v0": 500.0,
    "HopperBulletEnv-v0": 1000.0,
    "Walker2DBulletEnv-v0": 300.0,
    "HalfCheetah-v5": 3000.0,  # issue 43: wall time to 3000 against SB3's
}
HOLD: Dict[str, Tuple[float, float, float]] = {
    # env: (reach, hold at or above, share of later evals)
    "InvertedPendulumBulletEnv-v0": (1000.0, 900.0, 0.8),
    "InvertedPendulum-v5": (1000.0, 900.0, 0.8),
}
MARKS = (5_000, 10_000, 20_000, 30_000, 50_000, 100_000, 200_000, 300_000, 1_000_000)


@dataclasses.dataclass(frozen=True)
class Point:
    train_step: int
    env_steps: int
    average_return: float
    wall_time: float


@dataclasses.dataclass
class Run:
    env_name: str
    group: str  # "<system>-<variant>"
    seed: int
    started: float
    points: List[Point]
    budget: int  # the sweep's env-step budget of this run
    # Training episodes as (env steps of all actors when it ended, return), in
    # the order they ended; empty where the run kept none (peers, older runs).
    episodes: List[Tuple[int, float]] = dataclasses.field(default_factory=list)


def read_points(path: str) -> List[Point]:
    """The rows of a results.csv (the evaluator's format), in env-step order."""
    points = [
        Point(r.train_step, r.env_steps, r.average_return, r.wall_time)
        for r in results.read_results(path)
    ]
    return sorted(points, key=lambda p: p.env_steps)


def episodes_file(task: int) -> str:
    """A run's copy of actor `task`'s collect/actor_<task>/episodes.csv."""
    return f"episodes_actor{task}.csv"


def read_training_episodes(run_dir: str) -> List[Tuple[int, float]]:
    """(env steps of all actors together, return) at each of a run's training episodes."""
    files = []
    while os.path.exists(os.path.join(run_dir, episodes_file(len(files)))):
        files.append(os.path.join(run_dir, episodes_file(len(files))))
    return results.merge_actor_episodes(files)


def train_return_at(episodes: Sequence[Tuple[int, float]], env_steps: int) -> Optional[float]:
    """Mean return of the last TRAINING_RETURN_WINDOW training episodes ended by `env_steps`.

    None when no training episode had ended by then.
    """
    before = [r for steps, r in episodes if steps <= env_steps]
    return statistics.fmean(before[-results.TRAINING_RETURN_WINDOW :]) if before else None


def load_runs(out: str) -> List[Run]:
    """Every finished run under OUT/runs."""
    runs = []
    root = os.path.join(out, "runs")
    if not os.path.isdir(root):
        return runs
    for env_name in sorted(os.listdir(root)):
        for group in sorted(os.listdir(os.path.join(root, env_name))):
            runs += load_group(out, env_name, group)
    return runs


def load_group(out: str, env_name: str, group: str) -> List[Run]:
    """The finished runs of one env's system-variant under OUT/runs (none if absent)."""
    group_dir = os.path.join(out, "runs", env_name, group)
    if not os.path.isdir(group_dir):
        return []
    runs = [
        load_run(env_name, group, os.path.join(group_dir, d)) for d in sorted(os.listdir(group_dir))
    ]
    return [r for r in runs if r is not None]


def load_run(env_name: str, group: str, path: str) -> Optional[Run]:
    """The run in `path` (a seed<N> directory); None unless its run.json says done."""
    try:
        with open(os.path.join(path, "run.json")) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    if record.get("status") != "done":
        return None
    points = read_points(os.path.join(path, "results.csv"))
    seed = int(os.path.basename(path).removeprefix("seed"))
    if not points:
        return None
    budget = int(record.get("env_steps_budget", points[-1].env_steps))
    episodes = read_training_episodes(path)
    return Run(env_name, group, seed, float(record["started"]), points, budget, episodes)


def return_at(points: Sequence[Point], env_steps: int) -> Optional[float]:
    """The return interpolated at `env_steps`; None outside the evaluated range.

    A mark up to 5% past the last eval takes the last eval: the learner may
    finish its budget of SGD steps a little before the actors' inserts reach
    the env-step budget (the rate limiter's error buffer lets it run ahead).
    """
    if points and points[-1].env_steps < env_steps <= points[-1].env_steps * 1.05:
        return points[-1].average_return
    if not points or env_steps < points[0].env_steps or env_steps > points[-1].env_steps:
        return None
    for before, after in zip(points, points[1:]):
        if before.env_steps <= env_steps <= after.env_steps:
            span = after.env_steps - before.env_steps
            if span == 0:
                return after.average_return
            w = (env_steps - before.env_steps) / span
            return before.average_return + w * (after.average_return - before.average_return)
    return points[-1].average_return


def mean_return(points: Sequence[Point], start: int, stop: int, every: int) -> Optional[float]:
    """Mean of the returns at start, start + every, ..., stop (interpolated, as
    `return_at`); None when the run was not evaluated over the whole window.

    A steadier measure of a noisy curve than the return at one mark.
    """
    if every <= 0 or stop < start:
        raise ValueError(f"need every > 0 and stop >= start, got {start}, {stop}, {every}")
    values = [return_at(points, m) for m in range(start, stop + 1, every)]
    if any(v is None for v in values):
        return None
    return statistics.fmean(values)


def seconds_to_steps(run: Run, env_steps: int) -> Optional[float]:
    reached = next((p for p in run.points if p.env_steps >= env_steps), None)
    if reached is None and return_at(run.points, env_steps) is not None:
        reached = run.points[-1]
    return None if reached is None else reached.wall_time - run.started


def seconds_to_return(run: Run, target: float) -> Optional[float]:
    reached = next((p for p in run.points if p.average_return >= target), None)
    return None if reached is None else reached.wall_time - run.started


def sgd_steps_per_s(run: Run) -> Optional[float]:
    first, last = run.points[0], run.points[-1]
    if last.wall_time <= first.wall_time or last.train_step <= first.train_step:
        return None
    return (last.train_step - first.train_step) / (last.wall_time - first.wall_time)


def is_unstable(points: Sequence[Point], run_length: int = 3) -> bool:
    """Three evals in a row below half of what the run had gained over its first eval."""
    if len(points) < run_length + 1:
        return False
    first = points[0].average_return
    best = first
    below = 0
    for p in points[1:]:
        if p.average_return > best:
            best, below = p.average_return, 0
            continue
        below = below + 1 if best > first and p.average_return < first + (best - first) / 2 else 0
        if below >= run_length:
            return True
    return False


def holds(points: Sequence[Point], reach: float, level: float, share: float) -> Optional[bool]:
    """Whether the run stayed at `level` after first reaching `reach`.

    None when there is nothing to judge: the run never reached `reach`, or
    reached it only at its last evaluation.
    """
    index = first_reach(points, reach)
    if index is None or index == len(points) - 1:
        return None
    later = points[index + 1 :]
    return sum(p.average_return >= level for p in later) / len(later) >= share


def hold_status(points: Sequence[Point], reach: float, level: float, share: float) -> str:
    """`holds` in words for the table: yes, NO, never (reached) or last-eval-only."""
    held = holds(points, reach, level, share)
    if held is not None:
        return "yes" if held else "NO"
    return "never" if first_reach(points, reach) is None else "last-eval-only"


def first_reach(points: Sequence[Point], reach: float) -> Optional[int]:
    """The index of the first evaluation at or above `reach`; None if none is."""
    return next((i for i, p in enumerate(points) if p.average_return >= reach - 1e-6), None)


def _stats(values: Sequence[Optional[float]]) -> Optional[dict]:
    present = [v for v in values if v is not None]
    if not present:
        return None
    return {
        "median": statistics.median(present),
        "min": min(present),
        "max": max(present),
        "n": len(present),
    }


def summarize_group(env_name: str, runs: List[Run]) -> dict:
    """Median/min/max over seeds of everything the table shows, for one group."""
    last = max(r.budget for r in runs)
    marks = [m for m in MARKS if m < last] + [last]
    summary = {
        "seeds": sorted(r.seed for r in runs),
        "env_steps": last,
        "marks": {
            str(m): {
                "return": _stats([return_at(r.points, m) for r in runs]),
                "train_return": _stats(
                    [train_return_at(r.episodes, m) for r in runs if r.episodes]
                ),
                "seconds": _stats([seconds_to_steps(r, m) for r in runs]),
            }
            for m in marks
        },
        "final_return": _stats([r.points[-1].average_return for r in runs]),
        "best_return": _stats([max(p.average_return for p in r.points) for r in runs]),
        "sgd_steps_per_s": _stats([sgd_steps_per_s(r) for r in runs]),
        "unstable_seeds": sorted(r.seed for r in runs if is_unstable(r.points)),
    }
    if env_name in TARGETS:
        target = TARGETS[env_name]
        times = [seconds_to_return(r, target) for r in runs]
        summary["target_return"] = target
        summary["seconds_to_target"] = _stats(times)
        summary["reached_target"] = sum(t is not None for t in times)
    if env_name in HOLD:
        reach, level, share = HOLD[env_name]
        summary["holds"] = {str(r.seed): hold_status(r.points, reach, level, share) for r in runs}
    return summary


def summarize(runs: List[Run]) -> Dict[str, Dict[str, dict]]:
    by_group: Dict[Tuple[str, str], List[Run]] = {}
    for run in runs:
        by_group.setdefault((run.env_name, run.group), []).append(run)
    result: Dict[str, Dict[str, dict]] = {}
    for (env_name, group), group_runs in sorted(by_group.items()):
        result.setdefault(env_name, {})[group] = summarize_group(env_name, group_runs)
    return result


def _fmt(stats: Optional[dict], digits: int = 0) -> str:
    if stats is None:
        return "–"
    if stats["min"] == stats["max"]:
        return f"{stats['median']:.{digits}f}"
    return f"{stats['median']:.{digits}f} [{stats['min']:.{digits}f}, {stats['max']:.{digits}f}]"


def markdown(summary: Dict[str, Dict[str, dict]]) -> str:
    """The report's tables, one per env."""
    lines = ["# Learning benchmark", ""]
    for env_name, groups in summary.items():
        lines += [f"## {env_name}", ""]
        marks = sorted({int(m) for g in groups.values() for m in g["marks"]})
        reference = REFERENCE.get(env_name, {})
        header = ["system-variant", "seeds"]
        header += [f"return @{m / 1000:g}k" for m in marks]
        header += ["final", f"train @{marks[-1] / 1000:g}k", "s to last mark", "SGD/s", "unstable"]
        if env_name in TARGETS:
            header.append(f"s to {TARGETS[env_name]:g}")
        if env_name in HOLD:
            header.append("holds 1000")
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        if reference:
            ref = [f"{REFERENCE_NAME.get(env_name, 'SB3-zoo')} reference", ""]
            ref += [f"{reference[m]:g}" if m in reference else "" for m in marks]
            lines.append("| " + " | ".join(ref + [""] * (len(header) - len(ref))) + " |")
        for group, g in groups.items():
            lines.append("| " + " | ".join(_row(group, g, marks, env_name)) + " |")
        lines.append("")
    lines.append(
        "Cells: median [min, max] over seeds. Returns: greedy evaluation, interpolated at "
        "the mark. Train: mean return of the last "
        f"{results.TRAINING_RETURN_WINDOW} training episodes (the exploring "
        "policy, as in rl-baselines3-zoo's monitor logs) ended by the last mark; – for runs "
        "from before the benchmark kept training episodes. Seconds: wall time from the run's "
        "start to the first eval at or past the mark (or the target return). Unstable: seeds "
        "that lost half of their gain over the first eval for 3 evals in a row."
    )
    return "\n".join(lines) + "\n"


def _row(group: str, g: dict, marks: List[int], env_name: str) -> List[str]:
    cells = [group, ",".join(str(s) for s in g["seeds"])]
    digits = RETURN_DIGITS.get(env_name, 0)
    for m in marks:
        cells.append(_fmt(g["marks"].get(str(m), {}).get("return"), digits))
    last = str(max(int(m) for m in g["marks"]))
    cells += [
        _fmt(g["final_return"], digits),
        _fmt(g["marks"].get(str(marks[-1]), {}).get("train_return"), digits),
        _fmt(g["marks"][last]["seconds"]),
        _fmt(g["sgd_steps_per_s"]),
        ",".join(str(s) for s in g["unstable_seeds"]) or "none",
    ]
    if env_name in TARGETS:
        cells.append(f"{_fmt(g['seconds_to_target'])} ({g['reached_target']}/{len(g['seeds'])})")
    if env_name in HOLD:
        cells.append(" ".join(f"s{s}:{v}" for s, v in g["holds"].items()))
    return cells


# Up to this many groups share one panel; more get one panel each (small multiples),
# because a dozen overlapping bands cannot be read.
MAX_GROUPS_PER_PANEL = 3


def plot_env(env_name: str, runs: List[Run], path: str) -> str:
    """Median line and min-max band per group over env steps, reference points."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups: Dict[str, List[Run]] = {}
    for run in runs:
        groups.setdefault(run.group, []).append(run)
    panels = [sorted(groups)]
    if len(groups) > MAX_GROUPS_PER_PANEL:
        panels = [[g] for g in sorted(groups)]
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    size = (8 if ncols == 1 else 4.5 * ncols, 5 if nrows == 1 else 3.2 * nrows)
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    axes = list(fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True).flat)
    budget = max((p.env_steps for r in runs for p in r.points), default=0)
    for ax, names in zip(axes, panels):
        for group in names:
            plot_group(ax, f"{group} (n={len(groups[group])})", groups[group])
        plot_reference(ax, env_name, budget)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower right", fontsize=7)
    for ax in axes[len(panels) :]:  # panels left over in the last row
        ax.set_visible(False)
    fig.supxlabel("Environment steps")
    fig.supylabel("Greedy evaluation return")
    fig.suptitle(f"{env_name}: median and min-max over seeds")
    fig.savefig(path, format="png", dpi=100)
    return path


def plot_group(ax, label: str, group_runs: List[Run]) -> None:
    """One median line and its min-max band over `group_runs`, on their common evals."""
    grid = sorted({p.env_steps for r in group_runs for p in r.points})
    rows = [[return_at(r.points, x) for r in group_runs] for x in grid]
    xs = [x for x, row in zip(grid, rows) if all(v is not None for v in row)]
    rows = [row for row in rows if all(v is not None for v in row)]
    if not xs:
        return
    line = ax.plot(xs, [statistics.median(r) for r in rows], label=label)
    ax.fill_between(
        xs, [min(r) for r in rows], [max(r) for r in rows], alpha=0.2, color=line[0].get_color()
    )


def plot_reference(ax, env_name: str, budget: int) -> None:
    """The reference points (REFERENCE) up to about `budget` env steps, as black crosses."""
    # Only the reference points within the runs' budget: a 1M point would squeeze
    # a 100k curve into the left tenth of the plot.
    reference = {x: y for x, y in REFERENCE.get(env_name, {}).items() if x <= 1.1 * budget}
    if reference:
        ax.scatter(
            list(reference),
            list(reference.values()),
            marker="x",
            color="black",
            zorder=5,
            label=REFERENCE_NAME.get(env_name, "SB3-zoo (monitor log)"),
        )


def write_report(out: str) -> dict:
    """Rewrites OUT/summary.{json,md} and OUT/<env>.png from every finished run."""
    runs = load_runs(out)
    summary = summarize(runs)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(markdown(summary))
    for env_name in summary:
        plot_env(
            env_name,
            [r for r in runs if r.env_name == env_name],
            os.path.join(out, f"{env_name}.png"),
        )
    return summary


# learning_report.py's commands: the module under benchmarks/report/ that runs each.
COMMANDS: Dict[str, str] = {
    "tables": "the results tables of README.md and docs/generated/, from the committed runs",
    "figure": "README's figure of every preset (benchmarks/results/curves.png)",
    "mean_return": "each seed's mean greedy return over a window of env steps, per group",
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs one of COMMANDS: `learning_report.py COMMAND [its flags]`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        width = max(len(c) for c in COMMANDS)
        print("usage: learning_report.py COMMAND [flags]\n\ncommands:")
        for command, text in COMMANDS.items():
            print(f"  {command:<{width}}  {text}")
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"learning_report.py: unknown command {command!r}", file=sys.stderr)
        return 2
    import importlib

    sys.argv = [f"learning_report.py {command}", *rest]  # argparse's usage line
    return importlib.import_module(f"benchmarks.report.{command}").main(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
