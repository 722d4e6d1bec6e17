"""Random experience in both sides' formats, and writing it to a replay table.

The replay pieces are measured on the same stored env steps: one list of
(time_step, action, next_time_step) triples from uniform random actions,
turned into the trajectories the stock PyDriver hands its observer and into
the rows our ActorLoop writes. A server's insert count is read server-side,
so a rate includes everything up to the server's acknowledgement.
"""

from __future__ import annotations

from typing import Iterable, List, Tuple

import numpy as np
import reverb
from tf_agents.policies import random_py_policy
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts

from sac_distributed import replay
from sac_distributed.algorithm.sac import networks as sac_networks
from sac_distributed.config import Hyperparams
from sac_distributed.envs import loader as env_loader
from sac_distributed.envs.specs import EnvSpecs

RandomStep = Tuple[ts.TimeStep, np.ndarray, ts.TimeStep]


def collect_random_steps(env_name: str, count: int, seed: int) -> List[RandomStep]:
    """`count` (time_step, action, next_time_step) triples from uniform random actions.

    The env auto-resets as under the stock PyDriver: the step after a LAST
    step is a boundary (LAST -> FIRST) whose action is ignored.
    """
    env = env_loader.load_env(env_name, seed)
    policy = random_py_policy.RandomPyPolicy(env.time_step_spec(), env.action_spec(), seed=seed)
    steps: List[RandomStep] = []
    time_step = env.reset()
    while len(steps) < count:
        action = policy.action(time_step).action
        next_time_step = env.step(action)
        steps.append((time_step, action, next_time_step))
        time_step = next_time_step
    env.close()
    return steps


def to_stock_trajectory(step: RandomStep) -> trajectory.Trajectory:
    """What the stock PyDriver hands its observers for this step."""
    time_step, action, next_time_step = step
    return trajectory.from_transition(
        time_step, policy_step.PolicyStep(action, (), ()), next_time_step
    )


def to_our_row(step: RandomStep) -> np.ndarray:
    """The replay row ActorLoop writes for this step (it never steps from a LAST step)."""
    time_step, action, next_time_step = step
    return replay.pack_transition(
        {
            replay.OBSERVATION: time_step.observation,
            replay.ACTION: action,
            replay.REWARD: next_time_step.reward,
            replay.DISCOUNT: next_time_step.discount,
            replay.NEXT_OBSERVATION: next_time_step.observation,
        }
    )


def initial_policy_weights(specs: EnvSpecs, hparams: Hyperparams) -> List[np.ndarray]:
    """Freshly initialised actor-network weights, in the variable container's order."""
    network = sac_networks.make_actor_network(specs, hparams)
    network.create_variables()
    return [v.numpy() for v in network.variables]


def transition_payload_bytes(specs: EnvSpecs) -> int:
    """Raw bytes of one (s, a, r, discount, s') transition, before any overhead."""
    obs = int(np.prod(specs.observation.shape)) * specs.observation.dtype.size
    act = int(np.prod(specs.action.shape)) * specs.action.dtype.size
    return 2 * obs + act + 2 * 4


def inserted_items(client: reverb.Client, table: str) -> int:
    """Items the server has accepted into `table` since it started."""
    info = client.server_info(timeout=10)[table]
    return int(info.rate_limiter_info.insert_stats.completed)


def write_rows(writer: replay.TransitionWriter, rows: Iterable[np.ndarray]) -> None:
    """Writes and throttles as ActorLoop does, then flushes."""
    for row in rows:
        writer.write_row(row)
        while not writer.throttle():
            pass
    writer.flush()
