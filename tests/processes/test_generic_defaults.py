"""An env without a preset gets defaults scaled to the run's length, and says so.

About one SGD step per env step (samples_per_insert = batch_size, as the
presets' runs make), a tenth of the run as random warm-up and ten evaluations
per run, where no flag sets them; sac-launch's banner states them.
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


def test_a_short_run_gets_a_short_warm_up_ten_evaluations_and_one_update_per_env_step():
    hparams = config_lib.hyperparams_for(NO_PRESET, {"num_iterations": 3000})
    assert hparams.initial_collect_steps == 300
    assert hparams.eval_interval == 300
    assert hparams.samples_per_insert == hparams.batch_size == 256


def test_a_long_run_keeps_the_generic_intervals():
    hparams = config_lib.hyperparams_for(NO_PRESET)
    assert hparams.num_iterations == config_lib.GENERIC_PRESET.num_iterations
    assert hparams.initial_collect_steps == 10_000
    assert hparams.eval_interval == 10_000
    assert hparams.samples_per_insert == 256


def test_the_rate_follows_the_batch_size_and_the_warm_up_fills_one_batch():
    hparams = config_lib.hyperparams_for(NO_PRESET, {"num_iterations": 50, "batch_size": 32})
    assert hparams.samples_per_insert == 32
    assert hparams.initial_collect_steps == 32  # a tenth (5) would not fill a batch
    assert hparams.eval_interval == 5


def test_the_warm_up_fits_a_small_replay():
    hparams = config_lib.hyperparams_for(NO_PRESET, {"replay_buffer_capacity": 2000})
    assert hparams.initial_collect_steps == 2000


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
    assert config_lib.describe_generic_defaults(NO_PRESET, hparams) == (
        f"no preset for {NO_PRESET}: generic defaults for 3000 train steps: 300 random "
        "warm-up env steps, an evaluation every 300 train steps, samples_per_insert=256 "
        "(1 SGD steps per env step), the actor's log std clipped to [-20, 2] "
        "(clip_policy_log_std); each has a flag of the same name"
    )


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
    with open(paths.results_path(root)) as f:
        rows = list(csv.DictReader(f))
    steps = [int(row["train_step"]) for row in rows]
    assert set(range(10, iterations + 1, 10)) <= set(steps), steps
    warm_up = 32
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
