"""sac-plot: a learning-curve PNG from the evaluator's results.csv.

    sac-plot --root_dir=/tmp/sac                         # -> /tmp/sac/eval/learning_curve.png
    sac-plot --results=/tmp/sac/eval/results.csv --output=curve.png --x=train_step

Plots average return (and episode length) per evaluation against the train
step or (the default) the environment steps collected so far, the axis on which
runs with other actor counts, update ratios or libraries compare. Given
--root_dir, it also draws the actors' training episodes
(collect/actor_<task>/episodes.csv) on the env-steps axis.
"""

import os

from absl import flags

from sac_distributed.bin import _common
from sac_distributed.results import read_results
from sac_distributed.tools import plotting

flags.DEFINE_string("results", None, "results.csv to plot (default: root_dir/eval/results.csv).")
flags.DEFINE_string("output", None, "PNG to write (default: learning_curve.png beside results).")
flags.DEFINE_enum(
    "x", "env_steps", list(plotting.X_AXES), "x axis: env steps (compare runs) or train steps."
)
flags.DEFINE_string("title", None, "Plot title (default: the env, from the run's run_info.json).")
FLAGS = flags.FLAGS


def main() -> None:
    root_dir = None if FLAGS.results else _common.root_dir()
    results = FLAGS.results or plotting.results_path(root_dir)
    output = FLAGS.output or os.path.join(os.path.dirname(results), "learning_curve.png")
    points = read_results(results)
    episodes = plotting.training_episodes(root_dir) if root_dir else []
    run_dir = root_dir or os.path.dirname(os.path.dirname(os.path.abspath(results)))
    title = FLAGS.title or plotting.run_title(run_dir, len(points))
    plotting.plot_learning_curve(points, output, x=FLAGS.x, title=title, episodes=episodes)
    last = points[-1]
    print(
        f"{output}: {len(points)} evaluations, last at train_step {last.train_step}: "
        f"average return {last.average_return:.2f}"
    )
    if episodes and FLAGS.x == "env_steps":
        print(f"  with {len(episodes)} training episodes from the actors' episodes.csv")


def run() -> None:
    _common.run(main, ("root_dir", "verbose"))


if __name__ == "__main__":
    run()
