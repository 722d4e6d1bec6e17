"""Evaluate an exported policy: return statistics over N episodes, optional video.

Loads any SavedModel the learner exported (root_dir/policies/greedy_policy,
.../policy, .../collect_policy) with TF-Agents' `SavedModelPyTFEagerPolicy`,
so it checks exactly what a deployment would load. Frames come from the
environment's `render("rgb_array")`: pybullet renders offscreen, and gym's
classic-control envs (Pendulum-v1) need pygame, which runs here with SDL's
dummy video driver so that no window (or display) is needed.

The environment name is not stored in a SavedModel. It is taken from the
caller or, failing that, from the `run_info.json` that the learner writes to
root_dir ({"env_name": ..., "hparams": ...}), looked up in the policy directory
and its two parents (policies/<name> -> policies -> root_dir). Either way the
environment's specs are checked against the policy's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
from typing import TYPE_CHECKING, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
from absl import logging

from sac_distributed.config import parse_env_kwargs
from sac_distributed.envs import sources as env_sources
from sac_distributed.envs.observations import STATE
from sac_distributed.errors import ConfigError, EnvError
from sac_distributed.paths import POLICIES_DIR, RUN_INFO_FILE

if TYPE_CHECKING:  # TensorFlow loads when a policy or env does, not at import (--help)
    from tf_agents.environments import py_environment
    from tf_agents.policies import py_policy

DEFAULT_POLICY = "greedy_policy"
VIDEO_SUFFIXES = (".mp4", ".gif")
SAVED_MODEL_FILE = "saved_model.pb"

FrameSink = Callable[[np.ndarray], None]


TERMINATED = "terminated"  # the env ended the episode (discount 0: a terminal state)
TIME_LIMIT = "time limit"  # cut off by the time limit (discount 1: not terminal)


@dataclasses.dataclass(frozen=True)
class EpisodeStats:
    """Undiscounted returns and lengths of whole episodes.

    `endings` (TERMINATED or TIME_LIMIT) and `last_observations` (the
    observation the episode ended in) say how and where each episode ended:
    where a policy fails (a cart at the end of its rail, a walker fallen) is
    often plainer than its return.
    """

    returns: Tuple[float, ...]
    lengths: Tuple[int, ...]
    endings: Tuple[str, ...] = ()
    last_observations: Tuple[Tuple[float, ...], ...] = ()

    @property
    def num_episodes(self) -> int:
        return len(self.returns)

    def summary(self) -> str:
        """One line: return mean/std/min/max and episode length mean/min/max."""
        r, n = np.asarray(self.returns), np.asarray(self.lengths)
        return (
            f"{self.num_episodes} episodes: return mean {r.mean():.2f} std {r.std():.2f} "
            f"min {r.min():.2f} max {r.max():.2f}; "
            f"length mean {n.mean():.1f} min {n.min()} max {n.max()}"
        )


@dataclasses.dataclass(frozen=True)
class EvaluationReport:
    """What `evaluate` did: the statistics and the video it wrote, if any."""

    policy_dir: str
    env_name: str
    stats: EpisodeStats
    video_path: Optional[str] = None
    video_frames: int = 0


def resolve_policy_dir(path: str) -> str:
    """`path` if it holds a SavedModel, else its greedy_policy (or policies/greedy_policy).

    Raises ConfigError naming what was looked for when none exists.
    """
    candidates = [
        path,
        os.path.join(path, DEFAULT_POLICY),
        os.path.join(path, POLICIES_DIR, DEFAULT_POLICY),
    ]
    for candidate in candidates:
        if os.path.isfile(os.path.join(candidate, SAVED_MODEL_FILE)):
            return candidate
    raise ConfigError(
        f"No exported policy at {path!r}: looked for {SAVED_MODEL_FILE} in "
        f"{', '.join(candidates)}. Pass a directory the learner exported, such as "
        f"root_dir/{POLICIES_DIR}/{DEFAULT_POLICY}."
    )


def find_env_name(policy_dir: str) -> Optional[str]:
    """The env_name of the nearest run_info.json in `policy_dir` or its two parents."""
    found = find_run_env(policy_dir)
    return found[0] if found else None


def find_run_env(policy_dir: str) -> Optional[Tuple[str, str, Optional[str]]]:
    """(env_name, env_kwargs, root_dir) of the nearest run_info.json naming an env
    in `policy_dir` or its two parents."""
    directory = os.path.abspath(policy_dir)
    for _ in range(3):
        path = os.path.join(directory, RUN_INFO_FILE)
        if os.path.isfile(path):
            try:
                with open(path) as f:
                    info = json.load(f)
                env_name, env_kwargs = info.get("env_name"), info.get("env_kwargs") or ""
            except (OSError, ValueError, AttributeError) as e:
                raise ConfigError(f"Cannot read {path}: {e}") from e
            if env_name:
                return str(env_name), str(env_kwargs), directory
        directory = os.path.dirname(directory)
    return None


def run_env(
    policy_dir: str, env_name: Optional[str] = None, env_kwargs: Optional[str] = None
) -> Tuple[str, Callable[..., py_environment.PyEnvironment]]:
    """(env_name, a loader of that env) for a policy in `policy_dir`: the env and its
    kwargs the run recorded (`find_run_env`) unless `env_name` names one, loaded from
    where a user's module came from. The loader takes `seed` and `render`."""
    found = find_run_env(policy_dir)
    if not env_name and found:
        env_name, env_kwargs = found[0], env_kwargs if env_kwargs is not None else found[1]
    _require(
        bool(env_name),
        f"--env_name is required: {policy_dir} (and its two parent directories) has no "
        f"{RUN_INFO_FILE} naming the environment the policy was trained on.",
    )
    module_dirs = env_sources.recorded_module_dirs(found[2] if found else None)
    options = recorded_pixel_options(found[2] if found else None)

    def load(seed: Optional[int] = None, render: bool = False) -> py_environment.PyEnvironment:
        from sac_distributed.envs import loader as env_loader

        kwargs = parse_env_kwargs(env_kwargs)
        return env_loader.load_env(
            env_name, seed, kwargs, render=render, module_dirs=module_dirs, **options
        )

    return env_name, load


def recorded_pixel_options(root_dir: Optional[str]) -> Dict[str, int]:
    """The frame stack and action repeat a run trained with (its run_info's hparams),
    so a camera policy sees the stacked frames it was trained on; 1 where none."""
    options = {"frame_stack": 1, "action_repeat": 1}
    path = os.path.join(root_dir, RUN_INFO_FILE) if root_dir else ""
    if not path or not os.path.isfile(path):
        return options
    try:
        with open(path) as f:
            hparams = json.load(f).get("hparams") or {}
    except (OSError, ValueError, AttributeError):
        return options
    for name in options:
        if isinstance(hparams.get(name), int):
            options[name] = hparams[name]
    return options


def load_policy(policy_dir: str) -> py_policy.PyPolicy:
    """The SavedModel in `policy_dir` as a Python policy (specs from policy_specs.pbtxt)."""
    from tf_agents.policies import py_tf_eager_policy

    return py_tf_eager_policy.SavedModelPyTFEagerPolicy(policy_dir, load_specs_from_pbtxt=True)


def check_specs(policy: py_policy.PyPolicy, env: py_environment.PyEnvironment, env_name: str):
    """Raises EnvError when the policy was not trained on an env with these specs."""
    pairs = (
        ("observation", policy.time_step_spec.observation, env.observation_spec()),
        ("action", policy.action_spec, env.action_spec()),
    )
    for what, policy_spec, env_spec in pairs:
        if _spec_text(policy_spec) != _spec_text(env_spec):
            raise EnvError(
                f"The policy's {what} spec does not match {env_name}'s:\n"
                f"  policy: {_spec_text(policy_spec)}\n"
                f"  {env_name}: {_spec_text(env_spec)}\n"
                "Pass the --env_name the policy was trained on."
            )


def _spec_text(spec) -> str:
    """'shape (3,) float32', or for a dict of specs each key's."""
    if isinstance(spec, dict):
        return ", ".join(f"{key}: {_spec_text(spec[key])}" for key in sorted(spec))
    return f"shape {tuple(spec.shape)} {np.dtype(spec.dtype)}"


def render_frame(env: py_environment.PyEnvironment) -> np.ndarray:
    """One RGB frame [H, W, 3] uint8 of `env`, rendered offscreen."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame (gym classic control)
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    try:
        frame = env.render("rgb_array")
    except Exception as e:  # gym raises DependencyNotInstalled, pygame.error, ...
        raise EnvError(
            f"The environment cannot render rgb_array frames ({type(e).__name__}: {e}). "
            "gym's classic-control envs need pygame: pip install 'sac_distributed[tools]'."
        ) from e
    if frame is None:
        raise EnvError("The environment's render('rgb_array') returned no frame.")
    return np.asarray(frame, dtype=np.uint8)


def run_episodes(
    env: py_environment.PyEnvironment,
    policy: py_policy.PyPolicy,
    num_episodes: int,
    on_frame: Optional[FrameSink] = None,
    frame_every: int = 1,
) -> EpisodeStats:
    """Runs whole episodes; with `on_frame`, passes it every `frame_every`-th frame.

    Frame i of an episode is the one after step i (frame 0: after the reset),
    so an episode of L steps yields floor(L / frame_every) + 1 frames.
    """
    returns: List[float] = []
    lengths: List[int] = []
    endings: List[str] = []
    last_observations: List[Tuple[float, ...]] = []
    for _ in range(num_episodes):
        time_step = env.reset()
        state = policy.get_initial_state(batch_size=None)
        total, length = 0.0, 0
        if on_frame is not None:
            on_frame(render_frame(env))
        while not time_step.is_last():
            step = policy.action(time_step, state)
            state = step.state
            time_step = env.step(step.action)
            total += float(time_step.reward)
            length += 1
            if on_frame is not None and length % frame_every == 0:
                on_frame(render_frame(env))
        returns.append(total)
        lengths.append(length)
        endings.append(TERMINATED if float(time_step.discount) == 0.0 else TIME_LIMIT)
        last_observations.append(_flat_floats(time_step.observation))
        logging.info("Episode %d: %s", len(returns), describe_episode(returns[-1], length))
    return EpisodeStats(tuple(returns), tuple(lengths), tuple(endings), tuple(last_observations))


def describe_episode(
    ret: float, length: int, ending: Optional[str] = None, last_observation=None
) -> str:
    """`return R, length L[, ENDING][; last observation [...]]` for one episode."""
    text = f"return {ret:.2f}, length {length}"
    if ending:
        text += f", {ending}"
    if last_observation:
        text += f"; last observation [{', '.join(f'{v:.3g}' for v in last_observation)}]"
    return text


def _flat_floats(observation) -> Tuple[float, ...]:
    """The observation's numbers, for the episode line; of a camera, its state alone
    (the image has thousands)."""
    if isinstance(observation, dict):
        observation = observation.get(STATE, ())
    values = np.asarray(observation)
    if values.ndim == 3 and values.dtype == np.uint8:
        return ()
    return tuple(float(v) for v in values.astype(np.float64).ravel())


def check_video_path(path: str) -> None:
    """Raises ConfigError unless `path` ends in a suffix `video_writer` can write."""
    if os.path.splitext(path)[1].lower() not in VIDEO_SUFFIXES:
        raise ConfigError(
            f"--video={path!r}: the file name must end in {' or '.join(VIDEO_SUFFIXES)}."
        )


@contextlib.contextmanager
def video_writer(path: str, fps: float) -> Iterator[FrameSink]:
    """Yields a function that appends RGB frames to an .mp4 (ffmpeg) or .gif file.

    A GIF is written when the writer closes, so its frames stay in memory until
    then; prefer .mp4 for long episodes or large frames.
    """
    check_video_path(path)
    try:
        import imageio
    except ImportError as e:
        raise ConfigError(
            "Writing a video needs imageio (and imageio-ffmpeg for .mp4): "
            "pip install 'sac_distributed[tools]'."
        ) from e
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if path.lower().endswith(".gif"):
        writer = imageio.get_writer(path, mode="I", duration=1000.0 / fps, loop=0)
    else:
        # Sizes only need to be even (yuv420p), not multiples of 16: no resizing.
        writer = imageio.get_writer(path, fps=fps, macro_block_size=2)
    try:
        yield writer.append_data
    finally:
        writer.close()


def evaluate(
    policy_dir: str,
    num_episodes: int,
    env_name: Optional[str] = None,
    video_path: Optional[str] = None,
    seed: Optional[int] = None,
    fps: float = 30.0,
    frame_every: int = 1,
    env_kwargs: Optional[str] = None,
) -> EvaluationReport:
    """Runs `num_episodes` of the policy in `policy_dir`; optionally records a video.

    `policy_dir` may also be a root_dir or its policies/ directory (greedy_policy
    is used then). `env_name` None means: read it, and `env_kwargs`, from
    run_info.json (see the module docstring), which also says where a user's
    env module came from. `seed` seeds the environment and TensorFlow's sampling.
    """
    _require(num_episodes > 0, f"num_episodes must be > 0, got {num_episodes}.")
    _require(frame_every > 0, f"frame_every must be > 0, got {frame_every}.")
    _require(fps > 0 and math.isfinite(fps), f"fps must be a number > 0, got {fps}.")
    if video_path:
        check_video_path(video_path)
    policy_dir = resolve_policy_dir(policy_dir)
    env_name, load_env = run_env(policy_dir, env_name, env_kwargs)
    if seed is not None:
        import tensorflow as tf

        tf.random.set_seed(seed)
    policy = load_policy(policy_dir)
    env = load_env(seed, render=bool(video_path))
    try:
        check_specs(policy, env, env_name)
        if not video_path:
            stats = run_episodes(env, policy, num_episodes)
            return EvaluationReport(policy_dir, env_name, stats)
        frames = 0
        with video_writer(video_path, fps) as write:

            def sink(frame: np.ndarray) -> None:
                nonlocal frames
                write(frame)
                frames += 1

            stats = run_episodes(env, policy, num_episodes, sink, frame_every)
        return EvaluationReport(policy_dir, env_name, stats, video_path, frames)
    finally:
        env.close()


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)
