"""Every console script's --help lists its own flags (sac-evaluate's and sac-evaluator's say
how the two differ), and a bad flag is a user error.

Each script in setup.py runs as installed (the venv's console script beside
this interpreter, where absl's `sys.argv[0]` is a generated file that defines
no flags) and as `python -m`; nothing here imports TensorFlow.
"""

import functools
import os
import re
import subprocess
import sys

import pytest
from support.processes import setup_py_console_scripts

from sac_distributed.bin import _common, _run_flags

TIMEOUT_S = 120
SCRIPTS = setup_py_console_scripts()
# Shared flags each binary reads besides those its module defines (at least these).
SHARED = {
    "reverb_server": _common.SHARED_FLAGS,
    "actor": _common.SHARED_FLAGS,
    "learner": _common.SHARED_FLAGS,
    "evaluator": _common.SHARED_FLAGS,
    "launch": _common.SHARED_FLAGS + _run_flags.RUN_FLAGS,
    "render": _common.SHARED_FLAGS + _run_flags.RUN_FLAGS,
    "status": ("root_dir", "connect_timeout"),
    "evaluate": ("env_name", "seed"),
    "plot": ("root_dir",),
}
ABSL_FLAGS = ("--logtostderr", "--alsologtostderr", "--flagfile", "--log_dir", "--pdb")
_FLAGS_OF = """
from absl import flags
from sac_distributed.bin import {module}
by_module = flags.FLAGS.flags_by_module_dict()
print(*[f.name for f in by_module.get({module}.__name__, [])])
print(*[f.name for m, fs in by_module.items() if m.startswith("sac_distributed") for f in fs])
"""


@functools.cache  # one child per module, for both ways of running it
def _flags_of(module: str):
    """(the flags `module` defines, every flag sac_distributed defines in its process);
    read in a child: binaries define some of the same names, which one process cannot."""
    result = subprocess.run(
        [sys.executable, "-c", _FLAGS_OF.format(module=module)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    own, ours = result.stdout.splitlines()
    assert own, f"sac_distributed.bin.{module} defines no flags?"
    return set(own.split()), set(ours.split())


def _command(script: str, module: str, installed: bool):
    if installed:
        return [os.path.join(os.path.dirname(sys.executable), script)]
    return [sys.executable, "-m", f"sac_distributed.bin.{module}"]


def _help_flags(script: str, installed: bool):
    """Both help flags for each binary, one through each way of running it (a process
    each, the costly part of this file); both through `python -m` when the console
    script is not installed."""
    if installed:
        return ("--help",)
    console_script = _command(script, "", installed=True)[0]
    return ("--helpshort",) if os.path.exists(console_script) else ("--help", "--helpshort")


def test_setup_py_lists_every_binary():
    assert len(SCRIPTS) == 9 and {m for _, m in SCRIPTS} == set(SHARED), SCRIPTS


@pytest.mark.parametrize("installed", [True, False], ids=["console_script", "python_m"])
@pytest.mark.parametrize("script, module", SCRIPTS, ids=[s for s, _ in SCRIPTS])
def test_help_lists_the_binarys_own_flags_and_not_absls(script, module, installed):
    command = _command(script, module, installed)
    if installed and not os.path.exists(command[0]):
        pytest.skip(f"{command[0]} is not installed (pip install -e .)")
    own, ours = _flags_of(module)
    for help_flag in _help_flags(script, installed):
        result = subprocess.run(
            [*command, help_flag], capture_output=True, text=True, timeout=TIMEOUT_S
        )
        assert result.returncode == 0, result.stderr[-2000:]
        listed = set(re.findall(r"^\s+--(?:\[no\])?(\w+):", result.stdout, re.M))
        assert own | set(SHARED[module]) <= listed, result.stdout[-3000:]
        assert listed <= ours, f"not sac_distributed's: {listed - ours}"
        assert not any(name in result.stdout for name in ABSL_FLAGS), result.stdout
        assert result.stdout.startswith(f"{script}:"), result.stdout[:500]  # the usage text


@pytest.mark.parametrize("script, module", SCRIPTS, ids=[s for s, _ in SCRIPTS])
def test_an_unknown_flag_is_one_line_exit_2_pointing_to_help(script, module):
    result = subprocess.run(
        [sys.executable, "-m", f"sac_distributed.bin.{module}", "--no_such_flag=1"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.splitlines() == [
        "error: Unknown command line flag 'no_such_flag' (--help lists the flags)"
    ], result.stderr[-2000:]


def test_a_stray_argument_is_one_line_exit_2():
    result = subprocess.run(
        [sys.executable, "-m", "sac_distributed.bin.plot", "results.csv"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.splitlines() == [
        "error: Unexpected arguments ['results.csv']: every option is a --flag=value "
        "(--help lists the flags)"
    ]


def test_a_bad_flag_value_is_exit_2():
    result = subprocess.run(
        [sys.executable, "-m", "sac_distributed.bin.launch", "--num_actors=two"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: flag --num_actors=two"), lines


# sac-evaluator and sac-evaluate: near names, different programs. What the first
# lines of each one's --help must say, about itself and about the other.
EVALUATION_PROGRAMS = {"evaluator": "sac-evaluate", "evaluate": "sac-evaluator"}
HOW_THEY_DIFFER = (
    "evaluator job",  # sac-evaluator: a job of the run,
    "Reverb server",  # reading the learner's weights from the server
    "during training",
    "exported policy directory",  # sac-evaluate: a tool on an exported policy
    "after or outside a run",
    "--video",
)


@pytest.mark.parametrize("module", sorted(EVALUATION_PROGRAMS))
def test_evaluate_and_evaluator_help_say_how_they_differ(module):
    result = subprocess.run(
        [sys.executable, "-m", f"sac_distributed.bin.{module}", "--helpshort"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    first_lines = " ".join(" ".join(result.stdout.splitlines()[:6]).split())
    other = EVALUATION_PROGRAMS[module]
    assert re.search(rf"{other}\b", first_lines), first_lines  # sac-evaluate, not a prefix
    missing = [phrase for phrase in HOW_THEY_DIFFER if phrase not in first_lines]
    assert not missing, f"{missing} not in: {first_lines}"
