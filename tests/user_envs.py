"""Small user envs for the env loader's tests, named as `user_envs:<factory>`.

Each is what a user might write: Gymnasium envs (one that pins the API's
semantics, and ones SAC cannot train), a gym env, and envs that fail mid-run.
"""

import os

import gym
import gymnasium
import numpy as np
from gymnasium import spaces


class CountingEnv(gymnasium.Env):
    """Observation [t, noise]; terminates at `terminate_at`, else truncated by a TimeLimit.

    The noise comes from the env's seeded generator, so seeds show in the observations.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, terminate_at=None, render_mode=None, low=-2.0, high=3.0):
        self.terminate_at = terminate_at
        self.render_mode = render_mode
        self.action_space = spaces.Box(low, high, shape=(2,), dtype=np.float32)
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64)
        self.t = 0
        self.actions = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observation(), {}

    def step(self, action):
        self.actions.append(np.array(action))
        self.t += 1
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        return self._observation(), 1.0, terminated, False, {}

    def render(self):
        return np.zeros((8, 8, 3), np.uint8) if self.render_mode == "rgb_array" else None

    def _observation(self):
        return np.array([self.t, self.np_random.uniform()], dtype=np.float64)


def make_counting(max_episode_steps=5, **kwargs):
    return gymnasium.wrappers.TimeLimit(CountingEnv(**kwargs), max_episode_steps)


def make_discrete():
    return gymnasium.make("CartPole-v1")


def make_multi_discrete():
    env = CountingEnv()
    env.action_space = spaces.MultiDiscrete([3, 3])
    return env


def make_dict_observations():
    env = CountingEnv()
    env.observation_space = spaces.Dict({"a": spaces.Box(-1, 1, (2,)), "b": spaces.Discrete(2)})
    return env


def make_unbounded_actions():
    return CountingEnv(low=-np.inf, high=np.inf)


def make_string():
    return "not an env"


def make_raises():
    raise RuntimeError("the simulator licence server is down")


not_callable = 42


class FailsAtStep(CountingEnv):
    """Raises, or returns a wrong-shaped observation, at its `at`-th step since it was
    made (counted over episodes, as the step in the error message is)."""

    def __init__(self, at=3, how="raise"):
        super().__init__()
        self.at, self.how = at, how
        self.steps_made = 0

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        self.steps_made += 1
        if self.steps_made == self.at and self.how == "raise":
            raise ValueError("solver diverged")
        if self.steps_made == self.at:
            observation = np.zeros(5)
        return observation, reward, terminated, truncated, info


def make_failing(at=3, how="raise"):
    return gymnasium.wrappers.TimeLimit(FailsAtStep(at, how), 100)


def make_gym_pendulum():
    """A gym 0.23 Env from a factory (through TF-Agents' gym wrapper)."""
    return gym.make("Pendulum-v1")


def make_after_first(marker, **kwargs):
    """Makes the env once per `marker` file, then raises: the launcher's check
    passes, the jobs it starts fail (a crash in a job, for the launchers' tests)."""
    if os.path.exists(marker):
        raise RuntimeError("this env can be made only once")
    with open(marker, "w"):
        pass
    return make_counting(**kwargs)


# Ids a user's module registers when imported: `--env_name=user_envs:UserCounting-v0`
# (Gymnasium) and `user_envs:UserPendulum-v0` (gym 0.23), by gym's own module:id rule.
gymnasium.register("UserCounting-v0", entry_point=CountingEnv, max_episode_steps=7)
gym.register(
    "UserPendulum-v0", entry_point="gym.envs.classic_control:PendulumEnv", max_episode_steps=50
)


class ScaledRewardEnv(CountingEnv):
    """CountingEnv paying `reward` per step (the launcher's warnings read its scale)."""

    def __init__(self, reward=1.0, **kwargs):
        super().__init__(**kwargs)
        self.reward = float(reward)

    def step(self, action):
        observation, _, terminated, truncated, info = super().step(action)
        return observation, self.reward, terminated, truncated, info


def make_scaled_reward(reward=1.0, max_episode_steps=None):
    """No time limit where max_episode_steps is None: its episodes never end."""
    env = ScaledRewardEnv(reward=reward)
    if max_episode_steps is None:
        return env
    return gymnasium.wrappers.TimeLimit(env, max_episode_steps)
