"""Learning curves from the evaluator's results file (root_dir/eval/results.csv),
with the actors' training episodes (collect/actor_<task>/episodes.csv) beside them.

Plots are drawn on a matplotlib `Figure` with the Agg canvas, never through
pyplot, so they work without a display, in threads, and inside notebooks
without touching the notebook's own matplotlib backend.
"""

from __future__ import annotations

import os
from typing import List, Optional, Sequence, Tuple

from sac_distributed import paths
from sac_distributed.errors import ConfigError
from sac_distributed.results import TRAINING_RETURN_WINDOW, EvalPoint, merge_actor_episodes
from sac_distributed.run_info import read_run_info

X_AXES = ("train_step", "env_steps")


def training_episodes(root_dir: str) -> List[Tuple[int, float]]:
    """(env steps of all actors, return) of every training episode the actors logged."""
    return merge_actor_episodes(paths.actor_episode_files(root_dir))


def run_title(run_dir: str, num_points: int) -> Optional[str]:
    """'<env>: greedy evaluation (N points)' from the run's run_info.json, or None
    when `run_dir` has none (a results.csv copied away from its run)."""
    try:
        info = read_run_info(run_dir)
    except ConfigError:  # an unreadable run_info.json does not stop a plot
        info = None
    env_name = (info or {}).get("env_name")
    return f"{env_name}: greedy evaluation ({num_points} points)" if env_name else None


def results_path(root_dir: str) -> str:
    """Where the evaluator of a run on `root_dir` writes its results."""
    return paths.results_path(root_dir)


def plot_learning_curve(
    points: List[EvalPoint],
    output_path: str,
    x: str = "env_steps",
    title: Optional[str] = None,
    episodes: Sequence[Tuple[int, float]] = (),
) -> str:
    """Writes a PNG: average return (top) and episode length (bottom) against `x`.

    `x` is "env_steps" (default: how runs with other actor counts or update
    ratios compare) or "train_step". With `episodes` ((env steps, return) of
    training episodes) and x="env_steps", the top panel also shows each
    training episode and their running mean. Returns `output_path`.
    """
    if x not in X_AXES:
        raise ConfigError(f"x must be one of {X_AXES}, got {x!r}.")
    if not points:
        raise ConfigError("No evaluation results to plot yet.")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ConfigError("Plotting needs matplotlib: pip install 'sac_distributed[tools]'.") from e

    xs = [getattr(p, x) for p in points]
    fig = Figure(figsize=(8, 6), dpi=100)
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    if episodes and x == "env_steps":
        _plot_training_episodes(top, episodes)
    top.plot(
        xs, [p.average_return for p in points], marker="o", color="tab:blue", label="greedy eval"
    )
    if episodes and x == "env_steps":
        top.legend(loc="lower right", fontsize="small")
    top.set_ylabel("Average return")
    top.grid(True, alpha=0.3)
    title = title or f"Evaluation ({len(points)} points)"
    top.set_title(title)
    bottom.plot(xs, [p.average_episode_length for p in points], marker=".", color="tab:gray")
    bottom.set_ylabel("Episode length")
    bottom.set_xlabel("Train step" if x == "train_step" else "Environment steps")
    bottom.grid(True, alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(output_path)), exist_ok=True)
    fig.savefig(output_path, format="png", metadata={"Title": title})
    return output_path


def _plot_training_episodes(ax, episodes: Sequence[Tuple[int, float]]) -> None:
    steps = [e[0] for e in episodes]
    returns = [e[1] for e in episodes]
    ax.scatter(steps, returns, s=4, color="tab:green", alpha=0.3, label="training episode")
    means = [
        sum(returns[max(0, i - TRAINING_RETURN_WINDOW + 1) : i + 1])
        / min(i + 1, TRAINING_RETURN_WINDOW)
        for i in range(len(returns))
    ]
    ax.plot(steps, means, color="tab:green", label=f"training, mean of {TRAINING_RETURN_WINDOW}")
