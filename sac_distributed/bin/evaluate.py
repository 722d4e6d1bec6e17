"""sac-evaluate: returns (and a --video) of an exported policy directory, after or outside a run.

A tool, not a job of the run: it loads a SavedModel the learner exported and needs
no Reverb server. The run's own evaluator job, which reads the learner's weights
from the Reverb server during training, is sac-evaluator.

    sac-evaluate --policy_dir=/tmp/sac/policies/greedy_policy --env_name=Pendulum-v1 \
        --num_episodes=10 --video=/tmp/sac/pendulum.mp4

It prints one line per episode (return, length, whether the env terminated it
or the time limit cut it off, and the observation it ended in), then the
statistics. --policy_dir may be a SavedModel directory or a root_dir (its
policies/greedy_policy is used). --env_name defaults to the one the learner
recorded in root_dir/run_info.json; it is required for a policy directory
copied away from its root_dir. --video writes .mp4 (ffmpeg) or .gif.
"""

from absl import flags

from sac_distributed.bin import _common
from sac_distributed.tools import inspect_policy

flags.DEFINE_string("policy_dir", None, "Exported policy (SavedModel) directory, or a root_dir.")
flags.DEFINE_integer("num_episodes", 10, "Episodes to run.")
flags.DEFINE_string("video", None, "Record the episodes to this .mp4 or .gif file.")
flags.DEFINE_float("fps", 30.0, "Frames per second of the video.")
flags.DEFINE_integer("frame_every", 1, "Record every n-th environment step.")
flags.mark_flag_as_required("policy_dir")
FLAGS = flags.FLAGS
FLAGS.set_default("env_name", None)  # None: from root_dir/run_info.json (env_kwargs too)


def main() -> None:
    report = inspect_policy.evaluate(
        policy_dir=FLAGS.policy_dir,
        num_episodes=FLAGS.num_episodes,
        env_name=FLAGS.env_name,
        env_kwargs=FLAGS.env_kwargs or None,
        video_path=FLAGS.video,
        seed=FLAGS.seed,
        fps=FLAGS.fps,
        frame_every=FLAGS.frame_every,
    )
    print(f"policy: {report.policy_dir} on {report.env_name}")
    stats = report.stats
    for i, episode in enumerate(
        zip(stats.returns, stats.lengths, stats.endings, stats.last_observations), 1
    ):
        print(f"episode {i}: {inspect_policy.describe_episode(*episode)}")
    print(report.stats.summary())
    if report.video_path:
        print(f"video: {report.video_path} ({report.video_frames} frames)")


def run() -> None:
    _common.run(main, ("env_name", "env_kwargs", "seed", "verbose"))


if __name__ == "__main__":
    run()
