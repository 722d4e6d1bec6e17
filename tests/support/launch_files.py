"""Reading launch/ as Docker, Compose and kustomize read it, and running the binaries'
own flag parsers on command lines: what the launch-file tests share (test_compose,
test_compose_run, test_docker_compose, test_job_definitions, test_kubernetes,
test_kubernetes_run).

The compose file is parsed with PyYAML (a test extra), with Compose's
`${VAR:-default}` interpolation resolved to the defaults. `parse_with_binaries`
runs command lines through the real binaries' flag parsers and
`_config_from_flags()` in one subprocess (its _WORKER).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Mapping, Tuple

import yaml

from support.repo import REPO

LAUNCH = Path(REPO).resolve() / "launch"
COMPOSE_FILE = LAUNCH / "docker-compose.yml"
DOCKERFILE = LAUNCH / "Dockerfile"

REQUIRED_SERVICES = ("reverb_server", "actor", "learner", "evaluator", "tensorboard")
SERVER_SERVICE = "reverb_server"
CLIENT_SERVICES = ("actor", "learner", "evaluator")
PUBLIC_SERVICE = "tensorboard"

K8S_DIR = LAUNCH / "kubernetes"
CPU_OVERLAY = LAUNCH / "kubernetes-cpu"

# --- compose loading -----------------------------------------------------------

_BRACED = re.compile(r"\$(\$|\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_DEFAULTED = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(:?-)(.*)$", re.S)


def interpolate(text: str) -> str:
    """Compose interpolation with every variable unset: `${VAR:-default}` -> default.

    A variable without a default would become "" (with only a warning from
    Compose), so it fails here: the file must work without a .env file.
    """

    def substitute(match: re.Match) -> str:
        if match.group(1) == "$":
            return "$"
        inner = match.group(2) if match.group(2) is not None else match.group(3)
        defaulted = _DEFAULTED.match(inner)
        assert defaulted, (
            f"{match.group(0)!r} in the compose file has no default (${{VAR:-default}}); "
            "it would be empty without a .env file."
        )
        return defaulted.group(3)

    return _BRACED.sub(substitute, text)


def _interpolate_tree(node):
    if isinstance(node, str):
        return interpolate(node)
    if isinstance(node, list):
        return [_interpolate_tree(v) for v in node]
    if isinstance(node, dict):
        return {k: _interpolate_tree(v) for k, v in node.items()}
    return node


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys, as Compose does (PyYAML keeps the last)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            keys = [k.value for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"]
            dupes = sorted({k for k in keys if keys.count(k) > 1})
            assert not dupes, f"duplicate keys {dupes} {node.start_mark}"
        return super().construct_mapping(node, deep)


def parse_yaml(text: str):
    # Resolves anchors, aliases and `<<` merge keys like Compose.
    return yaml.load(text, Loader=_StrictLoader)


def load_compose(path: Path = COMPOSE_FILE) -> dict:
    raw = parse_yaml(path.read_text())
    assert isinstance(raw, dict), f"{path} is not a YAML mapping."
    return _interpolate_tree(raw)


def command_argv(service: Mapping) -> List[str]:
    command = service.get("command") or []
    entrypoint = service.get("entrypoint")
    assert entrypoint is None, "sac services must not override the image's entrypoint."
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    return argv


def console_scripts() -> Dict[str, str]:
    """sac-* console script -> module, from the installed package's entry points."""
    dist = importlib.metadata.distribution("sac_distributed")
    return {
        ep.name: ep.value.split(":")[0] for ep in dist.entry_points if ep.group == "console_scripts"
    }


def sac_commands(compose: Mapping) -> Dict[str, List[str]]:
    """service -> argv, for every service whose command is a sac-* script."""
    return {
        name: command_argv(service)
        for name, service in compose["services"].items()
        if command_argv(service) and command_argv(service)[0].startswith("sac-")
    }


def volume_mounts(service: Mapping) -> List[Tuple[str, str, bool]]:
    """(source, target, read_only) of each named-volume mount."""
    mounts = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            parts = volume.split(":")
            if len(parts) < 2:
                continue  # anonymous volume
            source, target = parts[0], parts[1]
            read_only = len(parts) > 2 and "ro" in parts[2].split(",")
            kind = "bind" if source.startswith((".", "/", "~")) else "volume"
        else:
            kind = volume.get("type", "volume")
            source, target = volume.get("source"), volume.get("target")
            read_only = bool(volume.get("read_only"))
        if kind == "volume" and source:
            mounts.append((source, target, read_only))
    return mounts


def dockerfile_instructions(text: str) -> List[Tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuations joined and comments dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    out = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, args = line.strip().partition(" ")
            out.append((keyword.upper(), args.strip()))
    return out


# --- running the real binaries' flag parsers ----------------------------------

# One interpreter imports what every binary imports (TensorFlow via
# sac_distributed.jobs, and the shared flags of sac_distributed.bin._common)
# once, then forks a child per binary that imports only that binary's module.
# Each child therefore has exactly the flags of the real `sac-*` process, so a
# flag of another binary is rejected as unknown. The children run no
# TensorFlow ops (absl parsing and dataclass validation only).
_WORKER = r"""
import dataclasses, importlib, json, os, sys, traceback
from absl import flags
from sac_distributed.bin import _common  # noqa: F401  (the shared flags)
from sac_distributed.config import ConfigError

FLAGS = flags.FLAGS
shared = set(FLAGS)
import sac_distributed.jobs  # noqa: E402,F401  (TensorFlow, TF-Agents, Reverb: slow)
# TensorFlow defines a few flags of its own; sac_distributed must define none here.
ours = {n: FLAGS.find_module_defining_flag(n) for n in set(FLAGS) - shared}
ours = {n: m for n, m in ours.items() if str(m).startswith("sac_distributed")}
assert not ours, f"imported before the fork, these flags would leak: {ours}"


def parse_all(module_name, cases):
    module = importlib.import_module(module_name)
    results = []
    for argv in cases:
        FLAGS.unparse_flags()
        result = {"ok": False, "stage": "flags", "error": None, "present": [], "config": None}
        results.append(result)
        try:
            rest = FLAGS(argv)
        except flags.Error as e:
            result["error"] = f"{type(e).__name__}: {e}"
            continue
        if rest[1:]:
            result["error"] = f"unexpected positional arguments {rest[1:]}"
            continue
        result["present"] = sorted(name for name in FLAGS if FLAGS[name].present)
        result["stage"] = "config"
        try:
            config = module._config_from_flags()
        except ConfigError as e:
            result["error"] = f"ConfigError: {e}"
            continue
        result.update(ok=True, stage=None, config=dataclasses.asdict(config))
    return results


out = {}
for module_name, cases in json.loads(sys.argv[1]).items():
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: one binary
        os.close(read_fd)
        try:
            payload = {"results": parse_all(module_name, cases)}
        except BaseException:
            payload = {"crash": traceback.format_exc()}
        with os.fdopen(write_fd, "w") as f:
            json.dump(payload, f, default=str)
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        payload = json.load(f)
    os.waitpid(pid, 0)
    out[module_name] = payload
print("RESULTS=" + json.dumps(out))
"""


def parse_with_binaries(cases: Mapping[str, List[List[str]]]) -> Dict[str, List[dict]]:
    """module -> one worker result per argv (see _WORKER)."""
    env = dict(
        os.environ,
        TF_USE_LEGACY_KERAS="1",
        TF_CPP_MIN_LOG_LEVEL="3",
        CUDA_VISIBLE_DEVICES="",
    )
    proc = subprocess.run(
        [sys.executable, "-c", _WORKER, json.dumps(dict(cases))],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULTS=")]
    assert proc.returncode == 0 and lines, f"flag-parsing worker failed:\n{proc.stderr[-3000:]}"
    payloads = json.loads(lines[-1][len("RESULTS=") :])
    results = {}
    for module, payload in payloads.items():
        assert "results" in payload, f"importing {module} failed:\n{payload.get('crash')}"
        results[module] = payload["results"]
    return results


# --- Kubernetes manifests -------------------------------------------------------


def by_kind_name(docs: List[dict]) -> Dict[tuple, dict]:
    keyed = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert len(keyed) == len(docs), "two objects share a kind and a name"
    return keyed


def pod_template(doc: dict) -> dict:
    return doc["spec"]["template"]


def container(doc: dict) -> dict:
    (only,) = pod_template(doc)["spec"]["containers"]
    return only


class KustomizeLite:
    """The kustomize features launch/ uses: resources (files, directories),
    `replicas`, and JSON 6902 `patches` with a kind/name target. Anything else
    fails, so an overlay that grows a feature gets a test that covers it."""

    KEYS = {"apiVersion", "kind", "resources", "replicas", "patches"}

    def build(self, directory: Path) -> List[dict]:
        spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
        unknown = set(spec) - self.KEYS
        assert not unknown, f"{directory}: kustomization features {unknown} are not checked here"
        docs: List[dict] = []
        for resource in spec.get("resources", []):
            path = (directory / resource).resolve()
            assert path.exists(), f"{directory}: resource {resource} does not exist"
            if path.is_dir():
                docs += self.build(path)
            else:
                docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
        for entry in spec.get("replicas", []):
            matches = [d for d in docs if d["metadata"]["name"] == entry["name"]]
            assert matches, f"{directory}: replicas for unknown {entry['name']}"
            for doc in matches:
                doc["spec"]["replicas"] = entry["count"]
        for patch in spec.get("patches", []):
            target = patch["target"]
            matches = [
                d
                for d in docs
                if d["kind"] == target["kind"] and d["metadata"]["name"] == target["name"]
            ]
            assert matches, f"{directory}: patch target {target} matches nothing"
            for doc in matches:
                for op in yaml.safe_load(patch["patch"]):
                    self.apply(doc, op)
        return docs

    @staticmethod
    def apply(doc: dict, op: dict) -> None:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        node = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if op["op"] == "remove":
            assert last in node, f"remove {op['path']}: nothing there"
            del node[last]
        elif op["op"] in ("add", "replace"):
            assert op["op"] == "add" or last in node, f"replace {op['path']}: nothing there"
            node[last] = op["value"]
        else:
            raise AssertionError(f"JSON patch op {op['op']} is not supported here")
