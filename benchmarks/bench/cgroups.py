"""CPU caps for benchmark child processes, through Linux cgroups (v1 or v2).

A `CpuCap` is one fresh cgroup with a CFS quota of `cpus` CPUs: every process
put in it gets at most that much CPU time per scheduling period, however idle
the machine. replay_shards mode puts each shard's server in its own, so one
server on a 2-core machine behaves like a server on its own machine with a
fixed CPU budget, and can become the bottleneck before the machine does.

Where the cpu controller lives is read from /proc/self/mounts: a cgroup v1
hierarchy mounted with the `cpu` option (files cpu.cfs_quota_us,
cpu.cfs_period_us) is preferred, else a cgroup v2 hierarchy whose
cgroup.controllers lists `cpu` (file cpu.max). Writing a pid to cgroup.procs
moves all of that process's threads, in both versions. Creating cgroups needs
root (or a delegated subtree); `unavailable_reason()` says what is missing.
Standard library only.
"""

from __future__ import annotations

import errno
import math
import os
import time
from typing import List, NamedTuple, Optional, Tuple

from absl import logging

# CFS period. The kernel's default, 100 ms, would let a 0.1-CPU server run 10 ms and
# then freeze 90 ms: writers with a bounded window of unconfirmed items would wait out
# the freeze (latency-bound, not CPU-bound). 10 ms periods make it a slower server.
PERIOD_US = 10_000
MIN_QUOTA_US = 1_000  # the kernel refuses smaller quotas (and periods)
MAX_PERIOD_US = 1_000_000  # and longer periods
RMDIR_TIMEOUT_S = 10.0  # a killed process may take a moment to leave its cgroup
MOUNTS = "/proc/self/mounts"


class CgroupUnavailableError(RuntimeError):
    """No writable cgroup cpu controller on this machine."""


class Hierarchy(NamedTuple):
    """Where new cgroups are made: the cpu controller's mount and the parent in it."""

    version: int  # 1 or 2
    mount: str  # e.g. /sys/fs/cgroup/cpu (v1) or /sys/fs/cgroup (v2)
    parent: str  # absolute directory new cgroups go under (this process's cgroup)


def _cpu_mounts() -> Tuple[Optional[str], Optional[str]]:
    """(v1 mount with the cpu controller, v2 mount that offers cpu); None if absent."""
    v1 = v2 = None
    with open(MOUNTS) as f:
        for line in f:
            fields = line.split()
            if len(fields) < 4:
                continue
            path, fstype, options = fields[1], fields[2], fields[3].split(",")
            if fstype == "cgroup" and "cpu" in options and v1 is None:
                v1 = path
            elif fstype == "cgroup2" and v2 is None and "cpu" in _controllers(path):
                v2 = path
    return v1, v2


def _controllers(v2_dir: str) -> List[str]:
    try:
        with open(os.path.join(v2_dir, "cgroup.controllers")) as f:
            return f.read().split()
    except OSError:
        return []


def cgroup_of(pid: int, version: int) -> Optional[str]:
    """The cpu-controller cgroup of `pid` (e.g. "/sac_bench_1_0"), from /proc/<pid>/cgroup."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            hierarchy_id, controllers, path = line.rstrip("\n").split(":", 2)
            if version == 2 and hierarchy_id == "0" and controllers == "":
                return path
            if version == 1 and "cpu" in controllers.split(","):
                return path
    return None


def find_hierarchy() -> Hierarchy:
    """The cpu controller's hierarchy; raises CgroupUnavailableError if there is none."""
    v1, v2 = _cpu_mounts()
    if v1 is None and v2 is None:
        raise CgroupUnavailableError(
            "no cgroup cpu controller is mounted (no cgroup v1 mount with the 'cpu' option "
            "in /proc/self/mounts, and no cgroup2 mount whose cgroup.controllers lists cpu); "
            "run on a Linux host or container with the cpu controller, or leave out "
            "--server_cpus"
        )
    version, mount = (1, v1) if v1 is not None else (2, v2)
    own = cgroup_of(os.getpid(), version) or "/"
    parent = os.path.normpath(os.path.join(mount, own.lstrip("/")))
    if not os.path.isdir(parent):  # a container that sees its host's path names
        parent = mount
    return Hierarchy(version, mount, parent)


def unavailable_reason() -> Optional[str]:
    """Why CpuCap cannot work here (with what to do), or None if it can: makes and
    removes one probe cgroup."""
    try:
        with CpuCap(1.0, f"sac_bench_probe_{os.getpid()}"):
            pass
    except CgroupUnavailableError as e:
        return str(e)
    return None


class CpuCap:
    """One new cgroup holding its processes to `cpus` CPUs; `close()` removes it.

    Args:
      cpus: CPU time per wall second the processes may use together (0.2 = a
        fifth of one core, 2.0 = two cores).
      name: the cgroup's directory name, unique on the machine.
      hierarchy: where to make it (default: `find_hierarchy()`).
    """

    def __init__(self, cpus: float, name: str, hierarchy: Optional[Hierarchy] = None):
        self.cpus = cpus
        self.hierarchy = hierarchy or find_hierarchy()
        self.path = os.path.join(self.hierarchy.parent, name)
        try:
            if self.hierarchy.version == 2:
                _enable_cpu_controller(self.hierarchy.parent)
            os.mkdir(self.path)
        except OSError as e:
            raise CgroupUnavailableError(_not_writable(self.path, e)) from e
        try:
            self._set_quota(cpus)
        except OSError as e:
            self.close()
            raise CgroupUnavailableError(_not_writable(self.path, e)) from e

    @property
    def relative_path(self) -> str:
        """The cgroup as /proc/<pid>/cgroup names it, e.g. "/sac_bench_1_0"."""
        return "/" + os.path.relpath(self.path, self.hierarchy.mount)

    def _set_quota(self, cpus: float) -> None:
        period, quota = cfs_quota(cpus)
        if self.hierarchy.version == 1:
            _write(os.path.join(self.path, "cpu.cfs_period_us"), str(period))
            _write(os.path.join(self.path, "cpu.cfs_quota_us"), str(quota))
        else:
            _write(os.path.join(self.path, "cpu.max"), f"{quota} {period}")

    def add(self, pid: int) -> None:
        """Moves process `pid`, all its threads, into this cgroup."""
        _write(os.path.join(self.path, "cgroup.procs"), str(pid))

    def pids(self) -> List[int]:
        """The processes in this cgroup now (none once it is closed)."""
        try:
            return [int(x) for x in _read(os.path.join(self.path, "cgroup.procs")).split()]
        except FileNotFoundError:
            return []

    def throttling(self) -> Tuple[int, int]:
        """(CFS periods with runnable tasks, periods in which the quota ran out), from
        cpu.stat, counted since the cgroup was made."""
        stat = dict(
            line.split() for line in _read(os.path.join(self.path, "cpu.stat")).splitlines()
        )
        return int(stat["nr_periods"]), int(stat["nr_throttled"])

    def close(self) -> None:
        """Moves any process left back to the parent cgroup and removes this one."""
        if not os.path.isdir(self.path):
            return
        parent_procs = os.path.join(self.hierarchy.parent, "cgroup.procs")
        deadline = time.monotonic() + RMDIR_TIMEOUT_S
        while True:
            for pid in self.pids():
                try:
                    _write(parent_procs, str(pid))
                except OSError:  # it exited meanwhile
                    pass
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError as e:
                if e.errno != errno.EBUSY or time.monotonic() > deadline:
                    logging.warning("Could not remove cgroup %s: %s", self.path, e)
                    return
                time.sleep(0.05)  # an exiting process still counted in it

    def __enter__(self) -> CpuCap:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def cfs_quota(cpus: float) -> Tuple[int, int]:
    """(period, quota) in microseconds for `cpus` CPUs: PERIOD_US, or longer where
    the quota would be below the kernel's 1 ms minimum."""
    period = min(MAX_PERIOD_US, max(PERIOD_US, math.ceil(MIN_QUOTA_US / cpus)))
    return period, max(MIN_QUOTA_US, round(cpus * period))


def _enable_cpu_controller(parent: str) -> None:
    """v2: children of `parent` get cpu.max only if its subtree_control has cpu."""
    control = os.path.join(parent, "cgroup.subtree_control")
    if "cpu" not in _read(control).split():
        _write(control, "+cpu")


def _not_writable(path: str, e: OSError) -> str:
    return (
        f"cannot make a CPU-capped cgroup at {path}: {e.strerror or e}. Run the benchmark "
        "as root (or with a delegated, writable cgroup subtree) on a machine whose cgroup "
        "cpu controller is mounted read-write, or leave out --server_cpus"
    )


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
