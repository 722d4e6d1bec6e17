"""Portable job definitions: which program each job of a run is, with which flags.

A run is S Reverb servers (replay shards; one by default), one learner, N
actors and one evaluator. Their settings are the typed job configs of
`sac_distributed.config`, gathered in `RunConfigs`; `job_specs()` turns them into
`JobSpec`s (a name, the binary's module, its flags). Every flag is written
from a config field by `config_flags()`, named as the field (without a `_s`
unit suffix: `connect_timeout_s` is `--connect_timeout`), so there is no list
of flag names to keep in step with the binaries; a test parses each definition
with the real binary and gets the same config back.

Replay shards: every server is an ordinary sac-reverb-server that holds
1/S of the replay (`--num_replay_shards=S --replay_shard=i`); every client gets
all S addresses, comma-separated in shard order, as
--replay_buffer_server_address, and the first shard's address as
--variable_container_server_address (shard 0 also holds the weights). With
S = 1 the server job is called `server` and its flags are those of an
unsharded run; with S > 1 the servers are `server_0` ... `server_<S-1>`.

Nothing here starts a process: the local `supervisor.Supervisor` runs the specs as
child processes, `ray_launch` runs each as a child of a Ray actor, and another
launcher (a container platform) can run the same definitions its own way.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, List, Sequence, Tuple, Union

import portpicker

from sac_distributed.config import (
    ActorConfig,
    ClientConfig,
    EvaluatorConfig,
    Hyperparams,
    LaunchConfig,
    LearnerConfig,
    ServerConfig,
)
from sac_distributed.errors import ConfigError

BIN_PACKAGE = "sac_distributed.bin"
SERVER, LEARNER, EVALUATOR = "server", "learner", "evaluator"
# How a Hyperparams field that is None is spelled as a flag, where the flag's
# own default (None) would mean "the preset's value" instead.
_NONE_SPELLING = {"samples_per_insert": "0"}
_ALWAYS_WRITTEN = ("port",)  # ServerConfig.port
_CLIENT_ALWAYS_WRITTEN = (
    "replay_buffer_server_address",
    "variable_container_server_address",
    "connect_timeout_s",
)


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

    servers: Tuple[ServerConfig, ...]  # the replay shards, in shard order
    learner: LearnerConfig
    actors: Tuple[ActorConfig, ...]
    evaluator: EvaluatorConfig

    @property
    def server(self) -> ServerConfig:
        """Shard 0: the server that also holds the variable container."""
        return self.servers[0]


def make_run_configs(
    launch: LaunchConfig,
    ports: Union[int, Sequence[int]],
    hosts: Union[str, Sequence[str]] = "localhost",
) -> RunConfigs:
    """Every job of a run with shard i's server on `hosts[i]`:`ports[i]`; raises
    ConfigError on a bad value.

    `ports` and `hosts` each are one value that every shard shares or one per
    shard (launch.num_replay_shards), in shard order: the local launcher gives
    one host and a port per shard (`shard_ports`), a cluster launcher each
    shard's node and the one port they all listen on, or a port each. Building
    every config before any process starts means a bad setting is reported
    once, by the launcher, instead of by each job as it starts.
    """
    num_shards = launch.num_replay_shards
    ports, hosts = _per_shard("ports", ports, num_shards), _per_shard("hosts", hosts, num_shards)
    addresses = [f"{host}:{port}" for host, port in zip(hosts, ports)]
    if len(set(addresses)) < num_shards:
        raise ConfigError(
            f"The {num_shards} replay shards need {num_shards} different host:port addresses, "
            f"got {', '.join(addresses)}: give each shard its own port or host."
        )
    client = ClientConfig(
        ",".join(addresses),
        addresses[0],
        launch.connect_timeout_s,
        shard_probe_interval_s=launch.shard_probe_interval_s,
    )
    common = dict(
        env_name=launch.env_name,
        env_kwargs=launch.env_kwargs,
        hparams=launch.hparams,
        root_dir=launch.root_dir,
    )
    clients = dict(common, client=client, seed=launch.seed)
    return RunConfigs(
        servers=tuple(
            ServerConfig(
                **common,
                port=port,
                num_replay_shards=num_shards,
                replay_shard=shard,
                **_given(samples_per_insert_error_buffer=launch.samples_per_insert_error_buffer),
            )
            for shard, port in enumerate(ports)
        ),
        learner=LearnerConfig(
            **clients,
            **_given(strategy=launch.strategy, checkpoint_interval=launch.checkpoint_interval),
        ),
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


def shard_ports(port: int, num_shards: int) -> List[int]:
    """Ports for `num_shards` servers on one host: `port`, `port + 1`, ...

    Port 0 picks a free port for each shard instead. Raises ConfigError when
    the ports would run past 65535.
    """
    if port == 0:
        picked: List[int] = []
        while len(picked) < num_shards:
            candidate = portpicker.pick_unused_port()
            if candidate not in picked:
                picked.append(candidate)
        return picked
    if port + num_shards - 1 > 65535:
        raise ConfigError(
            f"--port={port} with {num_shards} replay shards needs ports {port} to "
            f"{port + num_shards - 1}, past 65535: pass a lower --port (0 picks free ones)."
        )
    return [port + shard for shard in range(num_shards)]


def _per_shard(name: str, values: Any, num_shards: int) -> list:
    """`values` as a list of one value per shard (one value is shared by all)."""
    if isinstance(values, (str, int)):
        return [values] * num_shards
    values = list(values)
    if len(values) != num_shards:
        raise ConfigError(
            f"{len(values)} {name} for {num_shards} replay shards: give one per shard, "
            "in shard order, or one that every shard shares."
        )
    return values


def server_names(num_shards: int) -> Tuple[str, ...]:
    """The server jobs' names: `server` alone, or `server_0` ... `server_<S-1>`."""
    if num_shards == 1:
        return (SERVER,)
    return tuple(f"{SERVER}_{shard}" for shard in range(num_shards))


def is_server(name: str) -> bool:
    """Whether the job called `name` is a Reverb server (a replay shard)."""
    prefix = SERVER + "_"
    return name == SERVER or (name.startswith(prefix) and name[len(prefix) :].isdigit())


def _given(**options: Any) -> dict:
    """The options that are set; the others keep the job config's default."""
    return {name: value for name, value in options.items() if value is not None}


def job_specs(configs: RunConfigs, verbose: bool = False) -> List[JobSpec]:
    """The servers first (shard order), then the learner, the actors and the evaluator."""
    extra = ("--verbose",) if verbose else ()

    def spec(name: str, binary: str, config: Any) -> JobSpec:
        return JobSpec(name, f"{BIN_PACKAGE}.{binary}", tuple(config_flags(config)) + extra)

    names = server_names(len(configs.servers))
    specs = [spec(n, "reverb_server", s) for n, s in zip(names, configs.servers)]
    specs.append(spec(LEARNER, "learner", configs.learner))
    specs += [spec(f"actor_{a.task}", "actor", a) for a in configs.actors]
    specs.append(spec(EVALUATOR, "evaluator", configs.evaluator))
    return specs


def config_flags(config: Any) -> List[str]:
    """The flags that make a job's binary build `config` again.

    Hyperparams, the server's port and the clients' server addresses and
    connect timeout are written in full (a binary would otherwise fill them
    from presets and defaults, and a container platform needs the port spelled
    out next to the one it opens); the job's own options only where they differ
    from the config's defaults, which the binaries' flags share. Fields left
    None are left out.
    """
    flags: List[str] = []
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if isinstance(value, Hyperparams):
            flags += hyperparam_flags(value)
        elif isinstance(value, ClientConfig):
            flags += _client_flags(value)
        elif field.name in _ALWAYS_WRITTEN or (
            value is not None and (field.default is dataclasses.MISSING or value != field.default)
        ):
            flags.append(_flag(field.name, value))
    return flags


def _client_flags(client: ClientConfig) -> List[str]:
    """The addresses and connect timeout in full; the other fields where not default."""
    return [
        _flag(f.name, getattr(client, f.name))
        for f in dataclasses.fields(client)
        if f.name in _CLIENT_ALWAYS_WRITTEN or getattr(client, f.name) != f.default
    ]


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
