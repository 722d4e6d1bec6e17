"""Peer (a) of the learning benchmark: the stock TF-Agents SAC tutorial loop.

One process, the Minitaur tutorial's pieces as `bench.stock.make_stock_tutorial_loop`
builds them (compare.py's time_to_return runs the same loop): the same
`SacAgent` our learner builds (agent.make_agent), a `tf_agents.train.actor.Actor`
that collects one step with `PyTFEagerPolicy(collect_policy)`, a
`ReverbAddTrajectoryObserver` (2-step items, stride 1) into the tutorial's
Uniform/Fifo table, and a `tf_agents.train.learner.Learner` run for `--utd`
iterations after each step.
It loads the env with `specs.load_env`, so time limits keep discount 1 here
too: the comparison isolates the distributed pipeline, not that fix.
"""

from __future__ import annotations

import sac_distributed  # noqa: F401  (selects tf-keras before TensorFlow is imported)

# isort: split

import os
import sys
from typing import List, Optional

import tensorflow as tf

if __package__ in (None, ""):  # run as a file: the repo root, so that `benchmarks` imports
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from tf_agents.environments import wrappers  # noqa: E402

from benchmarks.bench.stock import EVAL_SEED_OFFSET, make_stock_evaluator, make_stock_tutorial_loop  # noqa: E402
from benchmarks.peer_common import ResultsWriter, episode_log, parse_args  # noqa: E402
from sac_distributed import config as config_lib  # noqa: E402
from sac_distributed.envs import loader as env_loader  # noqa: E402


class LogsEpisodes(wrappers.PyEnvironmentBaseWrapper):
    """Logs each episode the wrapped env finishes to an EpisodeLog (if any).

    Counts env transitions only: a step that the env answers with a FIRST time
    step is its auto-reset after a LAST one (the driver counts that as a step),
    and an explicit reset (a new driver's first call) starts the episode over.
    """

    def __init__(self, env, log):
        super().__init__(env)
        self._log = log
        self._steps = self._length = 0
        self._return = 0.0

    def _reset(self):
        self._length, self._return = 0, 0.0
        return self._env.reset()

    def _step(self, action):
        time_step = self._env.step(action)
        if time_step.is_first():
            self._length, self._return = 0, 0.0
            return time_step
        self._steps += 1
        self._length += 1
        self._return += float(time_step.reward)
        if time_step.is_last() and self._log is not None:
            self._log.append(self._steps, self._return, self._length)
        return time_step


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv, __doc__.split("\n\n")[0])
    hp = config_lib.Hyperparams(**args.hparams)
    tf.random.set_seed(args.seed)
    collect_env = LogsEpisodes(env_loader.load_env(args.env_name, args.seed), episode_log(args))
    eval_env = env_loader.load_env(args.env_name, args.seed + EVAL_SEED_OFFSET)
    loop = make_stock_tutorial_loop(collect_env, args.env_name, hp, args.seed)
    evaluate = make_stock_evaluator(eval_env, loop.agent, loop.train_step, args.num_eval_episodes)
    writer = ResultsWriter(args.results)
    iterations = max(1, int(round(args.utd)))
    env_steps = hp.initial_collect_steps
    try:
        while True:
            since_warm_up = env_steps - hp.initial_collect_steps
            if since_warm_up % args.eval_every == 0 or env_steps == args.env_steps:
                average_return, average_length = evaluate()
                train_step = int(loop.learner.train_step_numpy)
                writer.add(train_step, env_steps, [average_return], [average_length])
            if env_steps >= args.env_steps:
                return 0
            loop.collect.run()
            loop.learner.run(iterations=iterations)
            env_steps += 1
    finally:
        loop.close()


if __name__ == "__main__":
    sys.exit(main())
