"""Envs nobody tuned a preset for: ours against SB3's SAC with its own defaults.

The yardstick of issue 73. For each env, SB3-defaults' gain is the median over its
seeds of (return at the budget - first evaluation's return); a run "reaches" at the
first greedy evaluation whose return is at least the SB3 seeds' median first return
plus 90 % of that gain. A cell gives the median over the row's seeds (a seed that
never reaches counts as later than any that does) and then each seed's value;
"ratio" is that median over SB3-defaults' median. Below it, where the runs of
WALL_DIRECTORY are committed, the wall time to the same mark with each run alone on
the machine. Generated with the other results tables (`python benchmarks/learning_report.py
tables`).
"""

from __future__ import annotations

import statistics
from typing import List, Optional, Sequence, Set

from benchmarks import learning_report
from benchmarks.learning_report import Run, return_at
from benchmarks.report import tables

DIRECTORY = "learning_defaults_30k"
BUDGET = 30_000
SHARE = 0.9
MARKS = (10_000, BUDGET)
ENVS = (
    "InvertedPendulum-v5",
    "InvertedDoublePendulum-v5",
    "Reacher-v5",
    "Pusher-v5",
    "Swimmer-v5",
)
SB3 = ("sb3defaults-preset", 'SB3, its own defaults (`SAC("MlpPolicy", env)`)')
# The generic defaults since 2026-12-07 are `generic1207`'s (no flag: config/presets.py),
# which add --rescale_actions to `sb3like_ent`'s values of 2026-12-04 (on an env whose
# actions are on [-1, 1] already, IDP, Reacher and Swimmer here, the two are one run);
# `preset` rows are the former ones, run before 2026-12-04 with no flag but the budget.
OURS = (
    (
        "ours-generic1207",
        "ours, generic defaults (since 2026-12-07: `sb3like_ent` acting on [-1, 1], "
        "`--rescale_actions`)",
    ),
    (
        "ours-sb3like_ent",
        "ours, generic defaults of 2026-12-04 (`sb3like` + SB3's target entropy -dim(A)) "
        "on the env's action scale: today's run where that is [-1, 1]",
    ),
    ("ours-preset", "ours, former generic defaults (to 2026-12-04)"),
    ("ours-sb3like", "ours, `sb3like`: 100 warm-up steps, PyTorch's init, pulls every 10"),
    ("ours-sb3like_ent_pull1000", "ours, generic defaults but pulls every 1000 (the presets')"),
    ("ours-sb3like_ent_pull1", "ours, generic defaults but pulls every env step"),
    (
        "ours-sb3like_ent_eps",
        "ours, generic defaults + SB3's Adam epsilon 1e-8 and log-prob epsilon 1e-6",
    ),
    (
        "ours-unit_ent",
        "ours, generic defaults but target entropy -dim(A) measured in [-1, 1] actions "
        "(SB3's), not the env's",
    ),
    (
        "ours-unit_actions",
        "ours, 2026-12-04's defaults on the env rescaled to [-1, 1] by Gymnasium's "
        "RescaleAction (`benchmarks/unit_action_envs.py`, before the flag)",
    ),
)
# Wall time to the reach mark: the generic defaults against SB3's, each run alone on the
# 2-core machine (learning.py --parallel=1), measured apart from the runs above, which
# often shared it.
WALL_DIRECTORY = "wall_defaults_20k"
WALL_BUDGET = 20_000
WALL_GROUPS = (SB3, ("ours-generic1207", "ours, generic defaults (no flag)"))
FILE = "docs/generated/untuned-vs-sb3-defaults.md"
NOTE = (
    "No preset for these envs. 30k env steps, greedy 10-episode evaluations every 1k, "
    "one SGD step per env step for every row. Reach: the first evaluation at or above "
    "SB3-defaults' median first return plus 90 % of its median gain by 30k; cells give "
    "the median over seeds, then each seed (never: not within the budget); ratio: the "
    "median over SB3's. Returns: median [min, max] at the mark. Runs: "
    f"`benchmarks/results/{DIRECTORY}/`; command: `python benchmarks/learning.py "
    "--systems=ours,sb3defaults --env_steps=30000 --eval_every=1000 --seeds=0,1,2` "
    "with the row's variant."
)
WALL_NOTE = (
    "Wall time: seconds from a run's start (start-up included) to its first evaluation "
    "at or above the reach mark of the table above it (from the 30k runs), each run alone "
    "on the 2-core machine; both systems wait for their evaluations, so their time is in. "
    "Cells: median over seeds, then each seed (never: not within the "
    f"{WALL_BUDGET // 1000}k budget); ratio: ours over SB3's; env steps/s: from a run's "
    "first evaluation to its last, evaluations included, median [min, max]. Runs: "
    f"`benchmarks/results/{WALL_DIRECTORY}/`; command: `python benchmarks/learning.py "
    "--envs=InvertedPendulum-v5,Pusher-v5 --systems=ours,sb3defaults "
    f"--variants=generic1207= --seeds=0,1,2 --env_steps={WALL_BUDGET} --eval_every=1000 "
    f"--parallel=1 --out=benchmarks/results/{WALL_DIRECTORY}` (InvertedPendulum-v5 also "
    "with --seeds=3,4,5)."
)


def _runs(
    root: str, tracked: Optional[Set[str]], env_name: str, group: str, directory: str = DIRECTORY
) -> List[Run]:
    return tables.load_set(root, tables.RunSet(env_name, group, ((directory, group),)), tracked)


def reach_threshold(sb3_runs: Sequence[Run]) -> Optional[float]:
    """SB3's median first return plus SHARE of its median gain by the budget; None
    without SB3 runs or where SB3's median gains nothing (reach is then undefined)."""
    starts = [run.points[0].average_return for run in sb3_runs if run.points]
    ends = [return_at(run.points, BUDGET) for run in sb3_runs]
    if not starts or any(end is None for end in ends):
        return None
    start = statistics.median(starts)
    gain = statistics.median(ends) - start
    return start + SHARE * gain if gain > 0 else None


def first_reach(run: Run, threshold: float) -> Optional[int]:
    """Env steps of the first evaluation within the budget at or above `threshold`;
    None if none is."""
    points = [p for p in run.points if p.env_steps <= BUDGET * 1.05]
    index = learning_report.first_reach(points, threshold)
    return None if index is None else points[index].env_steps


def reach_seconds(run: Run, threshold: float) -> Optional[float]:
    """Wall seconds from the run's start to its first evaluation at or above
    `threshold`; None if none is."""
    index = learning_report.first_reach(run.points, threshold)
    return None if index is None else run.points[index].wall_time - run.started


def steps_per_second(run: Run) -> Optional[float]:
    """Env steps per wall second from a run's first evaluation to its last, evaluations
    included: what bounds its wall time at one SGD step per env step."""
    first, last = run.points[0], run.points[-1]
    if last.wall_time <= first.wall_time:
        return None
    return (last.env_steps - first.env_steps) / (last.wall_time - first.wall_time)


def median_reach(reaches: Sequence[Optional[float]]) -> Optional[float]:
    """The median, a never-reaching seed counting as later than every other."""
    ordered = sorted(reaches, key=lambda r: float("inf") if r is None else r)
    middle = ordered[(len(ordered) - 1) // 2 : len(ordered) // 2 + 1]
    if any(r is None for r in middle):
        return None
    return statistics.median(middle)


def _k(steps: Optional[float]) -> str:
    return "never" if steps is None else f"{steps / 1000:.1f}k"


def env_table(root: str, tracked: Optional[Set[str]], env_name: str) -> str:
    sb3_runs = _runs(root, tracked, env_name, SB3[0])
    if not sb3_runs:
        return ""
    threshold = reach_threshold(sb3_runs)
    reach_title = "reach: none (SB3's median gains nothing by 30k)"
    if threshold is not None:
        reach_title = f"reach {threshold:.0f}"
    header = ["runs", "seeds", reach_title, "ratio"]
    header += [f"@{m // 1000}k" for m in MARKS]
    lines = [f"#### {env_name}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    sb3_median = None
    if threshold is not None:
        sb3_median = median_reach([first_reach(run, threshold) for run in sb3_runs])
    for group, label in (SB3, *OURS):
        runs = sb3_runs if group == SB3[0] else _runs(root, tracked, env_name, group)
        if not runs:
            continue
        reach, ratio = "–", "–"
        if threshold is not None:
            reaches = [first_reach(run, threshold) for run in runs]
            median = median_reach(reaches)
            if median is not None and sb3_median:
                ratio = f"{median / sb3_median:.2f}x"
            reach = f"{_k(median)} ({', '.join(_k(r) for r in reaches)})"
        returns = [
            tables.stats_cell([return_at(run.points, m) for run in runs], 0, len(runs))
            for m in MARKS
        ]
        seeds = tables.seeds_text([run.seed for run in runs])
        lines.append("| " + " | ".join([label, seeds, reach, ratio, *returns]) + " |")
    return "\n".join(lines) + "\n" + wall_table(root, tracked, env_name, threshold)


def _seconds(value: Optional[float]) -> str:
    return "never" if value is None else f"{value:.0f}"


def wall_table(
    root: str, tracked: Optional[Set[str]], env_name: str, threshold: Optional[float]
) -> str:
    """Wall seconds to `threshold` for WALL_GROUPS' committed runs of WALL_DIRECTORY;
    empty where there are none or no threshold."""
    loaded = [
        (label, _runs(root, tracked, env_name, group, WALL_DIRECTORY))
        for group, label in WALL_GROUPS
    ]
    if threshold is None or not all(runs for _, runs in loaded):
        return ""
    header = ["runs", "seeds", f"s to {threshold:.0f}", "ratio", "env steps at it", "env steps/s"]
    lines = [
        "",
        f"Wall time to {threshold:.0f}, each run alone (`{WALL_DIRECTORY}`):",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    sb3_median = median_reach([reach_seconds(run, threshold) for run in loaded[0][1]])
    for label, runs in loaded:
        seconds = [reach_seconds(run, threshold) for run in runs]
        steps = [first_reach(run, threshold) for run in runs]
        median = median_reach(seconds)
        ratio = f"{median / sb3_median:.2f}" if median is not None and sb3_median else "–"
        cells = [
            label,
            tables.seeds_text([run.seed for run in runs]),
            f"{_seconds(median)} ({', '.join(_seconds(s) for s in seconds)})",
            ratio,
            f"{_k(median_reach(steps))} ({', '.join(_k(s) for s in steps)})",
            tables.stats_cell([steps_per_second(run) for run in runs], 0, len(runs)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render(root: str, tracked: Optional[Set[str]]) -> str:
    header = f"<!-- Generated by `{tables.COMMAND}` from the committed runs: do not edit. -->\n\n"
    envs = [text for text in (env_table(root, tracked, env) for env in ENVS) if text]
    return header + "\n".join(envs) + "\n" + NOTE + "\n\n" + WALL_NOTE + "\n"
