"""Peer (a) of the learning benchmark: the stock TF-Agents SAC tutorial loop.

One process, the Minitaur tutorial's pieces: the same `SacAgent` our learner
builds (agent.make_agent), a `tf_agents.train.actor.Actor` that collects one
step with `PyTFEagerPolicy(collect_policy)`, a `ReverbAddTrajectoryObserver`
(2-step items, stride 1) into the tutorial's Uniform/Fifo table, and a
`tf_agents.train.learner.Learner` run for `--utd` iterations after each step.
It loads the env with `specs.load_env`, so time limits keep discount 1 here
too: the comparison isolates the distributed pipeline, not that fix.
"""

from __future__ import annotations

import sac_distributed  # noqa: F401  (selects tf-keras before TensorFlow is imported)

# isort: split

import sys
import tempfile
from typing import List, Optional

import reverb
import tensorflow as tf
from compare import STOCK_PREFETCH, STOCK_TABLE, stock_table
from peer_common import ResultsWriter, parse_args
from tf_agents.metrics import py_metrics
from tf_agents.policies import greedy_policy, py_tf_eager_policy, random_py_policy
from tf_agents.replay_buffers import reverb_replay_buffer, reverb_utils
from tf_agents.train import actor as tfa_actor
from tf_agents.train import learner as tfa_learner

from sac_distributed import agent as agent_lib
from sac_distributed import config as config_lib
from sac_distributed import specs as specs_lib


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv, __doc__.split("\n\n")[0])
    hp = config_lib.Hyperparams(**args.hparams)
    tf.random.set_seed(args.seed)
    collect_env = specs_lib.load_env(args.env_name, args.seed)
    eval_env = specs_lib.load_env(args.env_name, args.seed + 10_000)
    train_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
    agent = agent_lib.make_agent(specs_lib.env_specs(collect_env, args.env_name), hp, train_step)
    server = reverb.Server([stock_table(hp.replay_buffer_capacity)], port=None)
    buffer = reverb_replay_buffer.ReverbReplayBuffer(
        agent.collect_data_spec, sequence_length=2, table_name=STOCK_TABLE, local_server=server
    )
    observer = reverb_utils.ReverbAddTrajectoryObserver(buffer.py_client, STOCK_TABLE, 2, 1)
    random_policy = random_py_policy.RandomPyPolicy(
        collect_env.time_step_spec(), collect_env.action_spec(), seed=args.seed
    )
    tfa_actor.Actor(
        collect_env,
        random_policy,
        train_step,
        steps_per_run=hp.initial_collect_steps,
        observers=[observer],
    ).run()
    collect = tfa_actor.Actor(
        collect_env,
        py_tf_eager_policy.PyTFEagerPolicy(agent.collect_policy, use_tf_function=True),
        train_step,
        steps_per_run=1,
        observers=[observer],
    )
    learner = tfa_learner.Learner(
        tempfile.mkdtemp(prefix="sac_peer_stock_"),
        train_step,
        agent,
        lambda: buffer.as_dataset(sample_batch_size=hp.batch_size, num_steps=2).prefetch(
            STOCK_PREFETCH
        ),
    )
    evaluate = _evaluator(eval_env, agent, train_step, args.num_eval_episodes)
    writer = ResultsWriter(args.results)
    iterations = max(1, int(round(args.utd)))
    env_steps = hp.initial_collect_steps
    while True:
        if (env_steps - hp.initial_collect_steps) % args.eval_every == 0 or (
            env_steps == args.env_steps
        ):
            writer.add(int(learner.train_step_numpy), env_steps, *evaluate())
        if env_steps >= args.env_steps:
            break
        collect.run()
        learner.run(iterations=iterations)
        env_steps += 1
    observer.close()
    server.stop()
    return 0


def _evaluator(env, agent, train_step: tf.Variable, episodes: int):
    """The tutorial's eval Actor with the greedy policy; () -> ([return], [length])."""
    policy = py_tf_eager_policy.PyTFEagerPolicy(
        greedy_policy.GreedyPolicy(agent.policy), use_tf_function=True
    )
    average_return = py_metrics.AverageReturnMetric(buffer_size=episodes)
    average_length = py_metrics.AverageEpisodeLengthMetric(buffer_size=episodes)
    actor = tfa_actor.Actor(
        env,
        policy,
        train_step,
        episodes_per_run=episodes,
        metrics=[average_return, average_length],
    )

    def evaluate():
        average_return.reset()
        average_length.reset()
        actor.run()
        return [float(average_return.result())], [float(average_length.result())]

    return evaluate


if __name__ == "__main__":
    sys.exit(main())
