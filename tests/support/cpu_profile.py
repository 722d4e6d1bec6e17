"""Opt-in pytest plugin: the CPU seconds each test and each test file costs, to find
what to cut when the suite runs long (issue 41).

    PYTHONPATH=tests .venv/bin/python -m pytest -q -n 3 --dist loadfile -p support.cpu_profile

Each worker appends one JSON line per test to $CPU_PROFILE_OUT (default
suite_cpu.jsonl): the worker's own CPU seconds over the test (its setup, call and
teardown, so a module-scoped fixture counts for the first test that uses it), those
of the children it reaped (the binaries a test starts and waits for), and wall
seconds. The controller prints the files and the tests by CPU at the end. Processes a
test leaves to others (Ray's workers, grandchildren killed rather than reaped) are not
counted.
"""

import collections
import json
import os
import resource
import time

import pytest

OUT = os.environ.get("CPU_PROFILE_OUT", "suite_cpu.jsonl")


def _cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def pytest_configure(config):
    if not hasattr(config, "workerinput") and os.path.exists(OUT):  # the controller
        os.remove(OUT)  # this run's tests only


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    own0, children0 = _cpu()
    wall0 = time.monotonic()
    yield
    own, children = _cpu()
    row = {
        "test": item.nodeid,
        "file": os.path.relpath(str(item.fspath)),
        "self_s": round(own - own0, 2),
        "children_s": round(children - children0, 2),
        "wall_s": round(time.monotonic() - wall0, 2),
    }
    with open(OUT, "a") as f:
        f.write(json.dumps(row) + "\n")


def _by_file(rows):
    files = collections.defaultdict(lambda: {"cpu_s": 0.0, "wall_s": 0.0})
    for row in rows:
        files[row["file"]]["cpu_s"] += row["cpu_s"]
        files[row["file"]]["wall_s"] += row["wall_s"]
    return sorted(files.items(), key=lambda kv: -kv[1]["cpu_s"])


def pytest_terminal_summary(terminalreporter):
    if not os.path.exists(OUT):
        return
    with open(OUT) as f:
        rows = [json.loads(line) for line in f]
    for row in rows:
        row["cpu_s"] = row["self_s"] + row["children_s"]
    total = sum(r["cpu_s"] for r in rows) or 1.0
    write = terminalreporter.write_line
    terminalreporter.section(f"CPU seconds by test file ({OUT})")
    for name, f in _by_file(rows)[:25]:
        share = f["cpu_s"] / total
        write(f"{f['cpu_s']:8.1f} s cpu {share:6.1%}  wall {f['wall_s']:7.1f} s  {name}")
    write(f"{total:8.1f} s cpu in all, {len(rows)} tests")
    terminalreporter.section("CPU seconds by test")
    for row in sorted(rows, key=lambda r: -r["cpu_s"])[:30]:
        write(f"{row['cpu_s']:8.1f} s cpu  wall {row['wall_s']:7.1f} s  {row['test']}")
