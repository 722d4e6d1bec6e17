"""benchmarks/compare.py --mode=replay_shards: its flags, its arithmetic, its worker.

The worker test drives one real bench.shard_worker process against an
in-process Reverb server holding our tables: it writes, then samples, and
the server's own insert count must show the writes. Timings are not checked.
"""

import os
import sys
import time

import pytest
import reverb

BENCH = os.path.join(os.path.dirname(__file__), "..", "benchmarks")
sys.path.insert(0, BENCH)

from bench import shards  # noqa: E402
from bench.experience import inserted_items  # noqa: E402
from bench.settings import parse_settings, throughput_hparams  # noqa: E402

from sac_distributed import replay  # noqa: E402
from sac_distributed import specs as specs_lib  # noqa: E402
from sac_distributed.config import ServerConfig  # noqa: E402

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


def test_insert_limit_reads_machine_before_server():
    assert shards.insert_limit(0.95, offered_load=5.0) == "machine"
    assert shards.insert_limit(0.5, offered_load=5.0) == "server"
    assert shards.insert_limit(0.5, offered_load=1.1) == "writers"


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
    server = reverb.Server(replay.make_tables(config, specs_lib.specs_for(s.env_name)), port=None)
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
