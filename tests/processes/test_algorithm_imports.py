"""The import rules of the layers, checked on the folders as they are listed.

* The algorithm side imports no Reverb, no Ray, no job or launcher code, and
  defines no flags. The rule (README, Architecture) is for the whole
  `sac_distributed/algorithm/` tree, so the check imports every module in it,
  found by walking the folders: a module (or an algorithm folder) added later is
  checked without editing this test. It runs in a fresh interpreter in which
  importing `reverb` or `ray` (or any of their submodules) raises ImportError,
  as on a machine without them.
* The registry, every `__init__` and every algorithm folder's `config.py` (its
  option checks, which the launcher and every config consult) import no TensorFlow.
* An algorithm folder never imports another one (crossq/ nothing of sac/, and
  the reverse); `replay/` and `envs/` import no algorithm folder, and `envs/`
  nothing of `algorithm/` at all. These are read from the source (what a module
  imports, anywhere in it), because the config package loads the registry's
  entries, the folders' config modules, whenever it checks a Hyperparams.
"""

import ast
import json
import os
import subprocess
import sys
import textwrap

import sac_distributed

PACKAGE_DIR = os.path.dirname(sac_distributed.__file__)
ALGORITHM_DIR = os.path.join(PACKAGE_DIR, "algorithm")

# Run in a child interpreter: prints {"modules": [...], "new_flags": [...],
# "transport": [...]} on success; an ImportError ends it with a traceback.
_CHILD = textwrap.dedent(
    """
    import importlib, json, pkgutil, sys

    FORBIDDEN = ("reverb", "ray")


    class Unimportable:
        '''A meta path finder for which the transport is not installed.'''

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in FORBIDDEN:
                raise ImportError(f"{name} is unimportable in this test")
            return None


    sys.meta_path.insert(0, Unimportable())
    for name in FORBIDDEN:
        sys.modules.pop(name, None)

    # What the algorithm builds on may define flags of its own; count only
    # the flags that appear once the algorithm's modules are imported.
    import tensorflow  # noqa: F401
    import tf_agents.agents  # noqa: F401
    from absl import flags

    before = set(flags.FLAGS)
    import sac_distributed.algorithm as algorithm

    modules = sorted(
        info.name
        for info in pkgutil.walk_packages(algorithm.__path__, "sac_distributed.algorithm.")
    )
    for module in modules:
        importlib.import_module(module)
    transport = sorted(
        name
        for name in sys.modules
        if name.split(".")[0] in FORBIDDEN
        or name.startswith(
            (
                "sac_distributed.replay",
                "sac_distributed.jobs",
                "sac_distributed.launchers",
                "sac_distributed.bin",
                "sac_distributed.tools",
            )
        )
    )
    print(json.dumps({
        "modules": modules,
        "new_flags": sorted(set(flags.FLAGS) - before),
        "transport": transport,
    }))
    """
)


def _import_the_algorithm_folder() -> dict:
    result = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_every_algorithm_module_imports_without_reverb_ray_jobs_or_flags():
    found = _import_the_algorithm_folder()
    # The listing found the folder's modules (not an empty package by mistake).
    assert {
        "sac_distributed.algorithm.registry",
        "sac_distributed.algorithm.sac.learner",
        "sac_distributed.algorithm.crossq.learner",
        "sac_distributed.algorithm.policy",
    } <= set(found["modules"])
    assert found["transport"] == []
    assert found["new_flags"] == []


def test_the_check_fails_for_a_module_that_imports_reverb():
    """The finder really makes Reverb unimportable (or the test above proves nothing)."""
    code = _CHILD.split("# What the algorithm builds on")[0] + "import reverb\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode != 0
    assert "reverb is unimportable in this test" in result.stderr


def test_the_crossq_learner_imports_no_reverb():
    """The CrossQ learner and the registry import in a fresh interpreter in which
    `reverb` is unimportable (test_crossq.py's own tests stay in one process)."""
    code = (
        "import sys; sys.modules['reverb'] = None; "
        "import sac_distributed.algorithm.crossq.learner, sac_distributed.algorithm.registry"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


# Every module of sac_distributed/envs/, imported in a fresh interpreter: prints the
# sac_distributed modules that came with them, and whether TensorFlow did when only
# the package and `sources` (what a launcher checks a name with) were imported.
_ENVS_CHILD = textwrap.dedent(
    """
    import importlib, json, pkgutil, sys

    import sac_distributed.envs as envs
    import sac_distributed.envs.sources  # noqa: F401
    light = "tensorflow" in sys.modules
    modules = sorted(f"sac_distributed.envs.{m.name}" for m in pkgutil.iter_modules(envs.__path__))
    for module in modules:
        importlib.import_module(module)
    ours = sorted(n for n in sys.modules if n.startswith("sac_distributed."))
    print(json.dumps({"modules": modules, "imported": ours, "tensorflow_light": light}))
    """
)


def test_envs_import_nothing_of_the_algorithm_replay_or_jobs():
    result = subprocess.run(
        [sys.executable, "-c", _ENVS_CHILD], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"sac_distributed.envs.loader", "sac_distributed.envs.sources"} <= set(found["modules"])
    # What the config package loads to check a Hyperparams: the registry and the
    # folders' TF-free config modules (test below); nothing else of algorithm/.
    entries = {"sac_distributed.algorithm", "sac_distributed.algorithm.registry"}
    entries |= {f"sac_distributed.algorithm.{f}" for f in _algorithm_folders()}
    entries |= {f"sac_distributed.algorithm.{f}.config" for f in _algorithm_folders()}
    above = ("sac_distributed.algorithm", "sac_distributed.replay", "sac_distributed.jobs")
    assert [n for n in found["imported"] if n.startswith(above) and n not in entries] == []
    assert found["tensorflow_light"] is False, "envs/__init__ or envs.sources imports TensorFlow"
    assert _imports_of_folder(os.path.join(PACKAGE_DIR, "envs"), "sac_distributed.algorithm") == []


# --- what the registry and the option checks import -----------------------------------

_LIGHT_CHILD = textwrap.dedent(
    """
    import importlib, json, pkgutil, sys

    import sac_distributed.algorithm as algorithm
    from sac_distributed.algorithm import registry

    inits = [
        info.name
        for info in pkgutil.walk_packages(algorithm.__path__, "sac_distributed.algorithm.")
        if info.ispkg
    ]
    for name in inits:
        importlib.import_module(name)
        importlib.import_module(name + ".config")
    from sac_distributed import config

    for entry in registry.entries():  # every entry's checks and preset, as a launcher runs them
        hparams = config.hyperparams_for("Pendulum-v1", {"algorithm": entry.name})
        config.LearnerConfig("Pendulum-v1", hparams, "/tmp/unused")
    print(json.dumps({
        "inits": inits,
        "entries": registry.names(),
        "tensorflow": sorted(n for n in sys.modules if n.split(".")[0] == "tensorflow")[:3],
    }))
    """
)


def test_the_registry_the_option_checks_and_every_init_import_no_tensorflow():
    result = subprocess.run(
        [sys.executable, "-c", _LIGHT_CHILD], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    folders = {f"sac_distributed.algorithm.{f}" for f in _algorithm_folders()}
    assert folders >= {"sac_distributed.algorithm.sac", "sac_distributed.algorithm.crossq"}
    assert set(found["inits"]) == folders
    assert {"sac", "crossq"} <= set(found["entries"])
    assert found["tensorflow"] == []


# --- what each folder imports, read from its source -------------------------------------


def _algorithm_folders():
    return sorted(
        name
        for name in os.listdir(ALGORITHM_DIR)
        if os.path.isfile(os.path.join(ALGORITHM_DIR, name, "__init__.py"))
    )


def _imported_modules(path: str):
    """Every module a source file imports (`from a import b` counts a and a.b)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def _imports_of_folder(folder: str, *prefixes: str):
    """(file, module) for each import under `folder` of a module named by `prefixes`."""
    found = []
    for root, _, files in os.walk(folder):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(root, name)
            for module in _imported_modules(path):
                if any(module == p or module.startswith(p + ".") for p in prefixes):
                    found.append((os.path.relpath(path, PACKAGE_DIR), module))
    return found


def test_an_algorithm_folder_imports_no_other_algorithm_folder():
    folders = _algorithm_folders()
    assert {"sac", "crossq"} <= set(folders)
    for folder in folders:
        others = [f"sac_distributed.algorithm.{f}" for f in folders if f != folder]
        assert _imports_of_folder(os.path.join(ALGORITHM_DIR, folder), *others) == []


def test_replay_imports_no_algorithm_folder():
    folders = [f"sac_distributed.algorithm.{f}" for f in _algorithm_folders()]
    assert _imports_of_folder(os.path.join(PACKAGE_DIR, "replay"), *folders) == []


def test_the_source_check_sees_an_import():
    """The source reader finds what the rules look for (or the tests above prove nothing)."""
    found = _imports_of_folder(os.path.join(ALGORITHM_DIR, "crossq"), "sac_distributed.algorithm")
    assert ("algorithm/crossq/learner.py", "sac_distributed.algorithm.learner") in found
