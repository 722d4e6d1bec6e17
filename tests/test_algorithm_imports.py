"""The algorithm side imports no Reverb, no Ray, no job or launcher code, defines no flags.

The rule (README, Architecture) is for the whole `sac_distributed/algorithm/`
folder, so the check imports every module in it, found by listing the folder:
a module added later is checked without editing this test. It runs in a fresh
interpreter in which importing `reverb` or `ray` (or any of their submodules)
raises ImportError, as on a machine without them.
"""

import json
import subprocess
import sys
import textwrap

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
        f"sac_distributed.algorithm.{info.name}"
        for info in pkgutil.iter_modules(algorithm.__path__)
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
        "sac_distributed.algorithm.agent",
        "sac_distributed.algorithm.sac_learner",
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
    above = ("sac_distributed.algorithm", "sac_distributed.replay", "sac_distributed.jobs")
    assert [n for n in found["imported"] if n.startswith(above)] == []
    assert found["tensorflow_light"] is False, "envs/__init__ or envs.sources imports TensorFlow"
