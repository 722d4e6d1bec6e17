"""Bad input fails early with an error that says what is wrong.

In-process checks cover configs, env names, addresses, an unreachable server
and an actor whose env does not match the server's tables. Subprocess checks
run the real binaries to see the one-line `error: ...` message and exit code 2:
flag errors come before a binary imports TensorFlow (and are checked with
TensorFlow made unimportable), an unreachable server after it.
"""

import logging
import os
import subprocess
import sys
import time

import pytest
from support.processes import DEADLINE_S, error_lines, run
from support.repo import TESTS_DIR
from support.training import learner_config, pick_free_port, small_hparams

from sac_distributed import config as config_lib
from sac_distributed import jobs, replay
from sac_distributed.envs import loader as env_loader
from sac_distributed.errors import (
    ServerUnreachableError,
    SignatureMismatchError,
    StoppedWhileWaitingError,
)

# --- environments ------------------------------------------------------------------


def test_unknown_env_name_raises_env_error_naming_it():
    with pytest.raises(env_loader.EnvError, match="NoSuchEnv-v7") as raised:
        env_loader.load_env("NoSuchEnv-v7")
    assert isinstance(raised.value, config_lib.ConfigError)  # binaries report it as a user error
    assert "Pendulum-v1" in str(raised.value)  # and suggest a valid id


def test_discrete_action_env_is_rejected():
    env = env_loader.load_env("CartPole-v1")
    try:
        with pytest.raises(env_loader.EnvError, match="discrete actions"):
            env_loader.env_specs(env, "CartPole-v1")
    finally:
        env.close()


# --- configs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"replay_buffer_capacity": -5},
            r"replay_buffer_capacity must be a positive integer, got -5",
        ),
        (
            {"replay_buffer_capacity": 100, "batch_size": 256, "initial_collect_steps": 0},
            r"batch_size \(256\) exceeds replay_buffer_capacity \(100\)",
        ),
        (
            {"replay_buffer_capacity": 1000, "initial_collect_steps": 5000},
            r"initial_collect_steps \(5000\) exceeds replay_buffer_capacity \(1000\)",
        ),
        ({"samples_per_insert": -1.0}, r"samples_per_insert must be a finite number > 0"),
        ({"samples_per_insert": float("nan")}, r"samples_per_insert must be a finite number"),
        ({"batch_size": 0}, r"batch_size must be a positive integer, got 0"),
        ({"gamma": 1.5}, r"gamma must be in \[0, 1\], got 1.5"),
        ({"actor_fc_layer_params": ()}, r"actor_fc_layer_params must be a non-empty list"),
        ({"no_such_flag": 1}, r"Unknown hyperparameters: \['no_such_flag'\]"),
        ({"n_step": 0}, r"n_step must be a positive integer, got 0"),
        ({"n_step": 500}, r"n_step \(500\) is above 100"),
        ({"normalize_observations": "yes"}, r"normalize_observations must be true or false"),
    ],
)
def test_invalid_hyperparameters_raise_config_error(overrides, message):
    with pytest.raises(config_lib.ConfigError, match=message):
        config_lib.hyperparams_for("Pendulum-v1", overrides)


@pytest.mark.parametrize(
    "samples_per_insert, error_buffer, floor",
    [(4.0, 1.0, 4.0), (4.0, 3.99, 4.0), (0.5, 0.5, 1.0), (128.0, 64.0, 128.0)],
)
def test_error_buffer_below_reverbs_floor_raises_config_error(
    samples_per_insert, error_buffer, floor, root_dir
):
    hparams = small_hparams(samples_per_insert=samples_per_insert)
    with pytest.raises(config_lib.ConfigError) as raised:
        config_lib.ServerConfig(
            "Pendulum-v1", hparams, root_dir, samples_per_insert_error_buffer=error_buffer
        )
    message = str(raised.value)
    assert f"samples_per_insert_error_buffer={error_buffer!r} is too small" in message
    assert f"max(1, samples_per_insert) = {floor}" in message


@pytest.mark.parametrize("samples_per_insert, error_buffer", [(4.0, 4.0), (4.0, None), (0.5, 1.0)])
def test_accepted_error_buffers_are_accepted_by_reverb(samples_per_insert, error_buffer, root_dir):
    hparams = small_hparams(samples_per_insert=samples_per_insert)
    config = config_lib.ServerConfig(
        "Pendulum-v1", hparams, root_dir, samples_per_insert_error_buffer=error_buffer
    )
    assert config.error_buffer >= max(1.0, samples_per_insert)
    replay.validate_server_config(config)  # Reverb's own check of the rate limiter
    assert replay.make_rate_limiter(config) is not None


def test_error_buffer_without_samples_per_insert_is_rejected(root_dir):
    with pytest.raises(config_lib.ConfigError, match="set both or neither"):
        config_lib.ServerConfig(
            "Pendulum-v1", small_hparams(), root_dir, samples_per_insert_error_buffer=10.0
        )


@pytest.mark.parametrize(
    "address", ["localhost", "localhost:", ":8008", "localhost:abc", "localhost:0", "host:65536"]
)
def test_invalid_address_raises_config_error_naming_the_flag(address):
    with pytest.raises(config_lib.ConfigError) as raised:
        config_lib.ClientConfig(replay_buffer_server_address=address)
    assert "--replay_buffer_server_address" in str(raised.value)
    assert repr(address) in str(raised.value)
    with pytest.raises(config_lib.ConfigError, match="--variable_container_server_address"):
        config_lib.ClientConfig(variable_container_server_address=address)


def test_valid_addresses_are_accepted():
    for address in ("localhost:8008", "10.0.0.2:1", "reverb-server:65535"):
        assert config_lib.ClientConfig(replay_buffer_server_address=address)


# --- an unreachable server -------------------------------------------------------------


def test_connect_to_an_unused_port_gives_up_after_the_timeout(free_port, caplog):
    caplog.set_level(logging.INFO, logger="absl")
    address = f"localhost:{free_port()}"
    start = time.monotonic()
    with pytest.raises(ServerUnreachableError) as raised:
        replay.connect(address, timeout_s=3, purpose="the test needs the replay table")
    elapsed = time.monotonic() - start
    assert elapsed >= 2.5, f"gave up after {elapsed:.1f} s, before its 3 s timeout"
    message = str(raised.value)
    assert address in message and "within 3 s" in message
    assert "the test needs the replay table" in message
    waiting = [r.getMessage() for r in caplog.records if r.name == "absl"]
    assert any(f"Waiting for the Reverb server at {address}" in m for m in waiting), waiting
    # What the last attempt met, so a slow reconnect can be read from the log.
    assert any("(last attempt: " in m for m in waiting), waiting


def test_connect_stops_waiting_on_a_stop_signal(free_port):
    asked = []

    def should_stop() -> bool:
        asked.append(True)
        return True

    address = f"localhost:{free_port()}"
    # A stop, not a failure: the binaries exit 0 on it (test_stop_while_starting.py).
    with pytest.raises(StoppedWhileWaitingError, match=f"Reverb server at {address}"):
        replay.connect(address, 600, "stop test", should_stop=should_stop)
    assert len(asked) == 1, "connect kept waiting after the stop signal"


def test_connect_returns_a_client_for_a_running_server(server_address):
    client = replay.connect(server_address, timeout_s=5, purpose="test")
    assert replay.REPLAY_TABLE in client.server_info()


# --- an actor whose env does not match the server --------------------------------------


def _mismatched_actor(root_dir, server_address):
    return config_lib.ActorConfig(
        env_name="MountainCarContinuous-v0",  # 2-d observations; the server is Pendulum's (3-d)
        hparams=small_hparams(),
        root_dir=root_dir,
        client=config_lib.ClientConfig(server_address, server_address, connect_timeout_s=10),
        max_env_steps=10,
    )


def test_mismatched_actor_writes_nothing(root_dir, server_address, client):
    with pytest.raises(Exception):  # noqa: B017  (the precise type is checked below)
        jobs.run_actor(_mismatched_actor(root_dir, server_address), lambda: False)
    assert replay.table_info(client, replay.REPLAY_TABLE).current_size == 0


def test_mismatched_actor_raises_signature_mismatch_naming_both_specs(root_dir, server_address):
    with pytest.raises(SignatureMismatchError) as raised:
        jobs.run_actor(_mismatched_actor(root_dir, server_address), lambda: False)
    message = str(raised.value)
    assert replay.REPLAY_TABLE in message
    assert "observation: float32[2]" in message  # the actor's (MountainCarContinuous-v0)
    assert "observation: float32[3]" in message  # the server's (Pendulum-v1)


def test_a_learner_with_other_network_sizes_than_the_server_is_refused_naming_both(
    root_dir, server_address
):
    config = learner_config(root_dir, server_address, {"actor_fc_layer_params": (32, 32)})
    with pytest.raises(SignatureMismatchError) as raised:
        jobs.run_learner(config, lambda: False)
    message = str(raised.value)
    assert "The learner's policy variable spec" in message
    assert "float32[3, 32]" in message  # the learner's first layer (Pendulum: 3-d observations)
    assert "float32[3, 16]" in message  # the server's
    assert "actor_fc_layer_params" in message


# --- the real binaries ----------------------------------------------------------------

BINARY_TIMEOUT_S = 600  # against hangs only


@pytest.fixture(scope="module")
def binary_runs(tmp_path_factory):
    """Starts the three binaries at once; yields name -> (returncode, stderr, seconds)."""
    root = str(tmp_path_factory.mktemp("binaries"))
    replay_port, variable_port = pick_free_port(), pick_free_port()
    commands = {
        "negative_capacity": [
            "sac_distributed.bin.reverb_server",
            f"--root_dir={root}",
            "--port=0",
            "--replay_buffer_capacity=-5",
        ],
        "small_error_buffer": [
            "sac_distributed.bin.reverb_server",
            f"--root_dir={root}",
            "--port=0",
            "--samples_per_insert=4",
            "--samples_per_insert_error_buffer=1",
        ],
        "negative_seed": [
            "sac_distributed.bin.learner",
            f"--root_dir={root}",
            "--seed=-1",
            f"--replay_buffer_server_address=localhost:{replay_port}",
            f"--variable_container_server_address=localhost:{variable_port}",
        ],
        "unreachable": [
            "sac_distributed.bin.actor",
            f"--root_dir={root}",
            "--connect_timeout=3",
            f"--replay_buffer_server_address=localhost:{replay_port}",
            f"--variable_container_server_address=localhost:{variable_port}",
        ],
    }
    env = dict(os.environ)
    procs = {}
    for name, args in commands.items():
        procs[name] = (
            subprocess.Popen(
                [sys.executable, "-m", *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=root,
            ),
            time.monotonic(),
        )
    results = {"replay_port": replay_port}
    try:
        for name, (proc, start) in procs.items():
            _, stderr = proc.communicate(timeout=BINARY_TIMEOUT_S)
            results[name] = (proc.returncode, stderr, time.monotonic() - start)
    finally:
        for proc, _ in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


def test_server_binary_rejects_negative_capacity(binary_runs):
    code, stderr, _ = binary_runs["negative_capacity"]
    assert code == 2, stderr[-2000:]
    assert error_lines(stderr) == [
        "error: replay_buffer_capacity must be a positive integer, got -5."
    ], stderr[-2000:]
    assert "Traceback" not in stderr


def test_server_binary_rejects_an_error_buffer_below_samples_per_insert(binary_runs):
    code, stderr, _ = binary_runs["small_error_buffer"]
    assert code == 2, stderr[-2000:]
    lines = error_lines(stderr)
    assert len(lines) == 1, stderr[-2000:]
    assert "samples_per_insert_error_buffer=1.0 is too small" in lines[0]
    assert "samples_per_insert=4.0" in lines[0]
    assert "Traceback" not in stderr


def test_learner_binary_rejects_a_negative_seed(binary_runs):
    code, stderr, _ = binary_runs["negative_seed"]
    assert code == 2, stderr[-2000:]
    assert error_lines(stderr) == [
        f"error: seed must be an integer in [0, {config_lib.MAX_SEED}] or unset, got -1."
    ], stderr[-2000:]
    assert "Traceback" not in stderr


def test_launcher_checks_the_seed_before_starting_anything():
    with pytest.raises(config_lib.ConfigError, match=r"seed must be an integer"):
        config_lib.LaunchConfig(root_dir="/tmp/root", seed=-5)


@pytest.mark.parametrize(
    "flags,says",
    [
        (["--env_name=Pendelum-v1"], "Did you mean Pendulum-v1"),
        (["--env_name=CartPole-v1"], "SAC needs continuous actions"),
        (["--env_name=user_envs:make_text_observations"], "no fixed-size vector"),
        (["--env_name=user_envs:make_counting", "--env_kwargs=[1]"], "not an object"),
    ],
)
def test_sac_launch_refuses_a_bad_env_once_before_any_directory(tmp_path, flags, says):
    """sac-launch, run from tests/ (where user_envs.py is), checks the env before it makes
    anything: one `error:` line, exit 2, no root_dir."""
    root = tmp_path / "run"
    result = run("launch", f"--root_dir={root}", *flags, timeout_s=DEADLINE_S, cwd=TESTS_DIR)
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], lines
    assert not root.exists()
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize("job", ["actor", "learner", "evaluator"])
@pytest.mark.parametrize("seed", [-1, 2**32, True])
def test_seeds_outside_32_bits_are_config_errors(job, seed):
    configs = {
        "actor": config_lib.ActorConfig,
        "learner": config_lib.LearnerConfig,
        "evaluator": config_lib.EvaluatorConfig,
    }
    hparams = config_lib.hyperparams_for("Pendulum-v1")
    with pytest.raises(config_lib.ConfigError, match=r"seed must be an integer in \[0, "):
        configs[job]("Pendulum-v1", hparams, "/tmp/root", seed=seed)
    configs[job]("Pendulum-v1", hparams, "/tmp/root", seed=config_lib.MAX_SEED)  # the top is fine


@pytest.mark.parametrize("interval", [0, -3.0, float("nan")])
def test_a_shard_probe_interval_that_is_not_positive_is_a_config_error(interval):
    with pytest.raises(
        config_lib.ConfigError,
        match=r"shard_probe_interval_s must be a number > 0",
    ):
        config_lib.ClientConfig(shard_probe_interval_s=interval)
    with pytest.raises(config_lib.ConfigError, match=r"shard_probe_interval_s must be"):
        config_lib.LaunchConfig(root_dir="/tmp/root", shard_probe_interval_s=interval)


def test_actor_binary_gives_up_on_an_unreachable_server(binary_runs):
    code, stderr, seconds = binary_runs["unreachable"]
    assert code == 2, stderr[-2000:]
    address = f"localhost:{binary_runs['replay_port']}"
    lines = error_lines(stderr)
    assert len(lines) == 1, stderr[-2000:]
    assert f"No Reverb server answered at {address} within 3 s" in lines[0]
    assert f"Waiting for the Reverb server at {address}" in stderr  # the absl log line
    assert "Traceback" not in stderr


# The four job binaries check their flags, config and root_dir before they import
# TensorFlow (about 4 CPU-s), so a mistyped flag costs a fraction of a second.
# Run in a fresh interpreter where `import tensorflow` (and so `import reverb`) fails.
_JOB_WITHOUT_TENSORFLOW = """
import sys
sys.modules["tensorflow"] = None
sys.modules["reverb"] = None
sys.argv = ["sac-{job}", "--root_dir={root}", "--env_name=Pendulum-v1", "{flag}"]
from sac_distributed.bin import {job}
{job}.run()
"""


@pytest.mark.parametrize(
    "job, flag, error",
    [
        ("reverb_server", "--replay_buffer_capacity=-5", "replay_buffer_capacity must be a"),
        ("learner", "--seed=-1", "seed must be an integer in [0, "),
        ("actor", "--replay_buffer_server_address=nohost", "'nohost' is not a host:port"),
        ("evaluator", "--variable_container_server_address=:1", "':1' is not a host:port"),
    ],
)
def test_job_binaries_report_a_bad_flag_without_importing_tensorflow(tmp_path, job, flag, error):
    code = _JOB_WITHOUT_TENSORFLOW.format(job=job, root=tmp_path / "run", flag=flag)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=BINARY_TIMEOUT_S
    )
    assert result.returncode == 2, result.stderr[-3000:]
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and error in lines[0], result.stderr[-3000:]
    assert "Traceback" not in result.stderr
