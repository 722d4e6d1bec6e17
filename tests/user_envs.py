"""Small user envs for the env loader's tests, named as `user_envs:<factory>`.

Each is what a user might write: Gymnasium envs (one that pins the API's
semantics, Dict observations, and ones SAC cannot train), gym envs, and envs that
fail mid-run.
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


class DictGoalEnv(gymnasium.Env):
    """A point on a line that must reach a goal, observed as a Dict (as a robot's
    several sensors are): {"goal": Box(1), "position": Box(1), "velocity_sign":
    Discrete(3)} and, with `camera=True`, an 8x8 channels-first uint8 "camera" that
    draws the point. Reward: minus the distance to the goal; 20 steps per episode."""

    def __init__(self, camera=False):
        parts = {
            "goal": spaces.Box(-1, 1, (1,), np.float32),
            "position": spaces.Box(-1, 1, (1,), np.float32),
            "velocity_sign": spaces.Discrete(3),
        }
        if camera:
            parts["camera"] = spaces.Box(0, 255, (1, 8, 8), np.uint8)
        self.observation_space = spaces.Dict(parts)
        self.action_space = spaces.Box(-1, 1, (1,), np.float32)
        self.camera = camera

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = float(self.np_random.uniform(-1, 1))
        self.goal = float(self.np_random.uniform(-1, 1))
        self.velocity = 0.0
        return self._observation(), {}

    def step(self, action):
        self.velocity = 0.2 * float(np.clip(action[0], -1, 1))
        self.position = float(np.clip(self.position + self.velocity, -1, 1))
        return self._observation(), -abs(self.position - self.goal), False, False, {}

    def _observation(self):
        observation = {
            "goal": np.array([self.goal], np.float32),
            "position": np.array([self.position], np.float32),
            "velocity_sign": int(np.sign(self.velocity)) + 1,
        }
        if self.camera:
            frame = np.zeros((1, 8, 8), np.uint8)
            frame[0, 4, min(7, int((self.position + 1) * 4))] = 255
            observation["camera"] = frame
        return observation


def make_dict_goal(camera=False, max_episode_steps=20):
    return gymnasium.wrappers.TimeLimit(DictGoalEnv(camera=camera), max_episode_steps)


def make_text_observations():
    env = DictGoalEnv()
    env.observation_space = spaces.Dict(
        {"position": spaces.Box(-1, 1, (1,)), "prompt": spaces.Text(8)}
    )
    return env


class GymDictEnv(gym.Env):
    """A gym (0.23 API) env with Dict observations {"a": Box(2), "b": Discrete(3)}."""

    observation_space = gym.spaces.Dict(
        {"a": gym.spaces.Box(-1, 1, (2,), np.float32), "b": gym.spaces.Discrete(3)}
    )
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def reset(self):
        return {"a": np.zeros(2, np.float32), "b": 2}

    def step(self, action):
        return self.reset(), 0.0, False, {}


def make_gym_dict():
    return gym.wrappers.TimeLimit(GymDictEnv(), 5)
