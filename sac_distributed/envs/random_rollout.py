"""A short rollout of uniformly random actions: what an env's rewards and episodes look
like before any training, for the launcher's warnings on an env without a preset
(`config.untuned_warnings` reads the numbers; this module only measures).

It drives the env as its library made it (Gymnasium, gym or a TF-Agents
PyEnvironment), without TensorFlow, so that the launcher stays light.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Mapping, Optional, Tuple

import numpy as np

from sac_distributed.envs import sources as env_sources


@dataclasses.dataclass(frozen=True)
class RandomRollout:
    """What `random_rollout` saw."""

    steps: int  # env steps taken
    episodes_ended: int  # episodes that ended (terminated or truncated) within them
    longest_episode: int  # env steps of the longest episode seen, the unfinished one too
    mean_abs_reward: float  # mean |reward| per step
    max_abs_reward: float
    nonzero_rewards: int  # steps whose reward was not 0


def rollout_of(
    env_name: str, env_kwargs: Optional[Mapping[str, Any]] = None, **limits: Any
) -> RandomRollout:
    """Makes `env_name` (as `sources` does), rolls it out at random, closes it."""
    env = env_sources.make_raw_env(env_sources.resolve(env_name), env_kwargs)
    try:
        return random_rollout(env, **limits)
    finally:
        close = getattr(env, "close", None)
        if close is not None:
            close()


def random_rollout(
    env: Any, max_steps: int = 5000, max_seconds: float = 5.0, seed: Optional[int] = 0
) -> RandomRollout:
    """Steps `env` with uniform random actions in its action bounds, up to `max_steps`
    env steps or `max_seconds`, whichever comes first (a slow or rendered env is not
    held up), from a fresh reset."""
    driver = _Driver(env, seed)
    deadline = time.monotonic() + max_seconds
    rewards, ended, longest, length = [], 0, 0, 0
    driver.reset()
    while len(rewards) < max_steps and time.monotonic() < deadline:
        reward, last = driver.step()
        rewards.append(reward)
        length += 1
        longest = max(longest, length)
        if last:
            ended, length = ended + 1, 0
            driver.reset()
    magnitudes = np.abs(np.asarray(rewards, dtype=np.float64))
    return RandomRollout(
        steps=len(rewards),
        episodes_ended=ended,
        longest_episode=longest,
        mean_abs_reward=float(magnitudes.mean()) if rewards else 0.0,
        max_abs_reward=float(magnitudes.max()) if rewards else 0.0,
        nonzero_rewards=int(np.count_nonzero(magnitudes)),
    )


class _Driver:
    """reset() and step() -> (reward, episode over) for each library's API."""

    def __init__(self, env: Any, seed: Optional[int]):
        self._env, self._seed = env, seed
        self._kind = env_sources.kind_of(env)
        if self._kind == env_sources.FACTORY:  # a PyEnvironment
            spec = env.action_spec()
            low, high, shape, dtype = spec.minimum, spec.maximum, spec.shape, spec.dtype
        else:
            space = env.action_space
            low, high, shape, dtype = space.low, space.high, space.shape, space.dtype
        self._low = np.broadcast_to(low, shape).astype(np.float64)
        self._high = np.broadcast_to(high, shape).astype(np.float64)
        self._dtype = dtype
        self._rng = np.random.default_rng(seed)

    def reset(self) -> None:
        if self._kind == env_sources.GYMNASIUM:
            self._env.reset(seed=self._seed)
            self._seed = None  # seeded once; later resets continue its generator
        else:
            self._env.reset()

    def step(self) -> Tuple[float, bool]:
        action = self._rng.uniform(self._low, self._high).astype(self._dtype)
        if self._kind == env_sources.FACTORY:  # a PyEnvironment
            time_step = self._env.step(action)
            return float(np.sum(time_step.reward)), bool(time_step.is_last())
        out = self._env.step(action)
        if len(out) == 5:  # Gymnasium: obs, reward, terminated, truncated, info
            return float(out[1]), bool(out[2] or out[3])
        return float(out[1]), bool(out[2])  # gym: obs, reward, done, info
