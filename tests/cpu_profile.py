"""Opt-in pytest plugin: the CPU seconds each test file costs, to find what to cut when
the suite runs long (issue 41).

    PYTHONPATH=tests .venv/bin/python -m pytest -q -n 3 --dist loadfile -p cpu_profile

Each worker appends one JSON line per file to $CPU_PROFILE_OUT (default
suite_cpu.jsonl): the worker's own CPU seconds over the file, those of the children it
reaped (the binaries a test starts and waits for), and wall seconds. The controller
prints the files by CPU at the end. Processes a test leaves to others (Ray's workers,
grandchildren killed rather than reaped) are not counted.
"""

import json
import os
import resource
import time

OUT = os.environ.get("CPU_PROFILE_OUT", "suite_cpu.jsonl")
_current = {}


def _cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _record_file():
    if not _current:
        return
    own, children = _cpu()
    own0, children0 = _current["cpu"]
    row = {
        "file": _current["file"],
        "self_s": round(own - own0, 2),
        "children_s": round(children - children0, 2),
        "wall_s": round(time.monotonic() - _current["wall"], 2),
    }
    with open(OUT, "a") as f:
        f.write(json.dumps(row) + "\n")


def pytest_configure(config):
    if not hasattr(config, "workerinput") and os.path.exists(OUT):  # the controller
        os.remove(OUT)  # this run's files only


def pytest_runtest_protocol(item, nextitem):
    path = os.path.relpath(str(item.fspath))
    if _current.get("file") != path:
        _record_file()
        _current.update(file=path, cpu=_cpu(), wall=time.monotonic())


def pytest_sessionfinish(session, exitstatus):
    _record_file()


def pytest_terminal_summary(terminalreporter):
    if not os.path.exists(OUT):
        return
    with open(OUT) as f:
        rows = [json.loads(line) for line in f]
    for row in rows:
        row["cpu_s"] = row["self_s"] + row["children_s"]
    rows.sort(key=lambda r: -r["cpu_s"])
    total = sum(r["cpu_s"] for r in rows) or 1.0
    terminalreporter.section(f"CPU seconds by test file ({OUT})")
    for row in rows[:25]:
        terminalreporter.write_line(
            f"{row['cpu_s']:8.1f} s cpu {row['cpu_s'] / total:6.1%}  "
            f"wall {row['wall_s']:7.1f} s  {row['file']}"
        )
    terminalreporter.write_line(f"{total:8.1f} s cpu in all, {len(rows)} files")
