"""job_definitions: every job's flags are written from its typed config and give it back.

The round trip runs each definition through the real binary's flag parser and
`_config_from_flags()` (test_compose's worker: one subprocess, one fork per
binary), so a config field without a matching flag, or a value the flag reads
differently, fails here rather than in a launched run.
"""

import dataclasses
import json

from test_compose import parse_with_binaries

from sac_distributed import config as config_lib
from sac_distributed import job_definitions

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
        seed=7,
        num_envs=3,
        variable_update_interval=50,
        strategy="mirrored",
    )


def _as_json(config) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))


def test_every_job_gets_its_config_back_through_its_binary(tmp_path):
    configs = job_definitions.make_run_configs(_launch_config(str(tmp_path)), port=12345)
    specs = job_definitions.job_specs(configs)
    expected = {
        "server": configs.server,
        "learner": configs.learner,
        "actor_0": configs.actors[0],
        "actor_1": configs.actors[1],
        "evaluator": configs.evaluator,
    }
    assert [s.name for s in specs] == list(expected)
    cases = {}
    for spec in specs:
        cases.setdefault(spec.module, []).append([spec.name, *spec.flags])
    results = parse_with_binaries(cases)
    seen = {module: iter(parsed) for module, parsed in results.items()}
    for spec in specs:
        result = next(seen[spec.module])
        assert result["ok"], f"{spec.name}: {result['error']}"
        assert result["config"] == _as_json(expected[spec.name]), spec.name


def test_run_configs_share_the_launch_settings(tmp_path):
    launch = _launch_config(str(tmp_path))
    configs = job_definitions.make_run_configs(launch, port=12345)
    clients = (configs.learner, *configs.actors, configs.evaluator)
    assert all(c.hparams == launch.hparams for c in (configs.server, *clients))
    assert all(c.client.replay_buffer_server_address == "localhost:12345" for c in clients)
    assert [a.task for a in configs.actors] == [0, 1]
    assert configs.server.port == 12345
    assert configs.learner.strategy == "mirrored"


def test_unset_options_keep_the_job_defaults_and_verbose_reaches_every_job(tmp_path):
    launch = config_lib.LaunchConfig(root_dir=str(tmp_path))
    configs = job_definitions.make_run_configs(launch, port=8100)
    assert configs.actors[0].num_envs == config_lib.ActorConfig.num_envs
    assert configs.learner.strategy == "default"
    assert launch.hparams == config_lib.hyperparams_for(config_lib.DEFAULT_ENV_NAME)
    specs = job_definitions.job_specs(configs, verbose=True)
    assert all(spec.flags[-1] == "--verbose" for spec in specs)
    learner = next(s for s in specs if s.name == "learner")
    assert not any(f.startswith("--strategy") for f in learner.flags)  # the default
    assert learner.argv("python")[:4] == ["python", "-u", "-m", "sac_distributed.bin.learner"]
