"""job_definitions: every job's flags are written from its typed config and give it back.

The round trip runs each definition through the real binary's flag parser and
`_config_from_flags()` (support/launch_files.py's worker, as in test_compose: one
subprocess, one fork per binary), so a config field without a matching flag, or a
value the flag reads differently, fails here rather than in a launched run.
"""

import dataclasses
import json

import pytest
from support.launch_files import parse_with_binaries

from sac_distributed import config as config_lib
from sac_distributed.errors import ConfigError
from sac_distributed.launchers import job_definitions

ENV_NAME = "Pendulum-v1"


def _launch_config(root_dir: str) -> config_lib.LaunchConfig:
    """A run with something other than the default or the preset in every setting."""
    hparams = config_lib.hyperparams_for(
        ENV_NAME,
        dict(
            batch_size=64,
            actor_fc_layer_params=(32, 16),
            critic_joint_fc_layer_params=(24, 24),
            gamma=0.95,
            normalize_observations=True,
            n_step=3,
            target_entropy=-1.5,
            samples_per_insert=0,  # None, where Pendulum's preset has 128
            transitions_per_item=2,
        ),
    )
    assert hparams.samples_per_insert is None
    return config_lib.LaunchConfig(
        root_dir=root_dir,
        env_name=ENV_NAME,
        hparams=hparams,
        num_actors=2,
        port=12345,
        connect_timeout_s=12.5,
        shard_probe_interval_s=4.0,
        seed=7,
        num_envs=3,
        variable_update_interval=50,
        strategy="mirrored",
        checkpoint_interval=250,
    )


def _as_json(config) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))


def _expected_configs(configs: job_definitions.RunConfigs) -> dict:
    """Job name -> the config its binary must build, in job_specs' order."""
    names = job_definitions.server_names(len(configs.servers))
    expected = dict(zip(names, configs.servers))
    expected["learner"] = configs.learner
    expected.update({f"actor_{a.task}": a for a in configs.actors})
    expected["evaluator"] = configs.evaluator
    return expected


def test_every_job_gets_its_config_back_through_its_binary(tmp_path):
    """One run unsharded, one with 2 replay shards; one worker parses both."""
    launch = _launch_config(str(tmp_path))
    runs = {
        "unsharded": job_definitions.make_run_configs(launch, ports=12345),
        "sharded": job_definitions.make_run_configs(
            dataclasses.replace(launch, num_replay_shards=2), ports=[12345, 12400]
        ),
    }
    cases, slots = {}, []
    for run, configs in runs.items():
        specs = job_definitions.job_specs(configs)
        expected = _expected_configs(configs)
        assert [s.name for s in specs] == list(expected), run
        for spec in specs:
            slots.append((run, spec, expected[spec.name], len(cases.get(spec.module, []))))
            cases.setdefault(spec.module, []).append([spec.name, *spec.flags])
    assert list(_expected_configs(runs["unsharded"]))[:2] == ["server", "learner"]
    assert list(_expected_configs(runs["sharded"]))[:3] == ["server_0", "server_1", "learner"]
    results = parse_with_binaries(cases)
    for run, spec, config, index in slots:
        result = results[spec.module][index]
        assert result["ok"], f"{run} {spec.name}: {result['error']}"
        assert result["config"] == _as_json(config), (run, spec.name)


def test_sharded_run_gives_every_client_every_shard(tmp_path):
    launch = dataclasses.replace(_launch_config(str(tmp_path)), num_replay_shards=3)
    configs = job_definitions.make_run_configs(launch, ports=8000, hosts=["a", "b", "c"])
    assert [(s.port, s.num_replay_shards, s.replay_shard) for s in configs.servers] == [
        (8000, 3, 0),
        (8000, 3, 1),
        (8000, 3, 2),
    ]
    assert configs.server is configs.servers[0]
    specs = job_definitions.job_specs(configs)
    servers = [s for s in specs if job_definitions.is_server(s.name)]
    assert [s.name for s in servers] == ["server_0", "server_1", "server_2"]
    assert "--replay_shard=2" in servers[2].flags and "--num_replay_shards=3" in servers[2].flags
    for spec in specs:
        if spec in servers:
            continue
        assert "--replay_buffer_server_address=a:8000,b:8000,c:8000" in spec.flags, spec.name
        assert "--variable_container_server_address=a:8000" in spec.flags, spec.name
    assert not job_definitions.is_server("server_x") and not job_definitions.is_server("learner")


def test_shard_addresses_must_differ_and_match_the_shard_count(tmp_path):
    launch = config_lib.LaunchConfig(root_dir=str(tmp_path), num_replay_shards=2)
    with pytest.raises(ConfigError, match="2 different host:port addresses, got localhost:8000"):
        job_definitions.make_run_configs(launch, ports=8000)
    with pytest.raises(ConfigError, match="3 ports for 2 replay shards"):
        job_definitions.make_run_configs(launch, ports=[1, 2, 3])
    with pytest.raises(ConfigError, match="past 65535"):
        job_definitions.shard_ports(65535, 2)
    assert job_definitions.shard_ports(9000, 3) == [9000, 9001, 9002]
    picked = job_definitions.shard_ports(0, 3)
    assert len(set(picked)) == 3 and all(0 < p < 65536 for p in picked)


def test_run_configs_share_the_launch_settings(tmp_path):
    launch = _launch_config(str(tmp_path))
    configs = job_definitions.make_run_configs(launch, ports=12345)
    clients = (configs.learner, *configs.actors, configs.evaluator)
    assert all(c.hparams == launch.hparams for c in (configs.server, *clients))
    assert all(c.client.replay_buffer_server_address == "localhost:12345" for c in clients)
    assert [a.task for a in configs.actors] == [0, 1]
    assert configs.server.port == 12345
    assert configs.learner.strategy == "mirrored"
    assert configs.learner.checkpoint_interval == 250


def test_checkpoint_interval_must_be_positive(tmp_path):
    with pytest.raises(ConfigError, match="checkpoint_interval must be a positive integer"):
        config_lib.LaunchConfig(root_dir=str(tmp_path), checkpoint_interval=0)


def test_unset_options_keep_the_job_defaults_and_verbose_reaches_every_job(tmp_path):
    launch = config_lib.LaunchConfig(root_dir=str(tmp_path))
    configs = job_definitions.make_run_configs(launch, ports=8100)
    assert configs.actors[0].num_envs == config_lib.ActorConfig.num_envs
    assert configs.learner.strategy == "default"
    assert configs.learner.checkpoint_interval == config_lib.LearnerConfig.checkpoint_interval
    assert launch.hparams == config_lib.hyperparams_for(config_lib.DEFAULT_ENV_NAME)
    specs = job_definitions.job_specs(configs, verbose=True)
    assert all(spec.flags[-1] == "--verbose" for spec in specs)
    learner = next(s for s in specs if s.name == "learner")
    assert not any(f.startswith("--strategy") for f in learner.flags)  # the default
    assert learner.argv("python")[:4] == ["python", "-u", "-m", "sac_distributed.bin.learner"]


def test_the_error_buffer_reaches_every_server_and_needs_a_ratio(tmp_path):
    launch = config_lib.LaunchConfig(
        root_dir=str(tmp_path),
        env_name="Pendulum-v1",  # its preset sets samples_per_insert (128)
        num_replay_shards=2,
        samples_per_insert_error_buffer=512.0,
    )
    configs = job_definitions.make_run_configs(launch, ports=[8000, 8001])
    assert [s.samples_per_insert_error_buffer for s in configs.servers] == [512.0, 512.0]
    servers = [s for s in job_definitions.job_specs(configs) if job_definitions.is_server(s.name)]
    assert all("--samples_per_insert_error_buffer=512.0" in s.flags for s in servers)
    result = parse_with_binaries({servers[1].module: [[servers[1].name, *servers[1].flags]]})
    parsed = result[servers[1].module][0]
    assert parsed["ok"], parsed["error"]
    assert parsed["config"] == _as_json(configs.servers[1])
    # Unset, each server derives its own; a buffer without a ratio or below Reverb's floor
    # is refused before any job starts.
    unset = dataclasses.replace(launch, samples_per_insert_error_buffer=None)
    default = job_definitions.make_run_configs(unset, ports=[8000, 8001])
    assert [s.samples_per_insert_error_buffer for s in default.servers] == [None, None]
    assert default.server.error_buffer == config_lib.default_error_buffer(128.0, launch.hparams)
    without_ratio = dataclasses.replace(
        launch, hparams=dataclasses.replace(launch.hparams, samples_per_insert=None)
    )
    with pytest.raises(ConfigError, match="only applies together with --samples_per_insert"):
        job_definitions.make_run_configs(without_ratio, ports=[8000, 8001])
    too_small = dataclasses.replace(launch, samples_per_insert_error_buffer=10.0)
    with pytest.raises(ConfigError, match="samples_per_insert_error_buffer=10.0 is too small"):
        job_definitions.make_run_configs(too_small, ports=[8000, 8001])
