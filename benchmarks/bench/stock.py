"""The stock side: the TF-Agents SAC tutorial's pieces, as the tutorial wires them.

The tutorial (SAC on Minitaur with Actor-Learner API) stores 2-step
trajectories (stride 1) in a Uniform/Fifo table with MinSize(1) on its own
Reverb server, reads them with `ReverbReplayBuffer.as_dataset(num_steps=2)`
prefetching 50 batches, collects with `tf_agents.train.actor.Actor` over
`PyTFEagerPolicy(collect_policy)` and trains with `tf_agents.train.learner.Learner`.
The agent is the same `SacAgent` our learner builds (`agent.make_agent`), so
the comparison isolates the distributed pipeline. compare.py measures these
pieces one at a time; `StockTutorialLoop` is the whole loop, which
time_to_return and peer_stock.py run.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from typing import Callable, Tuple

import reverb
import tensorflow as tf
from tf_agents.agents.sac import sac_agent
from tf_agents.environments import py_environment
from tf_agents.metrics import py_metrics
from tf_agents.policies import greedy_policy, py_tf_eager_policy, random_py_policy
from tf_agents.replay_buffers import reverb_replay_buffer, reverb_utils
from tf_agents.train import actor as tfa_actor
from tf_agents.train import learner as tfa_learner

from sac_distributed.algorithm.sac import update as sac_update
from sac_distributed.config import Hyperparams
from sac_distributed.envs import loader as env_loader
from sac_distributed.envs.specs import EnvSpecs

STOCK_TABLE = "uniform_table"  # the tutorial's table name, on its own server
STOCK_PREFETCH = 50  # the tutorial's .prefetch(50)
SEQUENCE_LENGTH = 2  # the tutorial's items: 2-step trajectories, stride 1
EVAL_SEED_OFFSET = 10_000  # the eval env's seed: the collect env's + this


def stock_table(capacity: int) -> reverb.Table:
    """The tutorial's replay table (no signature, MinSize(1))."""
    return reverb.Table(
        STOCK_TABLE,
        max_size=capacity,
        sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(),
        rate_limiter=reverb.rate_limiters.MinSize(1),
    )


def make_stock_agent(specs: EnvSpecs, hp: Hyperparams) -> Tuple[sac_agent.SacAgent, tf.Variable]:
    """The tutorial's agent (our `agent.make_agent`) and its train_step counter."""
    train_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_step")
    return sac_update.make_agent(specs, hp, train_step), train_step


def stock_buffer(agent: sac_agent.SacAgent, **where) -> reverb_replay_buffer.ReverbReplayBuffer:
    """The tutorial's ReverbReplayBuffer; `where` is local_server= or server_address=."""
    return reverb_replay_buffer.ReverbReplayBuffer(
        agent.collect_data_spec, sequence_length=SEQUENCE_LENGTH, table_name=STOCK_TABLE, **where
    )


def stock_observer(client: reverb.Client) -> reverb_utils.ReverbAddTrajectoryObserver:
    """The tutorial's writer: 2-step items, stride 1, into STOCK_TABLE."""
    return reverb_utils.ReverbAddTrajectoryObserver(
        client, STOCK_TABLE, sequence_length=SEQUENCE_LENGTH, stride_length=1
    )


def stock_dataset(
    buffer: reverb_replay_buffer.ReverbReplayBuffer, batch_size: int
) -> tf.data.Dataset:
    """The tutorial's learner input: batches of 2-step trajectories, prefetched."""
    return buffer.as_dataset(sample_batch_size=batch_size, num_steps=SEQUENCE_LENGTH).prefetch(
        STOCK_PREFETCH
    )


@dataclasses.dataclass
class StockTutorialLoop:
    """The TF-Agents SAC tutorial's pieces, after its random initial collect.

    `collect.run()` steps the env once with the collect policy into the
    tutorial's table; `learner.run(iterations=n)` trains n steps on it.
    """

    agent: sac_agent.SacAgent
    train_step: tf.Variable
    collect: tfa_actor.Actor
    learner: tfa_learner.Learner
    observer: reverb_utils.ReverbAddTrajectoryObserver
    server: reverb.Server
    tmp: str

    def close(self) -> None:
        self.observer.close()
        self.server.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def make_stock_tutorial_loop(
    collect_env: py_environment.PyEnvironment, env_name: str, hp: Hyperparams, seed: int
) -> StockTutorialLoop:
    """Builds the tutorial loop on `collect_env` and runs its random initial collect."""
    agent, train_step = make_stock_agent(env_loader.env_specs(collect_env, env_name), hp)
    server = reverb.Server([stock_table(hp.replay_buffer_capacity)], port=None)
    buffer = stock_buffer(agent, local_server=server)
    observer = stock_observer(buffer.py_client)
    random_policy = random_py_policy.RandomPyPolicy(
        collect_env.time_step_spec(), collect_env.action_spec(), seed=seed
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
    tmp = tempfile.mkdtemp(prefix="sac_bench_stock_")
    learner = tfa_learner.Learner(
        tmp, train_step, agent, lambda: stock_dataset(buffer, hp.batch_size)
    )
    return StockTutorialLoop(agent, train_step, collect, learner, observer, server, tmp)


def make_stock_evaluator(
    env: py_environment.PyEnvironment,
    agent: sac_agent.SacAgent,
    train_step: tf.Variable,
    episodes: int,
) -> Callable[[], Tuple[float, float]]:
    """The tutorial's eval Actor with the greedy policy.

    Returns a function that runs `episodes` episodes and returns their
    average return and average episode length.
    """
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

    def evaluate() -> Tuple[float, float]:
        average_return.reset()
        average_length.reset()
        actor.run()
        return float(average_return.result()), float(average_length.result())

    return evaluate
