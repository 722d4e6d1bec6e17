"""Hybrid peer of the learning benchmark: TF-Agents' SacAgent inside SB3's training loop.

SB3 SAC leads both TF-Agents loops (ours and the stock tutorial loop) early on
Walker2D and Ant, while probe.py update_parity shows that one update is the same in
both libraries. This runner splits the learning from the data: the update is
our `SacAgent` (agent.make_agent, as the learner builds it, trained with its
`_train` as the learner calls it), and everything around it is SB3's loop,
step for step:

  - the env is `gym.make(env_name)`, seeded as the SB3 peer seeds it; an
    episode's end is terminal only when gym's time limit did not cut it
    (SB3's `dones * (1 - timeouts)`), and a cut episode keeps its last
    observation as the next one;
  - the first `initial_collect_steps` actions are uniform in the action space;
    after that, actions are sampled from the current actor (no lag: the NumPy
    policy gets the weights after every update);
  - replay is a flat array of single transitions, sampled uniformly with
    replacement (SB3's `ReplayBuffer.sample`);
  - one env step, then `utd` updates once more than `initial_collect_steps`
    steps have been taken (SB3's `num_timesteps > learning_starts`);
  - evaluation: greedy (tanh of the mean) episodes on a second env seeded
    seed + 10000, at the SB3 peer's marks.

So if this runner learns like SB3, what holds the TF-Agents loops back is in
their data path; if it trails like them, it is in the agent or the policy.
Its own option (`OWN_FLAGS`, which learning.py's --variants may set) brings back
one trait of our distributed loop: `--policy_lag` (our actors act with weights
up to 1000 pulls old, and may run ahead of the learner by the rate limiter's
error buffer).
"""

from __future__ import annotations

import sac_distributed  # noqa: F401  (selects tf-keras before TensorFlow is imported)

# isort: split

import argparse
import os
import sys
from typing import List, Optional, Tuple

import numpy as np
import tensorflow as tf

if __package__ in (None, ""):  # run as a file: the repo root, so that `benchmarks` imports
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from tf_agents.trajectories import policy_step, trajectory  # noqa: E402
from tf_agents.trajectories import time_step as ts  # noqa: E402

from benchmarks.peer_common import ResultsWriter, episode_log, parse_args  # noqa: E402
from sac_distributed import config as config_lib  # noqa: E402
from sac_distributed.algorithm import policy as policy_lib  # noqa: E402
from sac_distributed.algorithm.sac import learner as sac_learner  # noqa: E402
from sac_distributed.algorithm.sac import update as sac_update  # noqa: E402
from sac_distributed.envs import loader as env_loader  # noqa: E402

EVAL_SEED_OFFSET = 10_000  # as the SB3 peer seeds its eval env
# This runner's own options: the flags a learning.py variant may give it besides
# hyperparameters.
OWN_FLAGS = ("policy_lag",)


def add_own_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--policy_lag",
        type=int,
        default=1,
        help="env steps between refreshes of the acting policy's weights (SB3: 1)",
    )


class GymEnv:
    """`gym.make(env_name)` as the SB3 peer wraps it: float32 observations, and
    (terminated, truncated) apart, from gym's TimeLimit.truncated flag."""

    def __init__(self, env_name: str, seed: int):
        import gym

        if "Bullet" in env_name:
            import pybullet_envs  # noqa: F401  (registers the pybullet ids with gym)
        self.env = gym.make(env_name)
        self.env.seed(seed)

    def reset(self) -> np.ndarray:
        return np.asarray(self.env.reset(), np.float32)

    def step(self, action: np.ndarray) -> Tuple[np.ndarray, float, bool, bool]:
        obs, reward, done, info = self.env.step(action)
        truncated = bool(info.get("TimeLimit.truncated", False))
        return np.asarray(obs, np.float32), float(reward), done and not truncated, truncated


class UniformReplay:
    """One-step transitions in flat arrays, sampled uniformly with replacement."""

    def __init__(self, capacity: int, obs_dim: int, action_dim: int, seed: int):
        self.observations = np.zeros((capacity, obs_dim), np.float32)
        self.next_observations = np.zeros((capacity, obs_dim), np.float32)
        self.actions = np.zeros((capacity, action_dim), np.float32)
        self.rewards = np.zeros(capacity, np.float32)
        self.dones = np.zeros(capacity, np.float32)
        self.capacity, self.size, self._next = capacity, 0, 0
        self._rng = np.random.default_rng(seed)

    def add(self, obs, action, reward: float, next_obs, terminated: bool) -> None:
        i = self._next
        self.observations[i], self.actions[i], self.rewards[i] = obs, action, reward
        self.next_observations[i], self.dones[i] = next_obs, float(terminated)
        self._next = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size: int) -> Tuple[np.ndarray, ...]:
        idx = self._rng.integers(0, self.size, size=batch_size)
        return (
            self.observations[idx],
            self.actions[idx],
            self.rewards[idx],
            self.dones[idx],
            self.next_observations[idx],
        )


class Collection:
    """Steps the training env with the acting policy into the replay, one step at a
    time, and logs each finished episode."""

    def __init__(self, env: GymEnv, policy, replay: UniformReplay, episodes):
        self._env, self._policy, self._replay, self._episodes = env, policy, replay, episodes
        self._obs, self._return, self._length = env.reset(), 0.0, 0

    def step(self, steps: int, random: bool) -> None:
        """Env step number `steps`; `random`: a uniform action (the warm-up)."""
        if random:
            action = self._policy.random_action(1)[0]
        else:
            action = self._policy.action(self._obs[None])[0]
        next_obs, reward, terminated, truncated = self._env.step(action)
        self._replay.add(self._obs, action, reward, next_obs, terminated)
        self._return, self._length = self._return + reward, self._length + 1
        self._obs = next_obs
        if terminated or truncated:
            if self._episodes is not None:
                self._episodes.append(steps, self._return, self._length)
            self._obs, self._return, self._length = self._env.reset(), 0.0, 0


def as_transition(obs, action, reward, done, next_obs) -> trajectory.Transition:
    """A batch of one-step transitions as SacAgent trains on them: discount 0 at a
    terminal step, 1 otherwise (a time-limit cut bootstraps)."""
    n = tf.shape(obs)[0]
    first = ts.TimeStep(tf.fill([n], ts.StepType.MID), tf.zeros([n]), tf.ones([n]), obs)
    step_type = tf.where(done > 0, ts.StepType.LAST, ts.StepType.MID)
    second = ts.TimeStep(step_type, reward, 1.0 - done, next_obs)
    return trajectory.Transition(first, policy_step.PolicyStep(action, (), ()), second)


def make_update(agent, obs_dim: int, action_dim: int):
    """One SacAgent update on a batch of arrays, traced once."""
    vec = lambda d: tf.TensorSpec([None, d], tf.float32)  # noqa: E731
    one = tf.TensorSpec([None], tf.float32)

    @tf.function(
        input_signature=[vec(obs_dim), vec(action_dim), one, one, vec(obs_dim)], autograph=False
    )
    def update(obs, action, reward, done, next_obs):
        info = agent._train(as_transition(obs, action, reward, done, next_obs), weights=None)  # noqa: SLF001
        return info.loss

    return update


def evaluate(policy: policy_lib.NumpyActorPolicy, env: GymEnv, episodes: int):
    """Greedy returns and lengths of `episodes` full episodes."""
    returns: List[float] = []
    lengths: List[float] = []
    for _ in range(episodes):
        obs, total, length, done = env.reset(), 0.0, 0, False
        while not done:
            action = policy.action(obs[None], greedy=True)[0]
            obs, reward, terminated, truncated = env.step(action)
            total += reward
            length += 1
            done = terminated or truncated
        returns.append(total)
        lengths.append(length)
    return returns, lengths


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv, __doc__.split("\n\n")[0], add_own_arguments)
    if args.policy_lag < 1:
        raise SystemExit(f"--policy_lag must be >= 1 env step, got {args.policy_lag}.")
    hp = config_lib.Hyperparams(**args.hparams)
    tf.random.set_seed(args.seed)
    env = GymEnv(args.env_name, args.seed)
    eval_env = GymEnv(args.env_name, args.seed + EVAL_SEED_OFFSET)
    specs = env_loader.specs_for(args.env_name)
    agent = sac_update.make_agent(specs, hp)
    obs_dim = int(np.prod(specs.observation.shape))
    action_dim = int(np.prod(specs.action.shape))
    update = make_update(agent, obs_dim, action_dim)
    actor_variables = sac_learner.policy_variables(agent)

    def numpy_policy():
        return policy_lib.NumpyActorPolicy(
            specs.action.minimum,
            specs.action.maximum,
            (action_dim,),
            seed=args.seed,
            log_std_range=hp.policy_log_std_range,
        )

    policy, greedy = numpy_policy(), numpy_policy()  # acting (maybe lagged), evaluated (current)
    policy_lib.limit_blas_threads(1)  # batch-1 calls, as in our actor and evaluator
    capacity = min(hp.replay_buffer_capacity, args.env_steps)
    replay = UniformReplay(capacity, obs_dim, action_dim, args.seed)
    writer, episodes = ResultsWriter(args.results), episode_log(args)
    start, updates = hp.initial_collect_steps, max(1, int(round(args.utd)))
    collection = Collection(env, policy, replay, episodes)
    trained = 0
    for steps in range(1, args.env_steps + 1):
        collection.step(steps, random=steps <= start)
        if steps > start:
            for _ in range(updates):
                update(*(tf.constant(x) for x in replay.sample(hp.batch_size)))
                trained += 1
            if (steps - start) % args.policy_lag == 0:
                policy.set_weights([v.numpy() for v in actor_variables])
        if steps == start:  # the untrained actor: what acts (and is evaluated) first
            policy.set_weights([v.numpy() for v in actor_variables])
        if (steps >= start and (steps - start) % args.eval_every == 0) or steps == args.env_steps:
            greedy.set_weights([v.numpy() for v in actor_variables])
            returns, lengths = evaluate(greedy, eval_env, args.num_eval_episodes)
            writer.add(trained, steps, returns, lengths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
