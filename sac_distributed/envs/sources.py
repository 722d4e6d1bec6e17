"""Which environment an `--env_name` names, and how it is made: the one env loader.

Every job, tool and launcher resolves `--env_name` here, so a run loads the same
env in every process. Three forms are accepted:

- **A registered id**: `Pendulum-v1`, `HalfCheetahBulletEnv-v0` (gym 0.23,
  pybullet), `HalfCheetah-v5` (Gymnasium). An id that gym 0.23 registers is
  loaded through gym, as every run before Gymnasium support was; any other id
  through Gymnasium. So `Pendulum-v1`, which both register, is gym's: spell it
  `gymnasium:Pendulum-v1` for Gymnasium's (or `gym:Pendulum-v1` to say gym).
- **`module:Id-v0`**: gym's and Gymnasium's own rule: import `module` (which
  registers the id), then make the id; gym's registry is asked first.
- **`package.module:factory`**: a user's own env. `factory(**env_kwargs)` returns
  a Gymnasium `Env`, a gym `Env` or a TF-Agents `PyEnvironment`. Nothing needs
  to be registered. The part after the colon is a Python name, which tells it
  from an id (ids have a `-vN`).

`--env_kwargs` (a JSON object) is passed to the factory or to `make`.

This module imports no TensorFlow (the launcher checks an env name with it
before any process starts); `loader.load_env` wraps what `make_raw_env` returns
as a TF-Agents environment.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.util
import inspect
import os
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from sac_distributed import run_info
from sac_distributed.config import parse_env_kwargs
from sac_distributed.envs import observations
from sac_distributed.errors import ConfigError, EnvError

PYBULLET, GYM, GYMNASIUM, FACTORY = "pybullet", "gym", "gymnasium", "factory"
RUN_INFO_MODULE_DIR = "env_module_dir"  # run_info.json's key for a user module's folder
MUJOCO_EXTRA = "pip install -e '.[mujoco]'"
GYMNASIUM_EXTRA = "pip install -e '.[gymnasium]'"


@dataclasses.dataclass(frozen=True)
class EnvSource:
    """How one `--env_name` is loaded; recorded in a run's run_info.json."""

    env_name: str
    kind: str  # PYBULLET, GYM, GYMNASIUM or FACTORY
    env_id: str  # the registered id, or the factory's name in its module
    module: Optional[str] = None  # imported first (`module:` prefix), if any
    module_dir: Optional[str] = None  # the sys.path entry a user's module came from

    def describe(self) -> str:
        """One line for logs and the launcher's banner."""
        where = f" from {self.module_dir}" if self.module_dir else ""
        if self.kind == FACTORY:
            return f"{self.module}.{self.env_id}(**env_kwargs), a user factory{where}"
        return f"{self.env_id} through {self.kind}{where}"


def resolve(env_name: str, module_dirs: Sequence[str] = ()) -> EnvSource:
    """Which loader `env_name` names; imports a named module, makes no env.

    `module_dirs` are folders tried (appended to sys.path) when a named module
    cannot be imported as it is (a run records the one its module came from),
    then the current folder.
    Raises EnvError naming what is wrong and what to do.
    """
    name = env_name.strip()
    module, _, target = name.rpartition(":")
    if module:
        imported = _import_module(module, env_name, module_dirs)
        module_dir = _user_module_dir(imported, module)
        if _is_python_name(target):
            return EnvSource(env_name, FACTORY, target, module, module_dir)
        kind = _registered_kind(target, prefer=module if module in (GYM, GYMNASIUM) else None)
        if kind is None:
            raise EnvError(
                f"--env_name={env_name}: importing {module!r} registered no id {target!r} "
                f"with gym or Gymnasium.{_close_ids(target)}"
            )
        return EnvSource(env_name, kind, target, module, module_dir)
    if "Bullet" in name and _registered_kind(name) == GYM:
        return EnvSource(env_name, PYBULLET, name)
    kind = _registered_kind(name)
    if kind is None:
        raise EnvError(_unknown_id_message(name))
    return EnvSource(env_name, kind, name)


def make_raw_env(
    source: EnvSource, env_kwargs: Optional[Mapping[str, Any]] = None, render: bool = False
) -> Any:
    """The env as its library makes it: a gym or Gymnasium Env, or a PyEnvironment.

    `render=True` asks Gymnasium envs for `render_mode="rgb_array"` (frames for
    sac-evaluate --video). Raises EnvError for a missing package or a factory
    that fails or returns something else.
    """
    kwargs = dict(env_kwargs or {})
    check_dependencies(source)
    if source.kind == FACTORY:
        if render and _accepts(source, "render_mode"):
            kwargs.setdefault("render_mode", "rgb_array")
        return _call_factory(source, kwargs)
    if source.kind == GYMNASIUM:
        import gymnasium

        if render:
            kwargs.setdefault("render_mode", "rgb_array")
        return _made(source, lambda: gymnasium.make(source.env_id, **kwargs))
    import gym

    if source.kind == PYBULLET:
        import pybullet_envs  # noqa: F401  (registers the Bullet ids)
    return _made(source, lambda: gym.make(source.env_id, **kwargs))


def check_env_name(
    env_name: str, env_kwargs: Optional[str] = None
) -> Tuple[EnvSource, Optional[str], Optional[Tuple[int, ...]]]:
    """Resolves `env_name`, makes the env once and checks SAC can train it.

    The launcher calls this before any process or directory exists, so a wrong
    name, a missing package or an env SAC cannot train is one line and exit 2.
    Returns the source; for observations other than one flat vector (images,
    Dict, Tuple, one-hot parts), the line that says how a run takes them in; and
    for an env observing a camera image (the pixel path, pixels.py) the image's
    (H, W, C), channels last, else None.
    """
    source = resolve(env_name)
    env = make_raw_env(source, parse_env_kwargs(env_kwargs))
    try:
        parts = check_spaces(env, env_name)
        # gym's (pre-Gymnasium) envs reach the loader through gym's own flatten.
        camera = kind_of(env) != GYM or not observations.is_nested(parts or [])
    finally:
        _close_quietly(env)
    if parts is None or observations.is_one_vector(parts):
        return source, None, None
    shape = observations.camera_shape(parts) if camera else None
    return source, observations.describe_parts(parts, camera), shape


def check_spaces(env: Any, env_name: str) -> Optional[List[observations.ObservationPart]]:
    """Raises EnvError unless `env` has a bounded Box action and observations that
    `observations` can read (a Box, or parts that flatten into one vector); returns
    the observation's parts (None for a PyEnvironment, whose specs say it all)."""
    if _is_py_environment(env):
        return None  # specs.env_specs checks a PyEnvironment's array specs
    action, observation = env.action_space, env.observation_space
    if type(action).__name__ != "Box":
        raise EnvError(
            f"{env_name} has {action} actions: SAC needs continuous actions (a Box). "
            "Use an algorithm for discrete actions, or give the env a Box action space."
        )
    import numpy as np

    if not (np.all(np.isfinite(action.low)) and np.all(np.isfinite(action.high))):
        raise EnvError(
            f"{env_name} has an unbounded action space ({action}): SAC squashes actions into "
            "[low, high], so give the Box finite bounds (e.g. Box(-1, 1)) and scale in the env."
        )
    return observations.observation_parts(observation, env_name)  # refuses what cannot be


def recorded_module_dirs(root_dir: Optional[str]) -> Tuple[str, ...]:
    """The folder a run's user env module came from, as its run_info.json records.

    A job restarted elsewhere, or sac-evaluate run from another folder, looks
    there for the module when it is not importable as it is.
    """
    if not root_dir:
        return ()
    try:
        info = run_info.read_run_info(root_dir)
    except ConfigError:  # the job's own run_info check names an unreadable file
        return ()
    folder = (info or {}).get(RUN_INFO_MODULE_DIR)
    return (str(folder),) if folder else ()


def run_info_fields(env_name: str, env_kwargs: str) -> Dict[str, Any]:
    """What run_info.json records of the env, for every later reader."""
    source = resolve(env_name)
    return {
        "env_kwargs": env_kwargs,
        "env_loader": source.kind,
        RUN_INFO_MODULE_DIR: source.module_dir,
    }


def with_pythonpath(environ: Mapping[str, str], module_dir: Optional[str]) -> Dict[str, str]:
    """`environ` with `module_dir` first on PYTHONPATH (unchanged without one)."""
    env = dict(environ)
    if module_dir:
        parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if module_dir not in parts:
            env["PYTHONPATH"] = os.pathsep.join([module_dir, *parts])
    return env


# --- resolution -----------------------------------------------------------------


def _is_python_name(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def _import_module(module: str, env_name: str, module_dirs: Sequence[str]) -> Any:
    if module in (GYM, GYMNASIUM):
        return _import_library(module, env_name)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and not module.startswith(e.name) and e.name != module:
            raise EnvError(
                f"--env_name={env_name}: importing {module!r} failed: it needs {e.name!r}, "
                f"which is not installed (pip install {e.name.split('.')[0]})."
            ) from None
        for folder in (*module_dirs, os.getcwd()):  # a console script's path lacks the cwd
            if folder and folder not in sys.path and os.path.isdir(folder):
                sys.path.append(folder)
                return _import_module(module, env_name, ())
        raise EnvError(
            f"--env_name={env_name}: no module named {module!r} here. Run from the folder "
            "that holds it, or add that folder to PYTHONPATH (PYTHONPATH=/path/to/folder)."
        ) from None
    except EnvError:
        raise
    except Exception as e:  # a user's module can raise anything while importing
        raise EnvError(
            f"--env_name={env_name}: importing {module!r} raised {type(e).__name__}: {e}"
        ) from e


def _import_library(name: str, env_name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise EnvError(
            f"--env_name={env_name} needs {name}, which is not installed: {GYMNASIUM_EXTRA} "
            f"(or {MUJOCO_EXTRA} for the MuJoCo envs)."
        ) from None


def _user_module_dir(module: Any, name: str) -> Optional[str]:
    """The sys.path entry `module` was imported from, unless it is installed."""
    path = getattr(module, "__file__", None)
    if not path or name in (GYM, GYMNASIUM):
        return None
    folder = os.path.dirname(os.path.abspath(path))
    depth = name.count(".") + (1 if os.path.basename(path) == "__init__.py" else 0)
    for _ in range(depth):
        folder = os.path.dirname(folder)
    if "site-packages" in folder.split(os.sep) or "dist-packages" in folder.split(os.sep):
        return None
    return folder


def _registered_kind(env_id: str, prefer: Optional[str] = None) -> Optional[str]:
    for kind in [prefer] if prefer else [GYM, GYMNASIUM]:  # gym first, as before Gymnasium
        if env_id in _registry(kind, bullet="Bullet" in env_id):
            return kind
    return None


def _registry(kind: str, bullet: bool = False) -> Mapping[str, Any]:
    if kind == GYM:
        import gym

        if bullet:
            try:
                import pybullet_envs  # noqa: F401
            except ImportError:
                pass
        return gym.envs.registry.env_specs
    if importlib.util.find_spec("gymnasium") is None:
        return {}
    import gymnasium

    return gymnasium.envs.registry


def _unknown_id_message(env_id: str) -> str:
    hint = ""
    if importlib.util.find_spec("gymnasium") is None:
        hint = f" If it is a Gymnasium id, install Gymnasium: {MUJOCO_EXTRA}."
    return (
        f"Unknown environment {env_id!r}: neither gym 0.23 nor Gymnasium registers it."
        f"{_close_ids(env_id)}{hint} Use an id such as Pendulum-v1, HalfCheetahBulletEnv-v0 "
        "or HalfCheetah-v5, or your own env as --env_name=my_module:make_env."
    )


def _close_ids(env_id: str) -> str:
    known: List[str] = list(_registry(GYM, bullet=True)) + list(_registry(GYMNASIUM))
    close = difflib.get_close_matches(env_id, sorted(set(known)), n=3, cutoff=0.75)
    return f" Did you mean {' or '.join(close)}?" if close else ""


# --- making ---------------------------------------------------------------------


def check_dependencies(source: EnvSource) -> None:
    if source.kind not in (GYM, GYMNASIUM):
        return
    entry = str(getattr(_registry(source.kind).get(source.env_id), "entry_point", ""))
    if source.kind == GYM and entry.startswith("gym.envs.mujoco"):
        if importlib.util.find_spec("mujoco_py") is None:
            raise EnvError(
                f"{source.env_id} is gym 0.23's MuJoCo env, which needs mujoco_py (not "
                f"installable beside this stack). Use Gymnasium's v5 id instead, e.g. "
                f"HalfCheetah-v5, after {MUJOCO_EXTRA}."
            )
    if source.kind == GYMNASIUM and entry.startswith("gymnasium.envs.mujoco"):
        if importlib.util.find_spec("mujoco") is None:
            raise EnvError(f"{source.env_id} needs MuJoCo, which is not installed: {MUJOCO_EXTRA}.")


def _made(source: EnvSource, make: Any) -> Any:
    try:
        return make()
    except TypeError as e:
        raise EnvError(f"{source.env_name}: {e}. Check --env_kwargs.") from e
    except ImportError as e:
        raise EnvError(
            f"{source.env_name} needs a package that is not installed ({e}). For "
            f"Gymnasium's MuJoCo envs: {MUJOCO_EXTRA}."
        ) from e
    except Exception as e:
        if type(e).__name__ == "DependencyNotInstalled":
            raise EnvError(f"{source.env_name}: {e} ({MUJOCO_EXTRA} for MuJoCo).") from e
        raise


def _factory(source: EnvSource) -> Any:
    factory: Any = sys.modules[source.module]
    for part in source.env_id.split("."):
        factory = getattr(factory, part, None)
    return factory


def _accepts(source: EnvSource, name: str) -> bool:
    """Whether the factory takes keyword `name` (or any keyword)."""
    try:
        parameters = inspect.signature(_factory(source)).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind == p.VAR_KEYWORD for p in parameters)


def _call_factory(source: EnvSource, kwargs: Dict[str, Any]) -> Any:
    factory = _factory(source)
    if not callable(factory):
        raise EnvError(
            f"--env_name={source.env_name}: {source.module!r} has no callable "
            f"{source.env_id!r}. Name a function that returns the env."
        )
    try:
        env = factory(**kwargs)
    except Exception as e:
        raise EnvError(
            f"--env_name={source.env_name}: {source.env_id}(**{kwargs}) raised "
            f"{type(e).__name__}: {e}"
        ) from e
    if not (_is_gymnasium_env(env) or _is_gym_env(env) or _is_py_environment(env)):
        raise EnvError(
            f"--env_name={source.env_name}: {source.env_id}() returned a "
            f"{type(env).__name__}, not a Gymnasium Env, a gym Env or a TF-Agents PyEnvironment."
        )
    return env


def _is_gymnasium_env(env: Any) -> bool:
    gymnasium = sys.modules.get("gymnasium")
    return gymnasium is not None and isinstance(env, gymnasium.Env)


def _is_gym_env(env: Any) -> bool:
    gym = sys.modules.get("gym")
    return gym is not None and isinstance(env, gym.Env)


def _is_py_environment(env: Any) -> bool:
    module = sys.modules.get("tf_agents.environments.py_environment")
    return module is not None and isinstance(env, module.PyEnvironment)


def kind_of(env: Any) -> str:
    """GYMNASIUM, GYM or FACTORY (a PyEnvironment) for a made env."""
    if _is_gymnasium_env(env):
        return GYMNASIUM
    if _is_gym_env(env):
        return GYM
    return FACTORY


def _close_quietly(env: Any) -> None:
    try:
        env.close()
    except Exception:  # closing a half-made env is best effort
        pass
