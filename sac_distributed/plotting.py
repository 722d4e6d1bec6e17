"""Learning curves from the evaluator's results file (root_dir/eval/results.csv).

Plots are drawn on a matplotlib `Figure` with the Agg canvas, never through
pyplot, so they work without a display, in threads, and inside notebooks
without touching the notebook's own matplotlib backend.
"""

from __future__ import annotations

import os
from typing import List, Optional

from sac_distributed import paths
from sac_distributed.errors import ConfigError

# The file's one reader lives with its writer; re-exported for sac-plot's callers.
from sac_distributed.results import EvalPoint, read_results

__all__ = ["EvalPoint", "X_AXES", "plot_learning_curve", "read_results", "results_path"]

X_AXES = ("train_step", "env_steps")


def results_path(root_dir: str) -> str:
    """Where the evaluator of a run on `root_dir` writes its results."""
    return paths.results_path(root_dir)


def plot_learning_curve(
    points: List[EvalPoint],
    output_path: str,
    x: str = "env_steps",
    title: Optional[str] = None,
) -> str:
    """Writes a PNG: average return (top) and episode length (bottom) against `x`.

    `x` is "env_steps" (default: how runs with other actor counts or update
    ratios compare) or "train_step". Returns `output_path`.
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
    top.plot(xs, [p.average_return for p in points], marker="o", color="tab:blue")
    top.set_ylabel("Average return")
    top.grid(True, alpha=0.3)
    top.set_title(title or f"Evaluation ({len(points)} points)")
    bottom.plot(xs, [p.average_episode_length for p in points], marker=".", color="tab:gray")
    bottom.set_ylabel("Episode length")
    bottom.set_xlabel("Train step" if x == "train_step" else "Environment steps")
    bottom.grid(True, alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(output_path)), exist_ok=True)
    fig.savefig(output_path, format="png")
    return output_path
