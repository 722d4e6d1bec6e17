"""The published results tables, generated from the committed runs.

Every table here is computed from the runs under benchmarks/results/ that git
tracks (a run the learning benchmark is still writing, or one not committed yet,
is left out), so README.md and the docs site cannot drift from the data:

    python benchmarks/learning_report.py tables           # rewrite the files
    python benchmarks/learning_report.py tables --check   # exit 1 where one differs

One rule for every cell. A row is one set of runs: one output directory's env and
system-variant, or a few directories holding more seeds of the same setting. A
return cell is the median [min, max], over every finished seed of that set, of the
greedy evaluation return interpolated at the mark (`learning_report.return_at`),
rounded to the nearest unit (Minitaur: hundredths). A cell that covers fewer seeds
than its row (a mark past some seeds' budget) says how many it covers.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
from typing import Dict, List, Optional, Sequence, Set, Tuple

from benchmarks import learning_report
from benchmarks.learning_report import REFERENCE, REFERENCE_NAME, Run, return_at

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS_DIR = os.path.join("benchmarks", "results")
GENERATED_DIR = os.path.join("docs", "generated")
GLANCE_FILE = os.path.join(GENERATED_DIR, "results-at-a-glance.md")
BY_ENV_FILE = os.path.join(GENERATED_DIR, "results-by-env.md")
README = "README.md"
GLANCE_BEGIN = "<!-- generated:results-at-a-glance:begin -->"
GLANCE_END = "<!-- generated:results-at-a-glance:end -->"
COMMAND = "python benchmarks/learning_report.py tables"


@dataclasses.dataclass(frozen=True)
class RunSet:
    """The runs one row stands for: (output directory, system-variant) pairs of one env."""

    env_name: str
    label: str
    sources: Tuple[Tuple[str, str], ...]  # (directory under benchmarks/results, group)
    note: str = ""  # what the set is, or why seeds are left out

    def paths(self) -> List[str]:
        return [f"{RESULTS_DIR}/{d}/runs/{self.env_name}/{g}" for d, g in self.sources]


def _set(env: str, label: str, *sources: Tuple[str, str], note: str = "") -> RunSet:
    return RunSet(env, label, tuple(sources), note)


PENDULUM = _set("Pendulum-v1", "ours, preset", ("learning", "ours-preset"))
INVERTED = _set(
    "InvertedPendulumBulletEnv-v0",
    "ours, preset",
    ("learning", "ours-huberavg005"),
    note="the preset's values, run as the variant `huberavg005`",
)
HALFCHEETAH = _set("HalfCheetahBulletEnv-v0", "ours, preset", ("learning", "ours-preset"))
HALFCHEETAH_300K = _set("HalfCheetahBulletEnv-v0", "ours, preset", ("learning_300k", "ours-preset"))
CROSSQ = _set("HalfCheetahBulletEnv-v0", "ours, CrossQ", ("crossq_halfcheetah", "ours-crossq"))
CROSSQ_300K = _set("HalfCheetahBulletEnv-v0", "ours, CrossQ", ("crossq_300k", "ours-crossq"))
CROSSQ_PENDULUM = _set("Pendulum-v1", "ours, CrossQ", ("crossq_small", "ours-crossq"))
CROSSQ_INVERTED = _set(
    "InvertedPendulumBulletEnv-v0", "ours, CrossQ", ("crossq_small", "ours-crossq")
)
CROSSQ_HOPPER = _set(
    "HopperBulletEnv-v0",
    "ours, CrossQ",
    ("crossq_hopper", "ours-crossq_clip"),
    note="CrossQ's default (log std clipped), run as the variant `crossq_clip`",
)
CROSSQ_WALKER = _set(
    "Walker2DBulletEnv-v0", "ours, CrossQ", ("crossq_bullet_walkers", "ours-crossq")
)
CROSSQ_ANT = _set("AntBulletEnv-v0", "ours, CrossQ", ("crossq_bullet_walkers", "ours-crossq"))
HOPPER = _set("HopperBulletEnv-v0", "ours, preset", ("learning", "ours-preset"))
HOPPER_300K = _set("HopperBulletEnv-v0", "ours, preset", ("learning_300k", "ours-preset"))
WALKER_300K = _set(
    "Walker2DBulletEnv-v0",
    "ours, preset",
    ("learning_walker_300k", "ours-zoo256"),
    note="the preset's values, run as the variant `zoo256`",
)
ANT = _set(
    "AntBulletEnv-v0",
    "ours, preset",
    ("learning", "ours-zoo"),
    note="the preset's values, run as the variant `zoo`",
)
ANT_300K = _set("AntBulletEnv-v0", "ours, preset", ("learning_300k", "ours-preset"))
MINITAUR = _set("MinitaurBulletEnv-v0", "ours, preset", ("learning", "ours-preset"))
# A Gymnasium env nobody tuned for: no preset, so the generic defaults (since
# 2026-12-07 SB3's where they learned faster, acting on [-1, 1]; run with no flag as the
# variant `generic1207`).
UNTUNED = _set(
    "InvertedPendulum-v5",
    "ours, no preset",
    ("learning_defaults_30k", "ours-generic1207"),
    note="no preset: the generic defaults (100 warm-up steps, PyTorch's init, target "
    "entropy -dim(A), actors pulling every 10 env steps, actions on [-1, 1]; run with no "
    "flag as the variant `generic1207`)",
)
UNTUNED_1204 = _set(
    "InvertedPendulum-v5",
    "ours, no preset, generic defaults of 2026-12-04 (on the env's action scale)",
    ("learning_defaults_30k", "ours-sb3like_ent"),
    note="run as the variant `sb3like_ent`",
)
UNTUNED_FORMER = _set(
    "InvertedPendulum-v5",
    "ours, no preset, former generic defaults (to 2026-12-04)",
    ("learning_untuned", "ours-clip"),
    note="run as the variant `clip`, with the library's 10k random warm-up of then",
)
UNTUNED_UNCLIPPED = _set(
    "InvertedPendulum-v5",
    "ours, no preset, generic defaults before 2026-12-02 (log std unclipped)",
    ("learning_untuned", "ours-preset"),
)
MUJOCO = {
    # HalfCheetah-v5's preset trains at learning rates 1e-3 since 2026-11-28.
    "HalfCheetah-v5": _set(
        "HalfCheetah-v5",
        "ours, preset",
        ("learning_mujoco_tuning", "ours-lr1em3"),
        note="the preset's values, run as the variant `lr1em3`",
    ),
    # Hopper-v5's preset takes CleanRL's critic rate and warm-up and target entropy -1.5
    # since 2026-11-29.
    "Hopper-v5": _set(
        "Hopper-v5",
        "ours, preset",
        ("learning_mujoco_tuning", "ours-cleanrl_ent"),
        note="the preset's values, run as the variant `cleanrl_ent`",
    ),
    # Walker2d-v5's preset takes CleanRL's critic rate and warm-up since 2026-12-02.
    "Walker2d-v5": _set(
        "Walker2d-v5",
        "ours, preset",
        ("learning_mujoco_tuning", "ours-cleanrl"),
        note="the preset's values, run as the variant `cleanrl`",
    ),
    # Ant-v5's preset takes 3-step returns since 2026-12-01 and target entropy -4 since
    # 2026-12-02.
    "Ant-v5": _set(
        "Ant-v5",
        "ours, preset",
        ("learning_mujoco_tuning", "ours-n3ent4"),
        note="the preset's values, run as the variant `n3ent4`",
    ),
    # Humanoid-v5's preset (SB3's defaults, the actor's log std clipped) since 2026-12-02.
    "Humanoid-v5": _set("Humanoid-v5", "ours, preset", ("learning_mujoco", "ours-preset")),
}
# Ant-v5's seeds 3-5 ran as the variant ent8 while the preset was at -4 for a day.
ANT_V5_FORMER = _set(
    "Ant-v5",
    "ours, first preset (1-step returns, target entropy -8)",
    ("learning_mujoco", "ours-preset"),
    ("learning_mujoco_tuning", "ours-ent8"),
    note="seeds 3-5 run as the variant `ent8` (`--target_entropy=-8`, that preset's value)",
)
MUJOCO_300K = _set("HalfCheetah-v5", "ours, preset", ("learning_mujoco_300k", "ours-preset"))
HALFCHEETAH_V5_FORMER = _set(
    "HalfCheetah-v5",
    "ours, former preset (learning rates 3e-4)",
    ("learning_mujoco", "ours-preset"),
)
# SB3 2.9.2 on the same env with the preset's hyperparameters (Hopper-v5's preset has
# separate learning rates, which SB3's one rate cannot follow, so its SB3 run is
# HOPPER_V5_SB3 below).
MUJOCO_SB3 = {
    env: _set(env, label, ("learning_mujoco_sb3", "sb3-preset"))
    for env, label in (
        ("Walker2d-v5", "SB3, the former preset's hyperparameters"),
        ("Ant-v5", "SB3, the former preset's hyperparameters"),
    )
}
HOPPER_V5_FORMER = _set(
    "Hopper-v5",
    "ours, first preset (critic rate 3e-4, 10k warm-up, target entropy -3)",
    ("learning_mujoco", "ours-preset"),
)
HOPPER_V5_CLEANRL = _set(
    "Hopper-v5",
    "ours, former preset (critic rate 1e-3, 5k warm-up, target entropy -3)",
    ("learning_mujoco_tuning", "ours-cleanrl"),
    note="`--critic_learning_rate=1e-3 --initial_collect_steps=5000`",
)
ANT_V5_N3 = _set(
    "Ant-v5",
    "ours, former preset (3-step returns, target entropy -8)",
    ("learning_mujoco_tuning", "ours-n3"),
    note="`--n_step=3`",
)
ANT_V5_N5 = _set(
    "Ant-v5",
    "ours, former preset with 5-step returns",
    ("learning_mujoco_tuning", "ours-n5"),
    note="`--n_step=5`",
)
ANT_V5_ENT4 = _set(
    "Ant-v5",
    "ours, first preset (1-step returns), target entropy -4 (TF-Agents' -dim(A)/2)",
    ("learning_mujoco_tuning", "ours-ent4"),
)
WALKER_V5_N3 = _set(
    "Walker2d-v5",
    "ours, former preset with 3-step returns",
    ("learning_mujoco_tuning", "ours-n3"),
    note="`--n_step=3`",
)
WALKER_V5_ENT3 = _set(
    "Walker2d-v5",
    "ours, former preset, target entropy -3 (TF-Agents' -dim(A)/2)",
    ("learning_mujoco_tuning", "ours-ent3"),
    note="`--target_entropy=-3`",
)
WALKER_V5_CLEANRL_ENT = _set(
    "Walker2d-v5",
    "ours, preset with target entropy -3 (Hopper-v5's combination)",
    ("learning_mujoco_tuning", "ours-cleanrl_ent"),
    note="`--target_entropy=-3` on top of the preset",
)
WALKER_V5_FORMER = _set(
    "Walker2d-v5",
    "ours, former preset (SB3's defaults: critic rate 3e-4, 10k warm-up)",
    ("learning_mujoco", "ours-preset"),
)
HOPPER_V5_CRITIC = _set(
    "Hopper-v5",
    "ours, first preset with the critic rate 1e-3 alone",
    ("learning_mujoco_tuning", "ours-critic1em3"),
    note="`--critic_learning_rate=1e-3`, 10k warm-up",
)
# SB3 2.9.2 on Hopper-v5 with the first preset's hyperparameters (one rate, 3e-4).
HOPPER_V5_SB3 = _set(
    "Hopper-v5",
    "SB3, the first preset's hyperparameters",
    ("learning_mujoco_sb3", "sb3-preset"),
    note='`--common_flags="--critic_learning_rate=3e-4 --initial_collect_steps=10000"`',
)
CROSSQ_MUJOCO = {
    env: _set(env, "ours, CrossQ", ("crossq_mujoco", "ours-crossq"))
    for env in ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5")
}
# CrossQ with 512-wide critics, for the 15 % of the CrossQ authors' figures (issue 44).
CROSSQ_MUJOCO_512 = {
    env: _set(
        env,
        "ours, CrossQ, critic width 512",
        ("crossq_mujoco_512", "ours-crossq512"),
        note="`--algorithm=crossq --critic_joint_fc_layer_params=512,512`",
    )
    for env in ("HalfCheetah-v5", "Walker2d-v5")
}
# The preset with every learning rate at 1e-3 (CrossQ's; CleanRL's critic rate).
MUJOCO_LR = {
    env: _set(
        env,
        "ours, SAC, learning rates 1e-3",
        ("learning_mujoco_tuning", "ours-lr1em3"),
        note="the first v5 preset (SB3's defaults, target entropy -dim(A)) with "
        "`--critic_learning_rate=1e-3 --actor_learning_rate=1e-3 --alpha_learning_rate=1e-3`",
    )
    for env in ("Hopper-v5", "Walker2d-v5", "Ant-v5")
}

# The short table of README.md and the docs: (runs, mark, budget in words).
GLANCE: Tuple[Tuple[RunSet, int, str], ...] = (
    (PENDULUM, 20_000, "20k"),
    (CROSSQ_PENDULUM, 20_000, "20k"),
    (INVERTED, 30_000, "30k"),
    (CROSSQ_INVERTED, 30_000, "30k"),
    (HALFCHEETAH, 100_000, "100k"),
    (HALFCHEETAH_300K, 300_000, "300k"),
    (CROSSQ, 100_000, "100k"),
    (CROSSQ_300K, 300_000, "300k"),
    (HOPPER, 100_000, "100k"),
    (HOPPER_300K, 300_000, "300k"),
    (CROSSQ_HOPPER, 100_000, "100k"),
    (WALKER_300K, 100_000, "100k of 300k runs"),
    (WALKER_300K, 300_000, "300k"),
    (CROSSQ_WALKER, 100_000, "100k"),
    (ANT, 100_000, "100k"),
    (ANT_300K, 300_000, "300k"),
    (CROSSQ_ANT, 100_000, "100k"),
    (MINITAUR, 110_000, "110k (100k SGD steps)"),
    *((runs, 100_000, "100k") for runs in MUJOCO.values()),
    (MUJOCO_300K, 100_000, "100k of 300k runs"),
    (MUJOCO_300K, 300_000, "300k"),
    *((runs, 100_000, "100k") for runs in CROSSQ_MUJOCO.values()),
    *((runs, 100_000, "100k") for runs in CROSSQ_MUJOCO_512.values()),
    (UNTUNED, 30_000, "30k"),
)

_FORMER_WALKER = "former preset (`_LOCOMOTION`)"
# The tables per env: (marks, the preset's runs and the peers that ran with the same
# hyperparameters). Ablations are in benchmarks/LEARNING.md.
BY_ENV: Dict[str, Tuple[Tuple[int, ...], Tuple[RunSet, ...]]] = {
    "Pendulum-v1": (
        (5_000, 10_000, 20_000),
        (
            PENDULUM,
            _set("Pendulum-v1", "SB3, same hyperparameters", ("learning", "sb3-preset")),
            _set("Pendulum-v1", "stock TF-Agents loop", ("learning", "stock-preset")),
            CROSSQ_PENDULUM,
        ),
    ),
    "InvertedPendulumBulletEnv-v0": (
        (10_000, 20_000, 30_000),
        (
            INVERTED,
            _set(
                "InvertedPendulumBulletEnv-v0",
                "ours, old preset (1-step, gamma 0.99)",
                ("learning", "ours-n1g99"),
            ),
            _set(
                "InvertedPendulumBulletEnv-v0",
                "SB3, old preset's hyperparameters",
                ("learning", "sb3-n1g99"),
            ),
            _set(
                "InvertedPendulumBulletEnv-v0",
                "stock TF-Agents loop, old preset's",
                ("learning", "stock-n1g99"),
            ),
            CROSSQ_INVERTED,
        ),
    ),
    "HalfCheetahBulletEnv-v0": (
        (50_000, 100_000, 200_000, 300_000),
        (
            HALFCHEETAH,
            _set(
                "HalfCheetahBulletEnv-v0", "SB3, same hyperparameters", ("learning", "sb3-preset")
            ),
            HALFCHEETAH_300K,
            CROSSQ,
            CROSSQ_300K,
        ),
    ),
    "HopperBulletEnv-v0": (
        (50_000, 100_000, 200_000, 300_000),
        (
            HOPPER,
            _set("HopperBulletEnv-v0", "SB3, same hyperparameters", ("learning", "sb3-preset")),
            HOPPER_300K,
            CROSSQ_HOPPER,
        ),
    ),
    "Walker2DBulletEnv-v0": (
        (50_000, 100_000, 200_000, 300_000),
        (
            WALKER_300K,
            _set("Walker2DBulletEnv-v0", _FORMER_WALKER, ("learning", "ours-locomotion")),
            _set("Walker2DBulletEnv-v0", _FORMER_WALKER, ("learning_300k", "ours-locomotion")),
            _set(
                "Walker2DBulletEnv-v0",
                "SB3, former preset's hyperparameters",
                ("learning", "sb3-preset"),
                ("learning_walker_sb3_50k", "sb3-preset"),
                note="seeds 0-2 to 100k, seeds 3-7 to 50k",
            ),
            CROSSQ_WALKER,
        ),
    ),
    "AntBulletEnv-v0": (
        (50_000, 100_000, 200_000, 300_000),
        (
            ANT,
            ANT_300K,
            _set(
                "AntBulletEnv-v0",
                "SB3, same hyperparameters",
                ("learning_ant_sb3_50k", "sb3-preset"),
            ),
            _set(
                "AntBulletEnv-v0",
                "ours, old preset (the walkers' common one)",
                ("learning", "ours-walkers-async"),
            ),
            CROSSQ_ANT,
        ),
    ),
    "MinitaurBulletEnv-v0": (
        (50_000, 110_000),
        (
            MINITAUR,
            _set(
                "MinitaurBulletEnv-v0",
                "SB3, same hyperparameters",
                ("learning", "sb3-preset"),
                note="learning_minitaur_sb3/ holds the same seeds 0-1 and another seed-2 run",
            ),
        ),
    ),
    "HalfCheetah-v5": (
        (50_000, 100_000, 200_000, 300_000),
        (
            MUJOCO["HalfCheetah-v5"],
            MUJOCO_300K,
            HALFCHEETAH_V5_FORMER,
            _set(
                "HalfCheetah-v5",
                "SB3, the former preset's hyperparameters",
                ("learning_mujoco_sb3", "sb3-preset"),
            ),
            CROSSQ_MUJOCO["HalfCheetah-v5"],
            CROSSQ_MUJOCO_512["HalfCheetah-v5"],
        ),
    ),
    "Hopper-v5": (
        (50_000, 100_000),
        (
            MUJOCO["Hopper-v5"],
            HOPPER_V5_CLEANRL,
            HOPPER_V5_FORMER,
            HOPPER_V5_CRITIC,
            HOPPER_V5_SB3,
            MUJOCO_LR["Hopper-v5"],
            CROSSQ_MUJOCO["Hopper-v5"],
        ),
    ),
    "Walker2d-v5": (
        (50_000, 100_000),
        (
            MUJOCO["Walker2d-v5"],
            WALKER_V5_CLEANRL_ENT,
            WALKER_V5_FORMER,
            WALKER_V5_N3,
            WALKER_V5_ENT3,
            MUJOCO_SB3["Walker2d-v5"],
            MUJOCO_LR["Walker2d-v5"],
            CROSSQ_MUJOCO["Walker2d-v5"],
            CROSSQ_MUJOCO_512["Walker2d-v5"],
        ),
    ),
    "Ant-v5": (
        (50_000, 100_000),
        (
            MUJOCO["Ant-v5"],
            ANT_V5_N3,
            ANT_V5_N5,
            ANT_V5_ENT4,
            _set(
                "Ant-v5",
                "SB3, the preset's hyperparameters (3-step returns, target entropy -4)",
                ("learning_mujoco_sb3_n3ent4", "sb3-preset"),
                note="SB3's `n_steps=3` (its NStepReplayBuffer)",
            ),
            MUJOCO_SB3["Ant-v5"],
            _set(
                "Ant-v5",
                "ours, former preset (target entropy -8), v4's observation (no contact forces)",
                ("learning_mujoco_tuning", "ours-n3v4obs"),
                note="`--env_kwargs='{\"include_cfrc_ext_in_observation\": false}'`",
            ),
            ANT_V5_FORMER,
            _set(
                "Ant-v5",
                "ours, first preset, v4's observation",
                ("learning_mujoco_tuning", "ours-v4obs"),
                note="`--n_step=1 --env_kwargs='{\"include_cfrc_ext_in_observation\": false}'`",
            ),
            MUJOCO_LR["Ant-v5"],
            CROSSQ_MUJOCO["Ant-v5"],
        ),
    ),
    "Humanoid-v5": ((50_000, 100_000), (MUJOCO["Humanoid-v5"],)),
    "InvertedPendulum-v5": (
        (10_000, 20_000, 30_000),
        (UNTUNED, UNTUNED_1204, UNTUNED_FORMER, UNTUNED_UNCLIPPED),
    ),
}


def tracked_files(root: str) -> Optional[Set[str]]:
    """The files under benchmarks/results that git tracks; None outside a git checkout."""
    try:
        listed = subprocess.run(
            ["git", "-C", root, "ls-files", "-z", "--", RESULTS_DIR],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return {os.path.join(root, p) for p in listed.decode().split("\0") if p}


def load_set(root: str, runs: RunSet, tracked: Optional[Set[str]]) -> List[Run]:
    """The finished, committed runs of a set; two runs of one seed are an error."""
    loaded: Dict[int, Run] = {}
    for path in runs.paths():
        group_dir = os.path.join(root, path)
        for seed_dir in sorted(os.listdir(group_dir)) if os.path.isdir(group_dir) else []:
            run_dir = os.path.join(group_dir, seed_dir)
            needed = [os.path.join(run_dir, f) for f in ("run.json", "results.csv")]
            if tracked is not None and not all(f in tracked for f in needed):
                continue
            run = learning_report.load_run(runs.env_name, path.rsplit("/", 1)[1], run_dir)
            if run is None:
                continue
            if run.seed in loaded:
                raise ValueError(f"seed {run.seed} twice in {runs.label}: {runs.paths()}")
            loaded[run.seed] = run
    return [loaded[s] for s in sorted(loaded)]


def _number(value: float, digits: int) -> str:
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text  # no "-0.00"


def stats_cell(values: Sequence[Optional[float]], digits: int, of: int) -> str:
    """median [min, max] of the values present; says how many when fewer than `of`."""
    present = sorted(v for v in values if v is not None)
    if not present:
        return "–"
    text = _number(statistics.median(present), digits)
    if len(present) > 1:
        text += f" [{_number(present[0], digits)}, {_number(present[-1], digits)}]"
    if len(present) < of:
        text += f" ({len(present)} of {of} seeds)"
    return text


def seeds_text(seeds: Sequence[int]) -> str:
    """0-2, 5, 7-9: the seeds as ranges."""
    parts: List[str] = []
    for seed in sorted(seeds):
        if parts and parts[-1][1] == seed - 1:
            parts[-1] = (parts[-1][0], seed)
        else:
            parts.append((seed, seed))
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)


def _steps(mark: int) -> str:
    return f"{mark / 1000:g}k"


# What a row of an env without a published reference is set against.
TARGET_TEXT: Dict[str, str] = {
    "InvertedPendulumBulletEnv-v0": "1000, the most an episode scores (target: reach, hold)",
    "InvertedPendulum-v5": "1000, the most an episode scores",
    "Humanoid-v5": "none at 100k here; the untrained policy scores 60-75",
}


def reference_cell(env_name: str, mark: int) -> str:
    value = REFERENCE.get(env_name, {}).get(mark)
    if value is None:
        return TARGET_TEXT.get(env_name, "–")
    return f"{value:g} ({REFERENCE_NAME.get(env_name, 'SB3-zoo')})"


def _where(runs: RunSet, links: bool, short: bool = False) -> str:
    """The runs' directories: links (README) or code (the docs, whose link check
    would refuse paths outside docs/); `short` names only the output and the group."""
    names = []
    for (directory, group), path in zip(runs.sources, runs.paths()):
        text = f"{directory}: {group}" if short else path.split("/", 2)[2]
        names.append(f"[{text}]({path})" if links else f"`{text}`")
    return ", ".join(names)


def glance_table(root: str, tracked: Optional[Set[str]], links: bool) -> str:
    """env | budget | ours | reference | runs: the preset's return at its budget."""
    lines = [
        "| env | env steps | ours: greedy return, median [min, max] | reference | runs |",
        "|---|---|---|---|---|",
    ]
    for runs, mark, budget in GLANCE:
        loaded = load_set(root, runs, tracked)
        digits = learning_report.RETURN_DIGITS.get(runs.env_name, 0)
        ours = stats_cell([return_at(r.points, mark) for r in loaded], digits, len(loaded))
        if loaded:
            ours += f"; {len(loaded)} seed{'s' if len(loaded) > 1 else ''}"
        if runs.label != "ours, preset":
            ours = f"{runs.label.removeprefix('ours, ')}: {ours}"
        cells = [runs.env_name, budget, ours, reference_cell(runs.env_name, mark)]
        lines.append("| " + " | ".join(cells + [_where(runs, links, short=True)]) + " |")
    return "\n".join(lines) + "\n"


GLANCE_NOTE = (
    "Greedy evaluations (10 episodes each), one SGD step per env step; every committed "
    "seed of each set of runs, one set per row, the return interpolated at the env-step "
    "mark. References: SB3-zoo's are means of training episodes (an exploring policy, "
    "which scores below a greedy one); Minitaur's is the TF-Agents tutorial's curve; the "
    "MuJoCo v5 rows' are SAC on the v4 envs. Runs: "
    "`benchmarks/results/<output>/runs/<env>/<system>-<variant>`. Generated from the "
    "committed runs by "
    f"`{COMMAND}`."
)


def env_table(root: str, tracked: Optional[Set[str]], env_name: str) -> str:
    """One env's runs: the return at each mark, train return, time, stability."""
    marks, sets = BY_ENV[env_name]
    digits = learning_report.RETURN_DIGITS.get(env_name, 0)
    header = ["runs", "budget", "seeds", *(f"@{_steps(m)}" for m in marks)]
    header += ["train, last mark", "s to last mark", "unstable"]
    hold = learning_report.HOLD.get(env_name)
    if hold:
        header.append(f"held {hold[0]:g}")
    header.append("where")
    lines = [f"#### {env_name}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    reference = REFERENCE.get(env_name, {})
    if any(m in reference for m in marks):
        name = REFERENCE_NAME.get(env_name, "SB3-zoo")
        ref = [f"reference ({name})", "", ""] + [
            f"{reference[m]:g}" if m in reference else "" for m in marks
        ]
        lines.append("| " + " | ".join(ref + [""] * (len(header) - len(ref))) + " |")
    for runs in sets:
        lines.append("| " + " | ".join(_env_row(root, tracked, runs, marks, digits, hold)) + " |")
    notes = [f"{runs.label} ({_where(runs, False)}): {runs.note}." for runs in sets if runs.note]
    return "\n".join(lines + [""] + notes) + "\n"


def _env_row(root, tracked, runs: RunSet, marks, digits: int, hold) -> List[str]:
    loaded = load_set(root, runs, tracked)
    n = len(loaded)
    budget = ", ".join(sorted({_steps(r.budget) for r in loaded}, key=lambda s: float(s[:-1])))
    cells = [
        runs.label,
        budget or "–",
        f"{seeds_text([r.seed for r in loaded])} ({n})" if n else "none",
    ]
    cells += [stats_cell([return_at(r.points, m) for r in loaded], digits, n) for m in marks]
    last = max(
        (m for m in marks if any(return_at(r.points, m) is not None for r in loaded)), default=None
    )
    # Only the runs evaluated up to the last mark: a shorter run's episodes end earlier.
    there = [r for r in loaded if last is not None and return_at(r.points, last) is not None]
    train = [learning_report.train_return_at(r.episodes, last) for r in there if r.episodes]
    cells.append(f"{stats_cell(train, digits, n)} @{_steps(last)}" if train else "–")
    seconds = [learning_report.seconds_to_steps(r, last) for r in there]
    cells.append(f"{stats_cell(seconds, 0, n)} @{_steps(last)}" if seconds else "–")
    unstable = [r.seed for r in loaded if learning_report.is_unstable(r.points)]
    cells.append(seeds_text(unstable) or "none")
    if hold:
        held = [learning_report.holds(r.points, *hold) for r in loaded]
        reached = sum(learning_report.hold_status(r.points, *hold) != "never" for r in loaded)
        cells.append(f"{sum(h is True for h in held)} of {n} (reached: {reached})")
    cells.append(_where(runs, False))
    return cells


BY_ENV_NOTE = (
    "Cells: median [min, max] over the row's seeds; a cell that covers fewer says how "
    "many. `@Nk`: greedy evaluation return interpolated at N thousand env steps. Train: "
    "the mean return of the last 10 training episodes (the exploring policy, the measure "
    "of SB3-zoo's monitor logs) ended by the row's last mark; – where the runs kept no "
    "training episodes. s to last mark: wall seconds from a run's start (start-up included) "
    "to its first evaluation at or past the row's last mark; the runs often shared the 2-core "
    "machine with other runs or test suites, so these are upper bounds, not speed figures. "
    "Unstable: seeds that lost half of what they had gained over their first evaluation "
    "for 3 evaluations in a row."
)


def render(root: str = REPO_ROOT) -> Dict[str, str]:
    """The generated files' text by path relative to the repository root."""
    tracked = tracked_files(root)
    glance = glance_table(root, tracked, links=False)
    by_env = [env_table(root, tracked, env) for env in BY_ENV]
    header = f"<!-- Generated by `{COMMAND}` from the committed runs: do not edit. -->\n\n"
    readme_path = os.path.join(root, README)
    with open(readme_path) as f:
        readme = f.read()
    block = glance_table(root, tracked, links=True) + "\n" + GLANCE_NOTE + "\n"
    from benchmarks.report import untuned  # it builds on this module's cells

    return {
        GLANCE_FILE: header + glance + "\n" + GLANCE_NOTE + "\n",
        BY_ENV_FILE: header + "\n".join(by_env) + "\n" + BY_ENV_NOTE + "\n",
        untuned.FILE: untuned.render(root, tracked),
        README: replace_block(readme, block),
    }


def replace_block(text: str, block: str) -> str:
    """`text` with what lies between the at-a-glance markers replaced by `block`."""
    start, end = text.find(GLANCE_BEGIN), text.find(GLANCE_END)
    if start < 0 or end < start:
        raise ValueError(f"{README} has no {GLANCE_BEGIN} ... {GLANCE_END} markers")
    note = f"<!-- Generated by `{COMMAND}` from the committed runs: do not edit. -->\n"
    return text[: start + len(GLANCE_BEGIN)] + "\n" + note + block + text[end:]


def write(out_root: str, root: str = REPO_ROOT) -> List[str]:
    """Writes the generated files under `out_root`; returns their paths."""
    written = []
    for rel, text in render(root).items():
        path = os.path.join(out_root, rel)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        written.append(path)
    return written


def differing(root: str = REPO_ROOT) -> List[str]:
    """The generated files whose committed text differs from what the runs give now."""
    stale = []
    for rel, text in render(root).items():
        path = os.path.join(root, rel)
        try:
            with open(path) as f:
                same = f.read() == text
        except OSError:
            same = False
        if not same:
            stale.append(rel)
    return stale


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when a committed file differs from what the runs give",
    )
    p.add_argument(
        "--out_dir",
        default=REPO_ROOT,
        help="where to write docs/generated/*.md and README.md (default: the repository)",
    )
    args = p.parse_args(argv)
    if args.check:
        stale = differing()
        for rel in stale:
            print(f"{rel} differs from the committed runs: run `{COMMAND}`")
        return 1 if stale else 0
    for path in write(args.out_dir):
        print(path)
    return 0
