"""One actor step of every env: the transitions written, episodes ended and counted.

`EnvSteps` owns an actor's envs between policy calls: given the actions for the
current observations it steps each env, packs the transitions in the replay's
layout (flat rows for vectors, frames for images, replay/frames.py) and hands
them to the actor's writer, keeps each env's episode return and length, and
resets an env whose episode ended. A transition with a non-finite reward or
observation is not written; its episode ends there. ActorLoop (actor_loop.py)
picks the actions and owns weights, servers and stops.
"""

from __future__ import annotations

from typing import List

import numpy as np
from tf_agents.environments import py_environment
from tf_agents.trajectories.time_step import StepType

from sac_distributed import replay
from sac_distributed.envs import pixels
from sac_distributed.jobs.actor_stats import ActorStats, ActorSummaries
from sac_distributed.jobs.actor_writer import ActorWriter


class EnvSteps:
    """Steps `envs` with given actions and writes what they return through `out`."""

    def __init__(
        self,
        envs: List[py_environment.PyEnvironment],
        layout,
        out: ActorWriter,
        stats: ActorStats,
        summaries: ActorSummaries,
        env_name: str,
    ):
        self._envs = envs
        self._layout = layout
        self._frames = isinstance(layout, replay.FrameLayout)
        self._out = out
        self._stats = stats
        self._summaries = summaries
        self._env_name = env_name
        self._return = np.zeros(len(envs))
        self._length = np.zeros(len(envs), dtype=np.int64)

    def reset(self) -> np.ndarray:
        """Every env's first observation, as `step` takes them."""
        return self._observations([env.reset().observation for env in self._envs])

    def step(self, observations: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Steps every env once with its action and writes its transition; returns the
        next observations (an ended episode's env reset: its first observation)."""
        if self._frames:
            return self._step_frames(observations, actions)
        if len(self._envs) == 1:
            return self._step_one(observations, actions)
        return self._step_many(observations, actions)

    def _observations(self, observations: List[np.ndarray]) -> np.ndarray:
        """Observations [num_envs, obs_size] float32 (a copy), as the policy and rows take
        them; images [num_envs, H, W, C] uint8."""
        if self._frames:
            return pixels.stack_camera(observations)
        return np.stack(
            [np.asarray(o, np.float32).reshape(self._layout.observation_size) for o in observations]
        )

    def _step_many(self, observations: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Vector observations, several envs: one row per env, packed together. The next
        observations are the tail of the rows just written, so they cost no copy."""
        steps = [env.step(actions[i]) for i, env in enumerate(self._envs)]
        self._stats.env_steps += len(steps)
        rewards = np.array([t.reward for t in steps], np.float32)
        rows = self._layout.pack(
            observations,
            actions,
            rewards,
            np.array([t.discount for t in steps], np.float32),
            np.stack([t.observation for t in steps]),
        )
        # One reduction per row: a sum is finite iff every element is (barring
        # float32 overflow of values near 1e38, which are as broken as inf).
        finite = np.isfinite(rows.sum(axis=1))
        self._length += 1
        if finite.all():
            self._return += rewards
            self._out.write_rows(rows)
            ended = [i for i, t in enumerate(steps) if t.step_type == StepType.LAST]
        else:
            self._return[finite] += rewards[finite]
            self._out.write_rows(rows, finite)
            self._summaries.non_finite([t.reward for t in steps], finite, self._env_name)
            ended = [
                i for i, t in enumerate(steps) if t.step_type == StepType.LAST or not finite[i]
            ]
        next_observations = self._layout.next_observations(rows)
        if ended:
            next_observations = next_observations.copy()  # rows stay as written
            for i in ended:
                self._end_episode(i)
                next_observations[i] = self._observations([self._envs[i].reset().observation])
        return next_observations

    def _step_one(self, observations: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """`_step_many` for one env, without the per-env lists and stacking."""
        step = self._envs[0].step(actions[0])
        self._stats.env_steps += 1
        row = replay.pack_row(
            observations[0], actions[0], step.reward, step.discount, step.observation
        )
        finite = np.isfinite(np.add.reduce(row))
        self._length += 1
        if finite:
            self._return += self._layout.reward(row)
            self._out.write_row(0, row)
        else:
            self._summaries.non_finite([step.reward], np.zeros(1, bool), self._env_name)
        if step.step_type == StepType.LAST or not finite:
            self._end_episode(0)
            return self._observations([self._envs[0].reset().observation])
        return self._layout.next_observations(row[np.newaxis])

    def _step_frames(self, observations: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Image observations: each env's transition to the frame writer."""
        next_observations = []
        for i, env in enumerate(self._envs):
            step = env.step(actions[i])
            self._stats.env_steps += 1
            self._length[i] += 1
            finite = bool(np.isfinite(step.reward) and np.all(np.isfinite(actions[i])))
            if finite:
                self._return[i] += float(step.reward)
                observation = pixels.camera_at(observations, i)
                self._out.write_step(
                    i, observation, actions[i], step.reward, step.discount, step.observation
                )
            else:
                self._summaries.non_finite([step.reward], np.zeros(1, bool), self._env_name)
            if step.step_type == StepType.LAST or not finite:
                self._end_episode(i)
                next_observations.append(env.reset().observation)
            else:
                next_observations.append(step.observation)
        return pixels.stack_camera(next_observations)

    def _end_episode(self, i: int) -> None:
        self._out.end_episode(i)
        self._summaries.episode(float(self._return[i]), int(self._length[i]))
        self._return[i] = 0.0
        self._length[i] = 0
