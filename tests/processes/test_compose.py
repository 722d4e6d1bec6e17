"""Static checks of the Docker deployment in launch/ (no Docker engine needed).

The compose file is parsed with PyYAML (a test extra), with Compose's
`${VAR:-default}` interpolation resolved to the defaults (support/launch_files.py,
which the other launch-file tests read it with too). Every `sac-*` command line
is then parsed by the real binary: its module is imported in a subprocess,
`absl.flags.FLAGS(argv)` rejects unknown or malformed flags, and the module's
`_config_from_flags()` validates the values (ConfigError). There is one
subprocess, which imports TensorFlow once and forks a child per binary, so that
every binary sees only its own flags.

The checks are plain functions that raise AssertionError. The pytest tests
run them on the real files, and the negative tests run them on broken copies
to show that each check can fail.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

import pytest
from support.launch_files import (
    CLIENT_SERVICES,
    COMPOSE_FILE,
    DOCKERFILE,
    PUBLIC_SERVICE,
    REQUIRED_SERVICES,
    SERVER_SERVICE,
    console_scripts,
    dockerfile_instructions,
    interpolate,
    load_compose,
    parse_with_binaries,
    parse_yaml,
    sac_commands,
    volume_mounts,
)
from support.repo import REPO

# --- reading the services' networks and ports ------------------------------------


def _service_networks(service: Mapping) -> List[str]:
    networks = service.get("networks")
    if networks is None:
        return ["default"]  # Compose's implicit, non-internal network
    names = list(networks)  # a list of names, or a mapping name -> options
    assert all(isinstance(n, str) for n in names), f"malformed networks: {networks!r}"
    return names


def _is_internal(compose: Mapping, network: str) -> bool:
    spec = (compose.get("networks") or {}).get(network) or {}
    return spec.get("internal") is True


def _published_container_ports(service: Mapping) -> List[int]:
    ports = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            ports.append(int(port["target"]))
        else:
            ports.append(int(str(port).split("/")[0].rsplit(":", 1)[-1].split("-")[0]))
    return ports


# Appended to a minimal valid command line (script --root_dir=/data); the binary
# must reject each of them. They show that the harness catches both kinds of
# mistake, independently of what the compose file says.
NEGATIVE_CONTROLS = (
    ("--no_such_flag=1", "flags"),  # unknown / misspelled flag: absl rejects it
    ("--batch_size=0", "config"),  # well-formed but invalid: ConfigError
    ("<foreign>", "flags"),  # another binary's flag: unknown to this one
)
FOREIGN_FLAGS = {"sac_distributed.bin.actor": "--port=8008"}  # default: --task=0


def _control_flag(module: str, flag: str) -> str:
    return FOREIGN_FLAGS.get(module, "--task=0") if flag == "<foreign>" else flag


@dataclasses.dataclass
class Parsed:
    """The compose commands as the binaries see them."""

    by_service: Dict[str, dict]  # service -> worker result of its argv
    controls: Dict[str, List[Tuple[str, str, dict]]]  # module -> (flag, stage, result)


@pytest.fixture(scope="module")
def compose() -> dict:
    return load_compose()


@pytest.fixture(scope="module")
def parsed(compose) -> Parsed:
    scripts = console_scripts()
    commands = sac_commands(compose)
    cases: Dict[str, List[List[str]]] = {}
    slots = {}
    for service, argv in commands.items():
        assert argv[0] in scripts, (
            f"service {service} runs {argv[0]!r}, which is not a console script of "
            f"sac_distributed ({sorted(scripts)})."
        )
        module = scripts[argv[0]]
        slots[service] = (module, len(cases.setdefault(module, [])))
        cases[module].append(argv)
    control_slots = {}
    for module, argvs in list(cases.items()):
        base = [argvs[0][0], "--root_dir=/data"]  # valid for every binary
        for flag, stage in NEGATIVE_CONTROLS:
            flag = _control_flag(module, flag)
            control_slots.setdefault(module, []).append((flag, stage, len(argvs)))
            argvs.append(base + [flag])
    results = parse_with_binaries(cases)
    return Parsed(
        by_service={s: results[m][i] for s, (m, i) in slots.items()},
        controls={
            m: [(flag, stage, results[m][i]) for flag, stage, i in entries]
            for m, entries in control_slots.items()
        },
    )


def _config(parsed: Parsed, service: str) -> dict:
    result = parsed.by_service.get(service)
    assert result is not None, f"{service} does not run a sac-* command."
    assert result["ok"], f"{service}: its command is rejected ({result['error']})."
    return result["config"]


# --- checks --------------------------------------------------------------------


def check_services_exist(compose: Mapping) -> None:
    services = compose.get("services") or {}
    missing = [s for s in REQUIRED_SERVICES if s not in services]
    assert not missing, f"compose file lacks services {missing}."


def check_actor_replicas(compose: Mapping) -> None:
    replicas = (compose["services"]["actor"].get("deploy") or {}).get("replicas")
    assert isinstance(replicas, int) and replicas >= 1, (
        f"actor needs deploy.replicas >= 1, got {replicas!r}."
    )


def check_only_tensorboard_publishes(compose: Mapping) -> None:
    for name, service in compose["services"].items():
        assert service.get("network_mode") != "host", (
            f"{name} uses network_mode: host, which exposes every port it opens."
        )
        if name != PUBLIC_SERVICE:
            assert not service.get("ports"), f"{name} publishes ports {service['ports']}."
    board = compose["services"][PUBLIC_SERVICE]
    assert 6006 in _published_container_ports(board), "tensorboard must publish port 6006."
    assert any(not _is_internal(compose, n) for n in _service_networks(board)), (
        "tensorboard must join a non-internal network, or its port is not reachable."
    )


def check_server_networks_internal(compose: Mapping) -> None:
    networks = _service_networks(compose["services"][SERVER_SERVICE])
    exposed = [n for n in networks if not _is_internal(compose, n)]
    assert not exposed, (
        f"{SERVER_SERVICE} joins non-internal networks {exposed}: Reverb has no "
        "authentication and must only be reachable on an `internal: true` network."
    )


def check_clients_reach_server(compose: Mapping, parsed: Parsed) -> None:
    server_networks = set(_service_networks(compose["services"][SERVER_SERVICE]))
    port = _config(parsed, SERVER_SERVICE)["port"]
    for name in CLIENT_SERVICES:
        service = compose["services"][name]
        assert server_networks & set(_service_networks(service)), (
            f"{name} shares no network with {SERVER_SERVICE}."
        )
        assert str(service.get("restart", "")).startswith("on-failure"), (
            f"{name} needs restart: on-failure so that any start order works."
        )
        client = _config(parsed, name)["client"]
        for key in ("replay_buffer_server_address", "variable_container_server_address"):
            assert client[key] == f"{SERVER_SERVICE}:{port}", (
                f"{name} --{key}={client[key]}, expected {SERVER_SERVICE}:{port}."
            )


def check_commands_parse(parsed: Parsed) -> None:
    for service in parsed.by_service:
        _config(parsed, service)


def check_negative_controls(parsed: Parsed) -> None:
    for module, controls in parsed.controls.items():
        for flag, stage, result in controls:
            assert not result["ok"] and result["stage"] == stage, (
                f"{module} accepted {flag} (expected a {stage} error): {result}."
            )


def check_root_dir_on_shared_volume(compose: Mapping, parsed: Parsed) -> None:
    declared = set(compose.get("volumes") or {})
    sources = set()
    for service in parsed.by_service:
        root_dir = _config(parsed, service)["root_dir"]
        mounts = [
            (src, target)
            for src, target, read_only in volume_mounts(compose["services"][service])
            if not read_only and (root_dir + "/").startswith(target.rstrip("/") + "/")
        ]
        assert mounts, f"{service} --root_dir={root_dir} is not on a writable named volume."
        sources.add(mounts[0][0])
    assert len(sources) == 1, f"sac jobs write to different volumes {sorted(sources)}."
    assert sources <= declared, f"volume {sources} is not declared under top-level volumes."
    board = volume_mounts(compose["services"][PUBLIC_SERVICE])
    assert any(src in sources for src, _, _ in board), "tensorboard does not mount the volume."


def check_same_env_name(parsed: Parsed) -> None:
    for service, result in parsed.by_service.items():
        _config(parsed, service)
        assert "env_name" in result["present"], f"{service} does not pass --env_name."
    names = {s: _config(parsed, s)["env_name"] for s in parsed.by_service}
    assert len(set(names.values())) == 1, f"jobs disagree on --env_name: {names}."


def dockerfile_base(instructions: List[Tuple[str, str]]) -> Optional[str]:
    """The last FROM's image, with `${ARG}` taken from that ARG's default."""
    defaults = {}
    for kw, args in instructions:
        if kw == "ARG" and "=" in args:
            name, _, value = args.partition("=")
            defaults[name.strip()] = value.strip().strip("\"'")
    bases = [args.split()[-1] for kw, args in instructions if kw == "FROM"]
    if not bases:
        return None
    return re.sub(r"\$\{(\w+)\}", lambda m: defaults.get(m.group(1), m.group(0)), bases[-1])


def check_dockerfile(text: str, context: Path = Path(REPO)) -> None:
    instructions = dockerfile_instructions(text)
    base = dockerfile_base(instructions)
    assert base and re.match(r"python:3\.11(-|$)", base), (
        f"the default base image must be python:3.11, got {base}."
    )
    runs = " && ".join(args for kw, args in instructions if kw == "RUN")
    assert re.search(r"pip3? install\b[^&;|]*\s[\"']?\.(\[[\w,-]+\])?[\"']?(\s|$)", runs), (
        "no `pip install .` found."
    )
    copies = [args.split() for kw, args in instructions if kw == "COPY"]
    sources = [s for args in copies for s in args[:-1] if not s.startswith("--")]
    assert "setup.py" in sources or "." in sources, "setup.py is never copied."
    assert "sac_distributed" in sources or "." in sources, "the package is never copied."
    for source in sources:
        assert (context / source).exists(), f"COPY {source}: not in the build context."
    env = " ".join(args for kw, args in instructions if kw == "ENV")
    assert re.search(r"\bTF_USE_LEGACY_KERAS=1\b", env), "TF_USE_LEGACY_KERAS=1 is not set."
    users = [args for kw, args in instructions if kw == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), (
        f"the image must run as a non-root user, got USER {users[-1] if users else None}."
    )


def check_compose_builds_dockerfile(compose: Mapping) -> None:
    for name in REQUIRED_SERVICES:
        build = compose["services"][name].get("build")
        assert isinstance(build, dict), f"{name} has no build section."
        context = (COMPOSE_FILE.parent / build["context"]).resolve()
        assert context == Path(REPO).resolve(), (
            f"{name} builds with context {context}, not the repo root."
        )
        assert (context / build["dockerfile"]).resolve() == DOCKERFILE, (
            f"{name} builds {build['dockerfile']}, not launch/Dockerfile."
        )


# --- tests on the real files ---------------------------------------------------


def test_services_exist(compose):
    check_services_exist(compose)


def test_actor_has_replicas(compose):
    check_actor_replicas(compose)


def test_only_tensorboard_publishes_a_port(compose):
    check_only_tensorboard_publishes(compose)


def test_reverb_server_is_internal_only(compose):
    check_server_networks_internal(compose)


def test_commands_parse_with_real_binaries(parsed):
    check_commands_parse(parsed)
    check_negative_controls(parsed)
    assert set(parsed.by_service) == {SERVER_SERVICE, *CLIENT_SERVICES}


def test_clients_reach_server(compose, parsed):
    check_clients_reach_server(compose, parsed)


def test_root_dir_on_shared_volume(compose, parsed):
    check_root_dir_on_shared_volume(compose, parsed)


def test_same_env_name(parsed):
    check_same_env_name(parsed)


def test_dockerfile():
    assert DOCKERFILE.is_file(), f"{DOCKERFILE} is missing."
    check_dockerfile(DOCKERFILE.read_text())


def test_compose_builds_the_dockerfile(compose):
    check_compose_builds_dockerfile(compose)


# --- each check fails on a broken copy -----------------------------------------


def _passes_or_skip(check, *args) -> None:
    """A negative test only means something if the check passes on the real file."""
    try:
        check(*args)
    except AssertionError as e:
        pytest.skip(f"{check.__name__} already fails on the real file (see above): {e}")


def _broken(compose: dict, edit) -> dict:
    broken = copy.deepcopy(compose)
    edit(broken)
    return broken


def _set(path: str, value):
    def edit(doc):
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node[key]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value

    return edit


_DELETE = object()

COMPOSE_BREAKAGES = [
    (check_services_exist, _set("services.evaluator", _DELETE)),
    (check_actor_replicas, _set("services.actor.deploy", {"replicas": 0})),
    (check_actor_replicas, _set("services.actor.deploy", _DELETE)),
    (check_only_tensorboard_publishes, _set("services.reverb_server.ports", ["8008:8008"])),
    (check_only_tensorboard_publishes, _set("services.learner.network_mode", "host")),
    (check_only_tensorboard_publishes, _set("services.tensorboard.ports", _DELETE)),
    (check_only_tensorboard_publishes, _set("services.tensorboard.networks", ["reverb"])),
    (check_server_networks_internal, _set("networks.reverb.internal", False)),
    (check_server_networks_internal, _set("services.reverb_server.networks", _DELETE)),
    (check_server_networks_internal, _set("services.reverb_server.networks", ["reverb", "public"])),
    (
        check_compose_builds_dockerfile,
        _set("services.actor.build", {"context": ".", "dockerfile": "Dockerfile"}),
    ),
]


@pytest.mark.parametrize("check,edit", COMPOSE_BREAKAGES)
def test_compose_checks_can_fail(compose, check, edit):
    _passes_or_skip(check, compose)  # passes on the real file...
    with pytest.raises(AssertionError):
        check(_broken(compose, edit))  # ...and fails on the broken copy


PARSED_BREAKAGES = [
    (check_root_dir_on_shared_volume, _set("services.actor.volumes", ["other:/data"])),
    (check_root_dir_on_shared_volume, _set("services.learner.volumes", ["sac_data:/data:ro"])),
    (check_root_dir_on_shared_volume, _set("services.evaluator.volumes", ["sac_data:/elsewhere"])),
    (check_clients_reach_server, _set("services.evaluator.networks", ["public"])),
    (check_clients_reach_server, _set("services.actor.restart", "no")),
]


@pytest.mark.parametrize("check,edit", PARSED_BREAKAGES)
def test_volume_and_network_checks_can_fail(compose, parsed, check, edit):
    _passes_or_skip(check, compose, parsed)
    with pytest.raises(AssertionError):
        check(_broken(compose, edit), parsed)


def _broken_result(parsed: Parsed, service: str, **changes) -> Parsed:
    broken = copy.deepcopy(parsed)
    result = broken.by_service[service]
    for key, value in changes.items():
        if key in ("ok", "error", "present", "stage"):
            result[key] = value
        elif key == "address":
            result["config"]["client"]["replay_buffer_server_address"] = value
        else:
            result["config"][key] = value
    return broken


def test_result_checks_can_fail(compose, parsed):
    _passes_or_skip(check_commands_parse, parsed)
    with pytest.raises(AssertionError):
        check_same_env_name(_broken_result(parsed, "learner", env_name="AntBulletEnv-v0"))
    with pytest.raises(AssertionError):
        present = [f for f in parsed.by_service["actor"]["present"] if f != "env_name"]
        check_same_env_name(_broken_result(parsed, "actor", present=present))
    with pytest.raises(AssertionError):
        check_commands_parse(_broken_result(parsed, "actor", ok=False, error="x"))
    with pytest.raises(AssertionError):
        check_root_dir_on_shared_volume(compose, _broken_result(parsed, "actor", root_dir="/tmp"))
    with pytest.raises(AssertionError):
        check_clients_reach_server(compose, _broken_result(parsed, "learner", address="x:1"))
    with pytest.raises(AssertionError):
        broken = copy.deepcopy(parsed)
        module, controls = next(iter(broken.controls.items()))
        controls[0][2]["ok"] = True
        check_negative_controls(broken)


def test_yaml_loader():
    doc = parse_yaml("a: &x {b: 1, c: 2}\nd:\n  <<: *x\n  c: 3\n")
    assert doc["d"] == {"b": 1, "c": 3}  # merge keys, overridable
    with pytest.raises(AssertionError, match="duplicate"):
        parse_yaml("s:\n  ports: [1]\n  ports: [2]\n")


def test_interpolation():
    assert interpolate("--env_name=${SAC_ENV_NAME:-Pendulum-v1}") == "--env_name=Pendulum-v1"
    assert interpolate("${A-x} $$HOME") == "x $HOME"
    with pytest.raises(AssertionError):
        interpolate("--env_name=${SAC_ENV_NAME}")
    with pytest.raises(AssertionError):
        interpolate("--env_name=$SAC_ENV_NAME")


DOCKERFILE_BREAKAGES = [
    ("ARG BASE_IMAGE=python:3.11-slim", "ARG BASE_IMAGE=python:3.12-slim"),
    ("FROM ${BASE_IMAGE}", "FROM python:3.12-slim"),
    ("pip install", "pip download"),
    ("USER sac", "USER root"),
    ("USER sac\n", ""),
    ("TF_USE_LEGACY_KERAS=1", "TF_USE_LEGACY_KERAS=0"),
    ("COPY sac_distributed ./sac_distributed", "COPY sac_distributd ./sac_distributed"),
]


@pytest.mark.parametrize("old,new", DOCKERFILE_BREAKAGES)
def test_dockerfile_check_can_fail(old, new):
    text = DOCKERFILE.read_text()
    _passes_or_skip(check_dockerfile, text)
    assert old in text, f"breakage {old!r} no longer matches the Dockerfile; update the test."
    with pytest.raises(AssertionError):
        check_dockerfile(text.replace(old, new))
