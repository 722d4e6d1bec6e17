"""The README's learning curves: every preset on one figure, from committed results.

One panel per env: the preset's runs (median line, min-max band over seeds), the
peers that ran with the same hyperparameters, and the reference points. Nothing
trains here; the curves come from the `learning.py` output directories under
benchmarks/results/ named in PANELS, so after a sweep adds seeds, run this again:

    python benchmarks/learning_report.py figure            # -> benchmarks/results/curves.png
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import shlex
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from benchmarks import learning, learning_report

# benchmarks/results, beside this module's package
RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")
DEFAULT_PATH = os.path.join(RESULTS, "curves.png")


@dataclasses.dataclass(frozen=True)
class Curve:
    label: str
    out: str  # a learning.py --out directory, relative to benchmarks/results/
    group: str  # "<system>-<variant>" under out/runs/<env>/


@dataclasses.dataclass(frozen=True)
class Panel:
    env_name: str
    curves: Tuple[Curve, ...]


# Each panel's first curve is the env's preset as config.PRESETS has it now (some
# committed runs carry the preset's values under a variant name); the peers are
# only those run with the same hyperparameters.
PANELS: Tuple[Panel, ...] = (
    Panel(
        "Pendulum-v1",
        (
            Curve("ours", "learning", "ours-preset"),
            Curve("stock TF-Agents loop", "learning", "stock-preset"),
            Curve("SB3", "learning", "sb3-preset"),
        ),
    ),
    Panel("InvertedPendulumBulletEnv-v0", (Curve("ours", "learning", "ours-huberavg005"),)),
    Panel(
        "MinitaurBulletEnv-v0",
        (Curve("ours", "learning", "ours-preset"), Curve("SB3", "learning", "sb3-preset")),
    ),
    Panel(
        "HalfCheetahBulletEnv-v0",
        (Curve("ours", "learning_300k", "ours-preset"), Curve("SB3", "learning", "sb3-preset")),
    ),
    Panel(
        "HopperBulletEnv-v0",
        (Curve("ours", "learning_300k", "ours-preset"), Curve("SB3", "learning", "sb3-preset")),
    ),
    Panel("Walker2DBulletEnv-v0", (Curve("ours", "learning_walker_300k", "ours-zoo256"),)),
    Panel(
        "AntBulletEnv-v0",
        (
            Curve("ours", "learning_300k", "ours-preset"),
            Curve("SB3", "learning_ant_sb3_50k", "sb3-preset"),
        ),
    ),
)
COLUMNS = 4
# Set per run by learning.py from its budget (or only where files go), not part of
# what the preset trains with.
BUDGET_FIELDS = frozenset(
    {
        "num_iterations",
        "eval_interval",
        "num_eval_episodes",
        "samples_per_insert",
        "wait_for_eval",
        "policy_save_interval",
    }
)


def run_hyperparams(env_name: str, command: str) -> Dict[str, object]:
    """The hyperparameters a run trained with, from its run.json command.

    A peer's command carries them all (--hparams_json; a field added since takes
    its default, which is what the code did before it existed); ours carries the
    preset's overrides as flags, resolved against the preset in config.py.
    """
    from sac_distributed.config import Hyperparams

    argv = shlex.split(command)
    for arg in argv:
        if arg.startswith("--hparams_json="):
            used = json.loads(arg.partition("=")[2])
            return {**dataclasses.asdict(Hyperparams()), **used}
    flags = [a for a in argv[1:] if a.startswith("--")]
    return dataclasses.asdict(learning.resolved_hparams(env_name, flags))


def preset_mismatches(results: str, panels: Sequence[Panel] = PANELS) -> List[str]:
    """Runs drawn as an env's preset (or a peer with its hyperparameters) that trained
    with other values than config.PRESETS has now, one line each."""
    from sac_distributed.config import hyperparams_for

    lines = []
    for panel in panels:
        preset = dataclasses.asdict(hyperparams_for(panel.env_name))
        for curve in panel.curves:
            pattern = os.path.join(results, curve.out, "runs", panel.env_name, curve.group)
            for path in sorted(glob.glob(os.path.join(pattern, "seed*", "run.json"))):
                with open(path) as f:
                    record = json.load(f)
                if record.get("status") != "done":
                    continue
                used = run_hyperparams(panel.env_name, record["command"])
                differ = [
                    f"{k}={_plain(used.get(k))} (preset: {_plain(v)})"
                    for k, v in sorted(preset.items())
                    if k not in BUDGET_FIELDS and _plain(used.get(k)) != _plain(v)
                ]
                if differ:
                    lines.append(f"{os.path.dirname(path)}: " + ", ".join(differ))
    return lines


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def curve_runs(results: str, env_name: str, curve: Curve) -> List[learning_report.Run]:
    """The finished runs behind one curve; a clear error when there are none."""
    out = os.path.join(results, curve.out)
    runs = learning_report.load_group(out, env_name, curve.group)
    if not runs:
        raise ValueError(
            f"No finished runs for {env_name} {curve.group} under {out}/runs: the figure's "
            f"'{curve.label}' curve needs them. Run the sweep that makes them (README Results "
            "gives each env's command) or point PANELS at the directory that holds them."
        )
    return runs


def draw(
    path: str, results: str = RESULTS, panels: Sequence[Panel] = PANELS
) -> Dict[str, Dict[str, int]]:
    """Writes the figure to `path`; returns each panel's curves with their seed counts.

    Refuses (ValueError) when a curve has no runs, or when a run it would draw
    trained with other hyperparameters than the env's preset has now.
    """
    mismatches = preset_mismatches(results, panels)
    if mismatches:
        raise ValueError(
            "These runs did not train with the preset config.PRESETS has now, so they "
            "cannot stand for it; rerun them or point PANELS elsewhere:\n  "
            + "\n  ".join(mismatches)
        )
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    loaded = [[(c, curve_runs(results, p.env_name, c)) for c in p.curves] for p in panels]
    ncols = min(COLUMNS, len(panels))
    nrows = -(-len(panels) // ncols)
    fig = Figure(figsize=(4.2 * ncols, 3.4 * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = list(fig.subplots(nrows, ncols, squeeze=False).flat)
    seeds: Dict[str, Dict[str, int]] = {}
    for ax, panel, curves in zip(axes, panels, loaded):
        budget = max(p.env_steps for _, runs in curves for r in runs for p in r.points)
        for curve, runs in curves:
            learning_report.plot_group(ax, f"{curve.label} (n={len(runs)})", runs)
        learning_report.plot_reference(ax, panel.env_name, budget)
        ax.set_title(panel.env_name, fontsize=10)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:g}k"))
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower right", fontsize=7)
        seeds[panel.env_name] = {c.label: len(runs) for c, runs in curves}
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    fig.supxlabel("Environment steps")
    fig.supylabel("Greedy evaluation return (10 episodes)")
    fig.suptitle(
        "Each preset: median and min-max over seeds (n); crosses: SB3-zoo's monitor logs "
        "(Minitaur: the TF-Agents tutorial's curve)"
    )
    fig.savefig(path, format="png", dpi=90)
    return seeds


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--path", default=DEFAULT_PATH, help="Where to write the PNG.")
    args = p.parse_args(argv)
    try:
        seeds = draw(args.path)
    except ValueError as e:
        print(f"results_figure: {e}", file=sys.stderr)
        return 2
    for env_name, curves in seeds.items():
        print(f"{env_name}: " + ", ".join(f"{k} n={n}" for k, n in curves.items()))
    print(f"wrote {args.path}")
    return 0
