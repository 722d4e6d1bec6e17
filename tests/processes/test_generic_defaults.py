"""An env without a preset gets SB3's defaults where they learn faster, and says so.

About one SGD step per env step (samples_per_insert = batch_size, as the
presets' runs make), SB3's 100 random warm-up steps, PyTorch's layer start,
SB3's target entropy -dim(A), actors pulling weights every 10 env steps, and
ten evaluations per run, where no flag sets them; sac-launch's banner states them.
"""

import csv
import dataclasses
import subprocess
import sys

import pytest
from support.processes import DEADLINE_S

from sac_distributed import config as config_lib
from sac_distributed import paths

NO_PRESET = "MountainCarContinuous-v0"


def test_a_short_run_gets_ten_evaluations_sb3s_warm_up_and_one_update_per_env_step():
    hparams = config_lib.hyperparams_for(NO_PRESET, {"num_iterations": 3000})
    assert hparams.initial_collect_steps == config_lib.GENERIC_WARM_UP == 100
    assert hparams.eval_interval == 300
    assert hparams.samples_per_insert == hparams.batch_size == 256


def test_a_long_run_keeps_the_generic_intervals():
    hparams = config_lib.hyperparams_for(NO_PRESET)
    assert hparams.num_iterations == config_lib.GENERIC_PRESET.num_iterations
    assert hparams.initial_collect_steps == 100
    assert hparams.eval_interval == 10_000
    assert hparams.samples_per_insert == 256


def test_the_rate_follows_the_batch_size():
    hparams = config_lib.hyperparams_for(NO_PRESET, {"num_iterations": 50, "batch_size": 32})
    assert hparams.samples_per_insert == 32
    assert hparams.initial_collect_steps == 100
    assert hparams.eval_interval == 5


def test_the_warm_up_fits_a_small_replay():
    given = {"replay_buffer_capacity": 50, "batch_size": 16}
    assert config_lib.hyperparams_for(NO_PRESET, given).initial_collect_steps == 50


def test_sb3s_network_start_and_target_entropy_unless_a_flag_says_otherwise():
    hparams = config_lib.hyperparams_for(NO_PRESET)
    assert hparams.network_init == "torch"
    assert hparams.target_entropy is None
    assert hparams.target_entropy_for(3) == -3.0  # SB3's -dim(A)
    given = {"network_init": "glorot", "target_entropy_per_action_dim": -0.5}
    told = config_lib.hyperparams_for(NO_PRESET, given)
    assert (told.network_init, told.target_entropy_for(3)) == ("glorot", -1.5)
    assert (
        config_lib.hyperparams_for(NO_PRESET, {"target_entropy": -2.0}).target_entropy_for(3)
        == -2.0
    )


def test_a_preset_keeps_tf_agents_target_entropy_and_glorot_start():
    pendulum = config_lib.hyperparams_for("Pendulum-v1")
    assert (pendulum.network_init, pendulum.target_entropy_for(1)) == ("glorot", -0.5)
    assert config_lib.hyperparams_for("HalfCheetah-v5").target_entropy_for(6) == -6.0


def test_actors_pull_weights_every_ten_env_steps_without_a_preset():
    generic = config_lib.LaunchConfig(root_dir="/tmp/unused", env_name=NO_PRESET)
    assert generic.variable_update_interval == config_lib.GENERIC_VARIABLE_UPDATE_INTERVAL == 10
    told = config_lib.LaunchConfig(
        root_dir="/tmp/unused", env_name=NO_PRESET, variable_update_interval=500
    )
    assert told.variable_update_interval == 500
    preset = config_lib.LaunchConfig(root_dir="/tmp/unused", env_name="Pendulum-v1")
    assert preset.variable_update_interval is None  # the actors' own default
    assert config_lib.ActorConfig.variable_update_interval == 1000
    # sac-actor run on its own resolves its flag the same way
    assert config_lib.variable_update_interval_for(NO_PRESET, None) == 10
    assert config_lib.variable_update_interval_for(NO_PRESET, 500) == 500
    assert config_lib.variable_update_interval_for("Pendulum-v1", None) is None


def test_flags_win_over_the_derived_values():
    given = {
        "num_iterations": 3000,
        "initial_collect_steps": 1000,
        "eval_interval": 1000,
        "samples_per_insert": 0,
    }
    hparams = config_lib.hyperparams_for(NO_PRESET, given)
    assert (hparams.initial_collect_steps, hparams.eval_interval) == (1000, 1000)
    assert hparams.samples_per_insert is None  # 0: MinSize, actors run free


@pytest.mark.parametrize("env_name", sorted(config_lib.PRESETS))
def test_presets_are_unchanged(env_name):
    preset = config_lib.PRESETS[env_name]
    one_update_per_env_step = dataclasses.replace(
        preset, samples_per_insert=float(preset.batch_size)
    )
    assert config_lib.hyperparams_for(env_name) == one_update_per_env_step
    short = config_lib.hyperparams_for(env_name, {"num_iterations": 3000})
    assert short.eval_interval == config_lib.PRESETS[env_name].eval_interval


def test_the_banner_line_names_each_value():
    hparams = config_lib.hyperparams_for(NO_PRESET, {"num_iterations": 3000})
    assert config_lib.describe_generic_defaults(NO_PRESET, hparams, 10) == (
        f"no preset for {NO_PRESET}: generic defaults for 3000 train steps: 100 random "
        "warm-up env steps, an evaluation every 300 train steps, samples_per_insert=256 "
        "(1 SGD steps per env step), network_init=torch, target_entropy_per_action_dim=-1, "
        "actors pull weights every 10 env steps (variable_update_interval), the actor's "
        "log std clipped to [-20, 2] (clip_policy_log_std), actions rescaled from [-1, 1] to "
        "the env's bounds (rescale_actions); each has a flag of the same name"
    )
    told = config_lib.hyperparams_for(NO_PRESET, {"target_entropy": -2.5})
    assert "target_entropy=-2.5," in config_lib.describe_generic_defaults(NO_PRESET, told, 10)


@pytest.mark.slow
def test_a_short_run_without_a_preset_evaluates_often_and_is_rate_limited(tmp_path):
    """A 100-step run (threads engine): the banner states the defaults, every tenth
    of the run is evaluated, and the actor collected about one env step per update."""
    root = str(tmp_path / "run")
    iterations = 100
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sac_distributed.bin.launch",
            f"--root_dir={root}",
            f"--env_name={NO_PRESET}",
            "--engine=threads",
            f"--num_iterations={iterations}",
            "--batch_size=32",
            "--actor_fc_layer_params=16,16",
            "--critic_joint_fc_layer_params=16,16",
            "--num_eval_episodes=1",
            "--policy_save_interval=100",
            "--wait_for_eval",  # an evaluation at every multiple, whatever the machine's load
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    banner = f"sac-launch: no preset for {NO_PRESET}: generic defaults for {iterations} train "
    assert banner in result.stdout, result.stdout[-3000:]
    assert "an evaluation every 10 train steps, samples_per_insert=32" in result.stdout
    assert "actors pull weights every 10 env steps" in result.stdout
    with open(paths.results_path(root)) as f:
        rows = list(csv.DictReader(f))
    steps = [int(row["train_step"]) for row in rows]
    assert set(range(10, iterations + 1, 10)) <= set(steps), steps
    warm_up = config_lib.GENERIC_WARM_UP
    env_steps = int(rows[-1]["env_steps"])
    # One update per env step, give or take the rate limiter's error buffer; actors
    # running free would have collected thousands meanwhile.
    assert env_steps <= 2 * (iterations + warm_up), rows[-1]


def test_an_env_without_a_preset_clips_the_actors_log_std_unless_told_not_to():
    assert config_lib.hyperparams_for(NO_PRESET).clip_policy_log_std
    assert not config_lib.hyperparams_for(
        NO_PRESET, {"clip_policy_log_std": False}
    ).clip_policy_log_std
    assert not config_lib.hyperparams_for("Pendulum-v1").clip_policy_log_std  # a preset: as tuned


@pytest.mark.parametrize("env_name", sorted(config_lib.PRESETS))
def test_a_preset_holds_one_update_per_env_step_unless_a_flag_says_otherwise(env_name):
    preset = config_lib.hyperparams_for(env_name)
    assert preset.samples_per_insert == preset.batch_size
    assert config_lib.hyperparams_for(env_name, {"batch_size": 64}).samples_per_insert == 64
    assert (
        config_lib.hyperparams_for(env_name, {"samples_per_insert": 0}).samples_per_insert is None
    )
    assert config_lib.hyperparams_for(env_name, {"samples_per_insert": 32}).samples_per_insert == 32
