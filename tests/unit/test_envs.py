"""The env loader: gym, pybullet and Gymnasium ids, a user's factory, Gymnasium's
semantics, and the refusals of envs SAC cannot train."""

import os
import sys

import numpy as np
import pytest
from support.repo import TESTS_DIR

from sac_distributed import config as config_lib
from sac_distributed import run_info
from sac_distributed.envs import loader as env_loader
from sac_distributed.envs import sources as env_sources
from sac_distributed.errors import ConfigError, EnvError

# --- which loader a name picks -------------------------------------------------------


@pytest.mark.parametrize(
    "env_name,kind,env_id",
    [
        ("Pendulum-v1", env_sources.GYM, "Pendulum-v1"),  # both register it: gym's, as before
        ("gym:Pendulum-v1", env_sources.GYM, "Pendulum-v1"),
        ("gymnasium:Pendulum-v1", env_sources.GYMNASIUM, "Pendulum-v1"),
        ("HalfCheetahBulletEnv-v0", env_sources.PYBULLET, "HalfCheetahBulletEnv-v0"),
        ("HalfCheetah-v5", env_sources.GYMNASIUM, "HalfCheetah-v5"),
        ("user_envs:make_counting", env_sources.FACTORY, "make_counting"),
    ],
)
def test_resolve_names_the_loader(env_name, kind, env_id):
    source = env_sources.resolve(env_name)
    assert (source.kind, source.env_id) == (kind, env_id)


def test_a_user_module_records_the_folder_it_came_from():
    source = env_sources.resolve("user_envs:make_counting")
    assert source.module == "user_envs"
    assert source.module_dir == TESTS_DIR
    assert (
        env_sources.resolve("gymnasium:Pendulum-v1").module_dir is None
    )  # installed: nothing to add


@pytest.mark.parametrize(
    "env_name,kind,length",
    [
        ("user_envs:UserCounting-v0", env_sources.GYMNASIUM, 7),
        ("user_envs:UserPendulum-v0", env_sources.GYM, 50),
    ],
)
def test_a_module_that_registers_its_id_is_imported_first(env_name, kind, length):
    source = env_sources.resolve(env_name)
    assert (source.kind, source.module, source.module_dir) == (kind, "user_envs", TESTS_DIR)
    env = env_loader.load_env(env_name, seed=0)
    steps = _episode(env, action=(0.0,) * env.action_spec().shape[0])
    assert len(steps) == length + 1 and steps[-1].discount == 1.0  # the time limit bootstraps


def test_a_misspelt_id_is_refused_with_the_close_one():
    with pytest.raises(
        EnvError, match="Unknown environment 'Pendelum-v1'.*Did you mean Pendulum-v1"
    ):
        env_sources.resolve("Pendelum-v1")


def test_gyms_old_mujoco_ids_name_the_gymnasium_extra():
    source = env_sources.resolve("HalfCheetah-v3")
    with pytest.raises(EnvError, match=r"mujoco_py.*HalfCheetah-v5.*\.\[mujoco\]"):
        env_sources.make_raw_env(source)


def test_a_module_that_registers_no_such_id_is_refused():
    with pytest.raises(EnvError, match="registered no id 'NoSuch-v0'"):
        env_sources.resolve("gymnasium:NoSuch-v0")


# --- Gymnasium's semantics -----------------------------------------------------------


def _episode(env, action=(0.0, 0.0)):
    steps = [env.reset()]
    while not steps[-1].is_last():
        steps.append(env.step(np.array(action, np.float32)))
    return steps


def test_terminated_gives_discount_0_and_truncated_bootstraps():
    terminated = _episode(env_loader.load_env("user_envs:make_counting", 0, {"terminate_at": 3}))
    assert len(terminated) == 4 and terminated[-1].discount == 0.0
    truncated = _episode(
        env_loader.load_env("user_envs:make_counting", 0, {"max_episode_steps": 4})
    )
    assert len(truncated) == 5 and truncated[-1].discount == 1.0
    assert all(step.discount == 1.0 for step in truncated[1:-1] + terminated[1:-1])


def test_seeds_go_through_reset_so_a_seeded_run_repeats():
    def first_observations(seed):
        env = env_loader.load_env("user_envs:make_counting", seed, {"max_episode_steps": 2})
        return [step.observation[1] for _ in range(3) for step in _episode(env)]

    assert first_observations(7) == first_observations(7)
    assert first_observations(7) != first_observations(8)


def test_gymnasium_specs_keep_action_bounds_and_store_float32_observations():
    env = env_loader.load_env("user_envs:make_counting")
    action = env.action_spec()
    assert (float(action.minimum), float(action.maximum)) == (-2.0, 3.0)
    assert env.observation_spec().dtype == np.float32
    assert env.reset().observation.dtype == np.float32
    specs = env_loader.env_specs(env, "counting")
    assert specs.action.shape == (2,)


def test_render_asks_gymnasium_for_rgb_array_frames():
    env = env_loader.load_env("user_envs:make_counting", render=True)
    env.reset()
    assert env.render("rgb_array").shape == (8, 8, 3)


def test_env_kwargs_reach_the_factory_and_bad_ones_are_refused():
    env = env_loader.load_env("user_envs:make_counting", 0, {"terminate_at": 1})
    assert len(_episode(env)) == 2
    with pytest.raises(EnvError, match="Check --env_kwargs"):
        env_sources.check_env_name("Pendulum-v1", '{"no_such_argument": 1}')
    for text, problem in (("{goal: 1}", "is not JSON"), ("[1, 2]", "not an object")):
        with pytest.raises(ConfigError, match=problem):
            config_lib.parse_env_kwargs(text)


def test_a_gym_env_from_a_factory_trains_as_gym_ids_do():
    env = env_loader.load_env("user_envs:make_gym_pendulum", seed=0)
    assert env.observation_spec().shape == (3,)
    assert len(_episode(env)) == 201 and env.current_time_step().discount == 1.0


def test_mujoco_v5_loads_through_gymnasium():
    env = env_loader.load_env("HalfCheetah-v5", seed=0)
    assert env.observation_spec().shape == (17,) and env.action_spec().shape == (6,)
    step = env.step(np.zeros(6, np.float32))
    assert step.observation.dtype == np.float32 and np.isfinite(step.reward)


def test_a_mujoco_video_renders_headless_through_egl():
    env = env_loader.load_env("HalfCheetah-v5", seed=0, render=True)
    env.reset()
    try:
        frame = env.render("rgb_array")
    except Exception as e:  # no EGL library: what the README says to install
        pytest.skip(f"EGL (Debian libegl1, libegl-mesa0) is not usable here: {e}")
    assert frame.shape[-1] == 3 and frame.mean() > 0


# --- refusals ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env_name,says",
    [
        ("user_envs:make_discrete", r"Discrete\(2\) actions: SAC needs continuous actions"),
        ("user_envs:make_multi_discrete", "MultiDiscrete"),
        ("user_envs:make_text_observations", "part 'prompt' is a Text space"),
        ("user_envs:make_unbounded_actions", "unbounded action space"),
        ("user_envs:make_string", "returned a str, not a Gymnasium Env"),
        ("user_envs:make_raises", "raised RuntimeError: the simulator licence server is down"),
        ("user_envs:not_callable", "has no callable 'not_callable'"),
        ("user_envs:no_such_factory", "has no callable 'no_such_factory'"),
        ("no_such_module:make_env", "no module named 'no_such_module'.*PYTHONPATH"),
        ("CartPole-v1", "Discrete"),
    ],
)
def test_envs_sac_cannot_train_are_refused_in_one_line(env_name, says):
    with pytest.raises(EnvError, match=says) as raised:
        env_sources.check_env_name(env_name)
    assert env_name.split(":")[-1] in str(raised.value) or "CartPole" in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "how,says", [("raise", "raised ValueError at step 3: solver diverged"), ("shape", "shape")]
)
def test_a_step_that_fails_mid_run_names_the_env_and_the_step(how, says):
    env = env_loader.load_env("user_envs:make_failing", 0, {"at": 3, "how": how})
    env.reset()
    env.step(np.zeros(2, np.float32))
    env.step(np.zeros(2, np.float32))
    with pytest.raises(EnvError, match=f"user_envs:make_failing .*{says}"):
        env.step(np.zeros(2, np.float32))


def test_recorded_module_dir_lets_another_folder_load_the_env(tmp_path, monkeypatch):
    import json

    (tmp_path / "run_info.json").write_text(json.dumps({"env_module_dir": str(TESTS_DIR)}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        sys, "path", [p for p in sys.path if os.path.abspath(p or ".") != TESTS_DIR]
    )
    monkeypatch.delitem(sys.modules, "user_envs")
    with pytest.raises(EnvError, match="no module named 'user_envs'"):
        env_sources.resolve("user_envs:make_counting")
    source = env_sources.resolve(
        "user_envs:make_counting", env_sources.recorded_module_dirs(str(tmp_path))
    )
    assert source.module_dir == TESTS_DIR


def test_env_kwargs_bind_a_run_as_json_values():
    """Other keyword arguments are another run; spacing and key order are not."""
    hparams = config_lib.Hyperparams()
    info = {"env_name": "Pendulum-v1", "env_kwargs": '{"g": 9.0, "x": [1, 2]}'}
    same = '{ "x": [1,2], "g": 9.0 }'
    assert run_info.differences(info, "Pendulum-v1", hparams, same) == []
    assert run_info.differences(info, "Pendulum-v1", hparams, '{"g": 8.0, "x": [1, 2]}') == [
        'env_kwargs={"g": 9.0, "x": [1, 2]}, you asked {"g": 8.0, "x": [1, 2]}'
    ]
    assert run_info.differences(info, "Pendulum-v1", hparams, "") == [
        'env_kwargs={"g": 9.0, "x": [1, 2]}, you asked {}'
    ]
    # A run recorded before --env_kwargs existed has none.
    assert run_info.differences({"env_name": "Pendulum-v1"}, "Pendulum-v1", hparams, "") == []
