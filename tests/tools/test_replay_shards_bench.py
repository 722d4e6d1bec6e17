"""benchmarks/compare.py --mode=replay_shards: its flags, its arithmetic, its worker
(and the actor piece's weight-pull interval flag).

The worker test drives one real bench.shard_worker process against an
in-process Reverb server holding our tables: it writes, then samples, and
the server's own insert count must show the writes. The cgroup test puts a
real busy child process into a CPU-capped cgroup (it needs root; skipped
without). Timings are not checked.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import reverb

from benchmarks.bench import cgroups, settings, shards
from benchmarks.bench.experience import inserted_items
from benchmarks.bench.settings import parse_settings, throughput_hparams
from sac_distributed import replay
from sac_distributed.config import ServerConfig
from sac_distributed.envs import loader as env_loader

SHARDS = ["--mode=replay_shards"]


def _parse_error(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        parse_settings(list(argv))
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_shard_flags_parse():
    s = parse_settings([*SHARDS, "--shard_counts=1,2", "--writers=3", "--samplers=2"])
    assert (s.mode, s.shard_counts, s.writers, s.samplers) == ("replay_shards", (1, 2), 3, 2)


def test_bad_shard_counts_are_refused(capsys):
    assert "comma-separated integers" in _parse_error(capsys, *SHARDS, "--shard_counts=1,two")
    assert "positive numbers of servers" in _parse_error(capsys, *SHARDS, "--shard_counts=0,2")


def test_too_few_writers_or_samplers_for_the_shards_are_refused(capsys):
    err = _parse_error(capsys, *SHARDS, "--shard_counts=1,4", "--writers=3")
    assert "--writers=3" in err and "largest --shard_counts (4)" in err
    err = _parse_error(capsys, *SHARDS, "--shard_counts=2", "--samplers=1")
    assert "--samplers=1" in err
    assert "--writers must be >= 1" in _parse_error(capsys, *SHARDS, "--writers=0")


def test_server_cpus_parses_and_defaults_to_uncapped(monkeypatch):
    assert parse_settings([*SHARDS]).server_cpus is None
    monkeypatch.setattr(settings.cgroups, "unavailable_reason", lambda: None)
    assert parse_settings([*SHARDS, "--server_cpus=0.2"]).server_cpus == 0.2


@pytest.mark.parametrize(
    "value, message",
    [
        ("fast", "must be a number of CPUs"),
        ("0", "must be between 0.01"),
        ("-1", "must be between 0.01"),
        ("nan", "must be between 0.01"),
        ("1000", "this machine's"),
    ],
)
def test_bad_server_cpus_are_refused(capsys, monkeypatch, value, message):
    monkeypatch.setattr(settings.cgroups, "unavailable_reason", lambda: None)
    assert message in _parse_error(capsys, *SHARDS, f"--server_cpus={value}")


def test_server_cpus_outside_replay_shards_is_refused(capsys):
    err = _parse_error(capsys, "--mode=actor_scaling", "--server_cpus=0.2")
    assert "--mode=replay_shards only" in err


def test_server_cpus_without_writable_cgroups_says_what_to_do(capsys, monkeypatch):
    monkeypatch.setattr(settings.cgroups, "unavailable_reason", lambda: "no cpu controller")
    err = _parse_error(capsys, *SHARDS, "--server_cpus=0.2")
    assert "--server_cpus=0.2: no cpu controller" in err


def test_no_cpu_controller_mounted_is_a_clear_error(tmp_path, monkeypatch):
    mounts = tmp_path / "mounts"
    mounts.write_text("proc /proc proc rw 0 0\n")
    monkeypatch.setattr(cgroups, "MOUNTS", str(mounts))
    with pytest.raises(cgroups.CgroupUnavailableError, match="leave out --server_cpus"):
        cgroups.find_hierarchy()


def test_usage_between_turns_counters_into_rates():
    a = shards.Usage(10.0, (100, 200), (1.0, 2.0), (5.0, 5.0), 1000, 2000)
    b = shards.Usage(12.0, (300, 600), (2.0, 2.5), (6.0, 7.0), 1300, 2400)
    usage = shards.usage_between(a, b, k=2, worker_rates=[10.0, 30.0])
    assert usage["server_inserts_per_s"] == pytest.approx(2 * 600 / 2.0)
    assert usage["server_cpu_cores"] == pytest.approx(0.75)
    assert usage["busiest_server_cpu_cores"] == pytest.approx(0.5)
    assert usage["worker_cpu_cores"] == pytest.approx(1.5)
    assert usage["machine_cpu_busy"] == pytest.approx(0.75)
    assert (usage["workers_per_s"], usage["slowest_worker_per_s"]) == (40.0, 10.0)
    assert "server_cpu_of_cap" not in usage


def test_usage_between_reads_capped_servers_against_their_cap():
    a = shards.Usage(10.0, (0, 0), (1.0, 2.0), (0.0,), 0, 10, ((100, 10), (50, 0)))
    b = shards.Usage(12.0, (9, 9), (1.4, 2.36), (1.0,), 5, 20, ((120, 28), (70, 20)))
    usage = shards.usage_between(a, b, k=1, worker_rates=[1.0], server_cpus=0.2)
    assert usage["server_cpu_of_cap"] == pytest.approx((0.2 + 0.18) / 2 / 0.2)
    assert usage["server_throttled"] == pytest.approx((18 + 20) / 40)


def test_insert_limit_reads_machine_before_server():
    assert shards.insert_limit(0.95, offered_load=5.0) == "machine"
    assert shards.insert_limit(0.5, offered_load=5.0) == "server"
    assert shards.insert_limit(0.5, offered_load=1.1) == "writers"


def test_insert_limit_with_capped_servers():
    # At its cap with CPU left on the machine: the server held the inserts back.
    assert shards.insert_limit(0.6, offered_load=1.1, server_cpu_of_cap=0.97) == "server"
    # A saturated machine is read first, cap or not.
    assert shards.insert_limit(0.95, offered_load=5.0, server_cpu_of_cap=0.99) == "machine"
    # Below the cap: the writers' offered load decides, as uncapped.
    assert shards.insert_limit(0.6, offered_load=1.1, server_cpu_of_cap=0.5) == "writers"
    assert shards.insert_limit(0.6, offered_load=3.0, server_cpu_of_cap=0.5) == "server"


def test_summary_and_table_show_the_cap(monkeypatch):
    monkeypatch.setattr(settings.cgroups, "unavailable_reason", lambda: None)
    s = parse_settings(
        [*SHARDS, "--shard_counts=1,2", "--writers=2", "--samplers=2", "--server_cpus=0.2"]
    )
    alone = [
        {
            "inserts_per_s": 1000.0,
            "server_cpu_cores": 0.3,
            "writer_cpu_cores": 0.9,
            "machine_cpu_busy": 0.6,
        }
    ]

    def run(inserts, of_cap):
        return {
            "inserts_per_s": inserts,
            "writers_reported_inserts_per_s": inserts,
            "slowest_writer_inserts_per_s": inserts / 2,
            "insert_server_cpu_cores": 0.2,
            "insert_busiest_server_cpu_cores": 0.2,
            "insert_writer_cpu_cores": 0.5,
            "insert_machine_cpu_busy": 0.5,
            "samples_per_s": 100.0,
            "sample_server_cpu_cores": 0.2,
            "sample_sampler_cpu_cores": 0.5,
            "sample_machine_cpu_busy": 0.5,
            "learner_steps_per_s": 10.0,
            "insert_server_cpu_of_cap": of_cap,
            "insert_server_throttled": 0.8,
            "sample_server_cpu_of_cap": of_cap,
        }

    result = shards.summarize(
        s, throughput_hparams(s), alone, {"1": [run(1000.0, 0.98)], "2": [run(1800.0, 0.95)]}, 1.0
    )
    assert result["config"]["server_cpus"] == 0.2
    one, two = result["replay_shards"]["1"], result["replay_shards"]["2"]
    assert (one["insert_limit"], two["insert_speedup"]) == ("server", pytest.approx(1.8))
    table = shards.format_replay_shards_table(result)
    assert "each server capped at 0.2 CPU" in table and "98%" in table and "80%" in table


def _cgroups_or_skip() -> None:
    reason = cgroups.unavailable_reason()
    if reason:
        pytest.skip(f"cgroups not writable here (CI without root?): {reason}")


def test_capped_cgroup_holds_a_real_process_and_is_removed(tmp_path):
    _cgroups_or_skip()
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    name = f"sac_bench_test_{os.getpid()}"
    try:
        with cgroups.CpuCap(0.1, name) as cap:
            cap.add(child.pid)
            version = cap.hierarchy.version
            assert cgroups.cgroup_of(child.pid, version) == cap.relative_path
            assert cap.relative_path.endswith("/" + name)
            assert cap.pids() == [child.pid]
            if version == 1:
                files = ("cpu.cfs_period_us", "cpu.cfs_quota_us")
                values = [(Path(cap.path) / f).read_text().strip() for f in files]
                assert values == ["10000", "1000"]
            assert os.path.isdir(cap.path)
            # The child is still running when the cap is removed: it goes back out.
        assert not os.path.exists(cap.path)
        assert cgroups.cgroup_of(child.pid, version) == cgroups.cgroup_of(os.getpid(), version)
    finally:
        child.kill()
        child.wait()


def test_cgroup_is_removed_after_its_process_is_killed_and_on_errors():
    _cgroups_or_skip()
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    with pytest.raises(RuntimeError, match="boom"):
        with cgroups.CpuCap(0.1, f"sac_bench_test_err_{os.getpid()}") as cap:
            cap.add(child.pid)
            child.kill()
            child.wait()
            raise RuntimeError("boom")
    assert not os.path.exists(cap.path)


def test_cpu_counters_of_this_process_and_machine():
    start = shards.process_cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        pass
    assert shards.process_cpu_seconds(os.getpid()) > start
    busy, total = shards.machine_cpu_ticks()
    assert 0 < busy <= total


@pytest.mark.slow
def test_worker_writes_then_samples_a_real_server(tmp_path):
    s = parse_settings([*SHARDS, "--shard_counts=1", "--writers=1", "--samplers=1"])
    hp = throughput_hparams(s)
    config = ServerConfig(s.env_name, hp, str(tmp_path))
    server = reverb.Server(replay.make_tables(config, env_loader.specs_for(s.env_name)), port=None)
    address = f"localhost:{server.port}"
    worker = shards.Worker(s, hp, 0, str(tmp_path / "worker.log"))
    try:
        worker.receive(shards.WORKER_START_TIMEOUT_S)
        worker.send({"cmd": "prepare_writer", "address": address})
        worker.receive()
        now = time.monotonic()
        worker.send({"cmd": "write", "start": now + 0.2, "end": now + 1.2})
        assert worker.receive()["per_s"] > 0
        assert inserted_items(reverb.Client(address), replay.REPLAY_TABLE) > hp.batch_size
        worker.send({"cmd": "prepare_sampler", "address": address, "batch_size": hp.batch_size})
        worker.receive()
        now = time.monotonic()
        worker.send({"cmd": "sample", "start": now + 0.2, "end": now + 1.2})
        assert worker.receive()["per_s"] > 0
        worker.send({"cmd": "sample", "start": 0, "end": 0})  # no sampler any more
        with pytest.raises(RuntimeError, match="sample before prepare_sampler"):
            worker.receive()
    finally:
        worker.close()
        server.stop()
    assert worker.proc.returncode == 0


def test_cfs_quota_keeps_short_periods_and_the_kernel_minimum():
    assert cgroups.cfs_quota(0.2) == (10_000, 2_000)
    assert cgroups.cfs_quota(1.5) == (10_000, 15_000)
    assert cgroups.cfs_quota(0.05) == (20_000, 1_000)  # 0.5 ms per 10 ms is too little
    assert cgroups.cfs_quota(0.01) == (100_000, 1_000)


def test_cgroup_v2_is_found_and_written_as_cpu_max(tmp_path, monkeypatch):
    # A stand-in v2 hierarchy (plain files): detection, +cpu delegation, cpu.max.
    (tmp_path / "cgroup.controllers").write_text("cpu io memory\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    mounts = tmp_path / "mounts"
    mounts.write_text(f"cgroup2 {tmp_path} cgroup2 rw 0 0\n")
    monkeypatch.setattr(cgroups, "MOUNTS", str(mounts))
    hierarchy = cgroups.find_hierarchy()
    assert (hierarchy.version, hierarchy.mount) == (2, str(tmp_path))
    cap = cgroups.CpuCap(0.25, "capped", cgroups.Hierarchy(2, str(tmp_path), str(tmp_path)))
    assert (tmp_path / "capped" / "cpu.max").read_text() == "2500 10000"
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+cpu"
    assert cap.relative_path == "/capped"


def test_actor_pull_interval_defaults_to_the_actor_jobs_and_rejects_zero(capsys):
    """compare.py's actor piece pulls weights as often as an actor job does unless
    --variable_update_interval says otherwise; a non-positive interval is refused."""
    from sac_distributed.config import ActorConfig

    job_default = ActorConfig("Pendulum-v1", throughput_hparams(parse_settings([])), "/tmp")
    assert parse_settings([]).variable_update_interval == job_default.variable_update_interval
    assert parse_settings(["--variable_update_interval=100"]).variable_update_interval == 100
    err = _parse_error(capsys, "--variable_update_interval=0")
    assert "--variable_update_interval must be >= 1, got 0" in err
