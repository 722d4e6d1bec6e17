"""Portable job definitions: which program each job of a run is, with which flags.

A run is one Reverb server, one learner, N actors and one evaluator. Their
settings are the typed job configs of `config.py`, gathered in `RunConfigs`;
`job_specs()` turns them into `JobSpec`s (a name, the binary's module, its
flags). Every flag is written from a config field by `config_flags()`, named
as the field (without a `_s` unit suffix: `connect_timeout_s` is
`--connect_timeout`), so there is no list of flag names to keep in step with
the binaries; a test parses each definition with the real binary and gets the
same config back.

Nothing here starts a process: the local `launch.Supervisor` runs the specs as
child processes, `ray_launch` runs each as a child of a Ray actor, and another
launcher (a container platform) can run the same definitions its own way.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, List, Tuple

from sac_distributed.config import (
    ActorConfig,
    ClientConfig,
    EvaluatorConfig,
    Hyperparams,
    LaunchConfig,
    LearnerConfig,
    ServerConfig,
)

BIN_PACKAGE = "sac_distributed.bin"
SERVER, LEARNER, EVALUATOR = "server", "learner", "evaluator"
# How a Hyperparams field that is None is spelled as a flag, where the flag's
# own default (None) would mean "the preset's value" instead.
_NONE_SPELLING = {"samples_per_insert": "0"}
_ALWAYS_WRITTEN = ("port",)  # ServerConfig.port


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """One job: a display name, the binary module it runs and that binary's flags."""

    name: str
    module: str  # run as `python -m <module>`
    flags: Tuple[str, ...]

    def argv(self, python: str = sys.executable) -> List[str]:
        """The command line of this job (unbuffered, so its output streams)."""
        return [python, "-u", "-m", self.module, *self.flags]


@dataclasses.dataclass(frozen=True)
class RunConfigs:
    """The configs of every job of one run."""

    server: ServerConfig
    learner: LearnerConfig
    actors: Tuple[ActorConfig, ...]
    evaluator: EvaluatorConfig


def make_run_configs(launch: LaunchConfig, port: int, host: str = "localhost") -> RunConfigs:
    """Every job of a run with its server on `host`:`port`; raises ConfigError on a
    bad value.

    Building them all before any process starts means a bad setting is
    reported once, by the launcher, instead of by each job as it starts. A
    cluster launcher passes the server node's address as `host`.
    """
    address = f"{host}:{port}"
    client = ClientConfig(address, address, launch.connect_timeout_s)
    common = dict(env_name=launch.env_name, hparams=launch.hparams, root_dir=launch.root_dir)
    clients = dict(common, client=client, seed=launch.seed)
    return RunConfigs(
        server=ServerConfig(**common, port=port),
        learner=LearnerConfig(**clients, **_given(strategy=launch.strategy)),
        actors=tuple(
            ActorConfig(
                **clients,
                task=task,
                **_given(
                    num_envs=launch.num_envs,
                    variable_update_interval=launch.variable_update_interval,
                ),
            )
            for task in range(launch.num_actors)
        ),
        evaluator=EvaluatorConfig(**clients),
    )


def _given(**options: Any) -> dict:
    """The options that are set; the others keep the job config's default."""
    return {name: value for name, value in options.items() if value is not None}


def job_specs(configs: RunConfigs, verbose: bool = False) -> List[JobSpec]:
    """The server first, then the learner, the actors and the evaluator."""
    extra = ("--verbose",) if verbose else ()

    def spec(name: str, binary: str, config: Any) -> JobSpec:
        return JobSpec(name, f"{BIN_PACKAGE}.{binary}", tuple(config_flags(config)) + extra)

    specs = [
        spec(SERVER, "reverb_server", configs.server),
        spec(LEARNER, "learner", configs.learner),
    ]
    specs += [spec(f"actor_{a.task}", "actor", a) for a in configs.actors]
    specs.append(spec(EVALUATOR, "evaluator", configs.evaluator))
    return specs


def config_flags(config: Any) -> List[str]:
    """The flags that make a job's binary build `config` again.

    Hyperparams, the server's port and the clients' server addresses are
    written in full (a binary would otherwise fill them from presets and
    defaults, and a container platform needs the port spelled out next to the
    one it opens); the job's own options only where they differ from the
    config's defaults, which the binaries' flags share. Fields left None are
    left out.
    """
    flags: List[str] = []
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if isinstance(value, Hyperparams):
            flags += hyperparam_flags(value)
        elif isinstance(value, ClientConfig):
            flags += [_flag(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
        elif field.name in _ALWAYS_WRITTEN or (
            value is not None and (field.default is dataclasses.MISSING or value != field.default)
        ):
            flags.append(_flag(field.name, value))
    return flags


def hyperparam_flags(hparams: Hyperparams) -> List[str]:
    """Every hyperparameter as a flag, so that no job falls back to its env's preset."""
    flags = []
    for field in dataclasses.fields(hparams):
        value = getattr(hparams, field.name)
        if value is None and field.name in _NONE_SPELLING:
            flags.append(f"--{field.name}={_NONE_SPELLING[field.name]}")
        elif value is not None:
            flags.append(_flag(field.name, value))
    return flags


def _flag(field_name: str, value: Any) -> str:
    name = field_name[: -len("_s")] if field_name.endswith("_s") else field_name
    return f"--{name}={_flag_value(value)}"


def _flag_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)
