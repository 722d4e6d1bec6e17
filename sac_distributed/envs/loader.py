"""The one entry point from an `--env_name` to a checked TF-Agents env: `load_env`.

It makes the env (`sources`), wraps it as a TF-Agents environment (gym and
pybullet ids through TF-Agents' suites, Gymnasium envs through
`gymnasium_env`), checks every step, and computes the env's tensor specs
(`env_specs`, `specs_for`). The replay row layout and the Reverb table
signatures built from these specs live in `replay`; the server builds them from
the environment name and the network sizes alone, so it can start before (or
without) any learner.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf
from tf_agents.environments import py_environment, wrappers
from tf_agents.specs import tensor_spec

from sac_distributed.config import parse_env_kwargs
from sac_distributed.envs import actions, observations, pixels
from sac_distributed.envs import sources as env_sources
from sac_distributed.envs.gymnasium_env import CheckedEnvironment, GymnasiumEnvironment
from sac_distributed.envs.specs import EnvSpecs
from sac_distributed.errors import EnvError


def load_env(
    env_name: str,
    seed: Optional[int] = None,
    env_kwargs: Optional[Mapping[str, Any]] = None,
    render: bool = False,
    module_dirs: Sequence[str] = (),
    frame_stack: int = 1,
    action_repeat: int = 1,
    rescale_actions: bool = False,
) -> py_environment.PyEnvironment:
    """Loads `env_name` (see `sources`: a gym, pybullet or Gymnasium id, or a user's
    `module:factory`) as a seeded TF-Agents environment.

    gym and pybullet ids load through TF-Agents' suites exactly as before
    Gymnasium support; Gymnasium envs through `GymnasiumEnvironment`. Every env
    is wrapped so that a failing step names the env and the step. `render`
    asks Gymnasium envs for rgb_array frames; `module_dirs` are folders to look
    in for a user's module that is not importable as it is (run_info records
    the one a run used). `action_repeat` plays each action that many env steps;
    an env observing one uint8 image gets its last `frame_stack` frames as each
    observation (pixels.py). `rescale_actions` has the env act on [-1, 1] (actions.py;
    an env already on [-1, 1] is left as it is). Raises EnvError with what to do.
    """
    source = env_sources.resolve(env_name, module_dirs)
    kwargs = dict(env_kwargs or {})
    if render:
        os.environ.setdefault("MUJOCO_GL", "egl")  # headless: Mesa's EGL (Debian libegl1)
    if source.kind in (env_sources.PYBULLET, env_sources.GYM):
        env = TruncationKeepsDiscount(_load_gym_id(source, kwargs))
    else:
        env = _wrap(env_sources.make_raw_env(source, kwargs, render=render), env_name)
    if rescale_actions and actions.needs_rescale(env.action_spec()):
        env = actions.UnitActions(env)
    env = _with_pixel_options(env, frame_stack, action_repeat)
    env = CheckedEnvironment(env, env_name)
    if seed is not None:
        env.seed(seed)
    return env


def _with_pixel_options(
    env: py_environment.PyEnvironment, frame_stack: int, action_repeat: int
) -> py_environment.PyEnvironment:
    if action_repeat > 1:
        env = pixels.ActionRepeat(env, action_repeat)
    if pixels.camera_image(env.observation_spec()) is not None:
        env = pixels.FrameStack(env, frame_stack)
    return env


def load_job_env(config: Any, seed: Optional[int] = None) -> py_environment.PyEnvironment:
    """The env of a job config (its env_name and env_kwargs, its hparams' frame stack,
    action repeat and action rescaling; root_dir's run_info says where a user's module
    came from)."""
    return load_env(
        config.env_name,
        seed,
        parse_env_kwargs(config.env_kwargs),
        module_dirs=env_sources.recorded_module_dirs(config.root_dir),
        **env_options(config.hparams),
    )


def env_options(hparams: Any) -> dict:
    """What `load_env` takes from a run's Hyperparams: the frame stack, the action
    repeat and whether actions are rescaled to [-1, 1]."""
    return {
        "frame_stack": hparams.frame_stack,
        "action_repeat": hparams.action_repeat,
        "rescale_actions": hparams.rescale_actions,
    }


def job_env_specs(config: Any) -> EnvSpecs:
    """The specs of a job config's env (loaded once, then closed)."""
    return specs_for(
        config.env_name,
        parse_env_kwargs(config.env_kwargs),
        module_dirs=env_sources.recorded_module_dirs(config.root_dir),
        **env_options(config.hparams),
    )


def _load_gym_id(
    source: env_sources.EnvSource, kwargs: Mapping[str, Any]
) -> py_environment.PyEnvironment:
    try:
        if source.kind == env_sources.PYBULLET:
            from tf_agents.environments import suite_pybullet

            return suite_pybullet.load(source.env_id, gym_kwargs=dict(kwargs))
        from tf_agents.environments import suite_gym

        env_sources.check_dependencies(source)
        return suite_gym.load(source.env_id, gym_kwargs=dict(kwargs))
    except TypeError as e:
        raise EnvError(f"{source.env_name}: {e}. Check --env_kwargs.") from e


def _wrap(env: Any, env_name: str) -> py_environment.PyEnvironment:
    """A made env as a PyEnvironment: Gymnasium's wrapped, gym's through TF-Agents."""
    env_sources.check_spaces(env, env_name)
    kind = env_sources.kind_of(env)
    if kind == env_sources.GYMNASIUM:
        return GymnasiumEnvironment(env, env_name)
    if kind == env_sources.GYM:
        from tf_agents.environments import suite_gym

        if not observations.is_flat_box(env.observation_space):
            import gym

            env = gym.wrappers.FlattenObservation(env)  # gym's own flatten, as Gymnasium's
        return TruncationKeepsDiscount(suite_gym.wrap_env(env))
    return env


class TruncationKeepsDiscount(wrappers.PyEnvironmentBaseWrapper):
    """Gives a time-limit ending discount 1, so that critics bootstrap from it.

    gym's TimeLimit ends an episode with done=True, which TF-Agents' GymWrapper
    turns into discount 0, as if the state were terminal; a critic then learns
    that value runs out at step 200 (Pendulum) or 1000 (pybullet). gym marks
    such endings with info["TimeLimit.truncated"]; true terminations keep 0.
    """

    def _step(self, action):
        time_step = self._env.step(action)
        if time_step.is_last() and _truncated(self._env.get_info()):
            time_step = time_step._replace(discount=np.ones_like(time_step.discount))
        return time_step


def _truncated(info: object) -> bool:
    return isinstance(info, dict) and bool(info.get("TimeLimit.truncated", False))


def env_specs(env: py_environment.PyEnvironment, env_name: str = "") -> EnvSpecs:
    """Tensor specs of `env`, checked to be usable by SAC."""
    obs_spec = env.observation_spec()
    action_spec = env.action_spec()
    camera = pixels.camera_image(obs_spec) is not None  # one image, or it and a state
    if (tf.nest.is_nested(obs_spec) and not camera) or tf.nest.is_nested(action_spec):
        raise EnvError(
            f"{env_name or 'The environment'} has nested observations or actions; "
            "sac_distributed supports one flat Box observation and one Box action: wrap a "
            "Gymnasium env in gymnasium.wrappers.FlattenObservation in a factory "
            "(--env_name=my_module:make_env)."
        )
    if not np.issubdtype(action_spec.dtype, np.floating):
        raise EnvError(
            f"{env_name or 'The environment'} has discrete actions ({action_spec}); "
            "SAC here needs continuous (Box) actions."
        )
    if not actions.is_bounded(action_spec):
        raise EnvError(
            f"{env_name or 'The environment'} has unbounded actions ({action_spec}): SAC "
            "squashes actions into [minimum, maximum], so give the action spec finite bounds."
        )
    return EnvSpecs(
        observation=tensor_spec.from_spec(obs_spec),
        action=tensor_spec.from_spec(action_spec),
        time_step=tensor_spec.from_spec(env.time_step_spec()),
        frame_stack=pixels.frames_per_observation(env),
        cameras=pixels.camera_channels(env),
        env_action=_env_action(env),
    )


def _env_action(env: py_environment.PyEnvironment) -> Any:
    """The env's own action spec where its actions are rescaled (actions.UnitActions,
    found through the wrappers above it), else None."""
    spec = getattr(env, "env_action_spec", None)
    return None if spec is None else tensor_spec.from_spec(spec)


def specs_for(
    env_name: str,
    env_kwargs: Optional[Mapping[str, Any]] = None,
    module_dirs: Sequence[str] = (),
    frame_stack: int = 1,
    action_repeat: int = 1,
    rescale_actions: bool = False,
) -> EnvSpecs:
    """Loads the env once to read its specs, then closes it."""
    env = load_env(
        env_name,
        env_kwargs=env_kwargs,
        module_dirs=module_dirs,
        frame_stack=frame_stack,
        action_repeat=action_repeat,
        rescale_actions=rescale_actions,
    )
    try:
        return env_specs(env, env_name)
    finally:
        env.close()
